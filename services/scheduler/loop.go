package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/no8s/no8s/proto/enumpb"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/api/subjects"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/leader"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/internal/rbac"
	"github.com/no8s/no8s/services/internal/reconcilers"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/scheduler/dispatch"
	"github.com/no8s/no8s/services/scheduler/queue"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// leaseGrace is added to a worker's lease expiry before the scheduler looks
// again, so that a completion committed just before the expiry has arrived.
const leaseGrace = 200 * time.Millisecond

// maxFetch bounds the resources read in one ListReconcileState call.
const maxFetch = 1000

// maxDispatchBatch bounds the dispatches a dispatcher records (one
// RecordDispatches call, one transaction) and publishes together.
const maxDispatchBatch = 128

// loop is one leader term: the state of every resource, the wake-ups, and
// the dispatches in flight. Only run's goroutine touches its fields; the
// dispatchers talk to it through jobs and results.
type loop struct {
	s      *Service
	term   *leader.Term
	log    *slog.Logger
	stream jetstream.Stream // the work stream

	entries map[int64]*entry
	delay   *queue.Delay
	// live is the set of types a live reconciler serves; nil until the
	// registry has been read once.
	live map[reconcilers.TypeRef]bool
	// owns is what the reconciler of each type owns (registry; kept while
	// it is away), and byUID every resource's id by uid: they find the
	// owner to reconcile when a resource it owns changes (owns.go).
	owns  map[reconcilers.TypeRef]reconcilers.Owned
	byUID map[string]int64
	// dependents indexes what each resource's last attempt depends on
	// (Watches, WaitFor): the resources to reconcile when the one named
	// is created, changes or goes (depends.go).
	dependents map[trigger.Ref]map[int64]struct{}
	// byRef finds a resource's id by its name, and changes counts the
	// changes noted for dependents (each entry keeps the count at its
	// last, each flight the count at its dispatch).
	byRef   map[trigger.Ref]int64
	changes uint64
	// started is, for each type, when the loop last found one of its
	// dispatched items taken by a worker: its workers make progress, even
	// while items wait behind a backlog.
	started map[reconcilers.TypeRef]time.Time
	// seen remembers, from every read of the registry in this term, which
	// reconciler served each type and its replicas with their last
	// heartbeat, also once they are gone: what a ReconcilerNotResponding
	// condition names.
	seen seenReconcilers
	// fetch holds resources whose state must be read again; not before
	// fetchAfter (a backoff after a failed read).
	fetch      map[int64]struct{}
	fetchAfter time.Time
	// fetching: a read of states is in flight (one at a time); its answer
	// comes on fetched.
	fetching bool
	// reads counts the reads of states begun in this term (a fetch, a
	// page of a list); fetchRead is the number of the fetch in flight.
	// A flight whose item was found gone waits for a read begun after
	// that (absentAfter).
	reads, fetchRead uint64
	fetchReq         chan []int64
	fetched          chan fetchResult
	pending          []job
	jobs             chan []job
	results          chan result
	// traces: what the loop remembers of each resource's traced changes
	// (tracing on only).
	traces map[int64]traced
}

// fetchResult is the answer to a read of states: the states read, or the
// error that asks for the ids to be read again.
type fetchResult struct {
	ids    []int64
	states []*reconcilev1.ReconcileState
	err    error
}

// entry is one resource.
type entry struct {
	st     trigger.State
	flight *flight
	// condBusy: a SetCondition for the resource is in progress.
	condBusy bool
	// waitSince is when work for the resource was first found due while
	// no live reconciler served its type (zero otherwise).
	waitSince time.Time
	// warned: condition ReconcilerNotResponding was set for the current
	// wait (the flight in progress, or waitSince).
	warned bool
	// depSeq counts the changes of resources it owns or depends on; depDone is depSeq
	// as of its last dispatch. They differ while a change waits for one.
	// depRV is the highest revision among the changes counted since that
	// dispatch (unknown ones count as the highest): when its attempt began
	// after all of them were published, it saw them (answered).
	depSeq, depDone uint64
	depRV           int64
	// settled is its last lifecycle status other than reconciling: what
	// its owner saw last (owns.go).
	settled string
	// changed is the loop's count of changes at its last one (depends.go).
	changed uint64
}

// flight is the one outstanding dispatch of a resource.
type flight struct {
	id string
	at time.Time
	// dispatched is when it was dispatched (at moves on each check), for
	// the reason reason.
	dispatched time.Time
	reason     trigger.Reason
	// baseEpoch is the resource's lease epoch when dispatched: a higher one
	// means a worker took the item.
	baseEpoch int64
	seq       uint64
	sent      bool
	// checking: the scheduler is asking whether the item is still queued.
	checking bool
	// absent: the check found the item gone from the queue. A worker may
	// have taken it and finished (its ack follows the completion's
	// commit) before the loop heard of the new lease, so a read of the
	// state begun after the check (one numbered above absentAfter)
	// decides whether to dispatch again (settleAbsent).
	absent      bool
	absentAfter uint64
	// depFrom is the entry's depDone before this dispatch, given back
	// when the item never reaches a worker; changes is the loop's count
	// of changes at the dispatch (depends.go).
	depFrom, changes uint64
}

type jobKind int

const (
	jobDispatch jobKind = iota
	jobCondition
	jobCheck
)

type job struct {
	kind jobKind
	id   int64
	// dispatch
	item dispatch.Item
	// condition, and the Events recorded with it
	cond   *storev1.Condition
	events []*storev1.EventInput
	// check
	seq uint64
	// traceParent is the trace context the dispatch continues, traceLink
	// the one a dispatch starting a trace of its own links to.
	traceParent, traceLink string
}

type result struct {
	job
	seq     uint64
	present bool
	err     error
}

// event is what the loop needs of a change event.
type event struct {
	id     int64
	purged bool
	// typ is the event's type (eventstream.Created, ...) and trace the
	// trace context its headers carry (with tracing on).
	typ   string
	trace string
	// controller is the uid of the resource's controller owner, and
	// resType its type (owns.go).
	controller string
	resType    reconcilers.TypeRef
	// rev is the revision of the change the event tells.
	rev int64
}

func newLoop(s *Service, t *leader.Term, stream jetstream.Stream) *loop {
	return &loop{
		s: s, term: t, stream: stream,
		log:        s.log.With("epoch", t.Epoch),
		entries:    map[int64]*entry{},
		byUID:      map[string]int64{},
		dependents: map[trigger.Ref]map[int64]struct{}{},
		byRef:      map[trigger.Ref]int64{},
		owns:       map[reconcilers.TypeRef]reconcilers.Owned{},
		delay:      queue.New(),
		fetch:      map[int64]struct{}{},
		started:    map[reconcilers.TypeRef]time.Time{},
		fetchReq:   make(chan []int64),
		fetched:    make(chan fetchResult, 1),
		jobs:       make(chan []job),
		results:    make(chan result, s.cfg.Dispatchers*maxDispatchBatch),
		traces:     map[int64]traced{},
	}
}

// run leads until ctx ends or the epoch is found stale (leader.ErrStale).
func (l *loop) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	// A broker restart may have lost the work stream, its items and the
	// event consumer, or brought the event stream back with other
	// sequences: when the connection comes back, rebuild from the store.
	nc := l.s.js.Conn()
	in := leadInputs{reconnected: nc.StatusChanged(nats.CONNECTED)}
	defer nc.RemoveStatusListener(in.reconnected)

	// Follow events from now on before reading the state: every change
	// committed before the read is in it, every later one arrives as an
	// event (a change seen both ways is merely evaluated twice). Without
	// the event stream (a broker that lost it, until the store's relay
	// recreates it) the state is read again every LivenessPoll instead.
	in.events = make(chan event, 4096)
	in.eventsDone = make(chan error, 1)
	if cons, ids, err := l.openConsumer(ctx); err == nil {
		l.goFollow(ctx, &wg, &in, cons, ids)
	} else {
		if ctx.Err() != nil {
			return nil
		}
		l.log.Warn("event stream not available: reading the store's state periodically until it is", "every", l.s.cfg.LivenessPoll, "error", err)
		tk := time.NewTicker(l.s.cfg.LivenessPoll)
		defer tk.Stop()
		in.poll = tk.C
	}

	liveCh := make(chan liveRead, 1)
	in.live = liveCh
	first := l.readLive(ctx)
	l.live = first.live
	l.seen.update(first.reg)
	l.noteOwns(first)
	wg.Go(func() { l.pollLive(ctx, liveCh) })

	start := time.Now()
	if err := l.list(ctx); err != nil {
		return nil // ctx ended
	}
	l.s.setStatus(func(st *Status) { st.Ready, st.Tracked = true, len(l.entries) })
	l.log.Info("scheduler state rebuilt from the store", "resources", len(l.entries), "duration", time.Since(start).Round(time.Millisecond),
		"live_types", len(l.live))

	for range l.s.cfg.Dispatchers {
		wg.Go(func() { l.dispatcher(ctx) })
	}
	wg.Go(func() { l.fetcher(ctx) })
	if l.s.cfg.Relist > 0 {
		tk := time.NewTicker(l.s.cfg.Relist)
		defer tk.Stop()
		in.relist = tk.C
	}
	return l.lead(ctx, &wg, &in)
}

// leadInputs are the channels a term's loop listens on besides the loop's
// own (results, fetched, jobs).
type leadInputs struct {
	// events and eventsDone: the events followed, and how following them
	// ended.
	events     chan event
	eventsDone chan error
	// reconnected: the NATS connection came back.
	reconnected chan nats.Status
	// poll ticks while the event stream is missing (nil once followed).
	poll <-chan time.Time
	// live: the live types read again.
	live chan liveRead
	// relist ticks every Relist (nil when it is 0).
	relist <-chan time.Time
}

// goFollow follows the event stream through cons, from a goroutine of wg,
// into in.events; in.eventsDone gets how it ended.
func (l *loop) goFollow(ctx context.Context, wg *sync.WaitGroup, in *leadInputs, cons jetstream.Consumer, ids *eventstream.StoreIDs) {
	events, done := in.events, in.eventsDone
	wg.Go(func() { done <- l.follow(ctx, cons, ids, events) })
}

// lead is the loop once the state is rebuilt: it serves events, due
// items, results, reads and dispatches until ctx ends (nil) or the state
// must be rebuilt (errRebuild) or the epoch is stale.
func (l *loop) lead(ctx context.Context, wg *sync.WaitGroup, in *leadInputs) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lastSnap time.Time
	for {
		now := time.Now()
		fetchReq, ids := l.fetchToSend(now)
		timer.Reset(time.Until(l.nextWake(now, lastSnap)))
		var send chan []job
		var head []job
		if len(l.pending) > 0 {
			send, head = l.jobs, l.headJobs()
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-in.eventsDone:
			if ctx.Err() != nil {
				return nil
			}
			l.log.Warn("event stream ended; rebuilding", "error", err)
			return fmt.Errorf("%w: event stream ended: %w", errRebuild, err)
		case <-in.reconnected:
			return fmt.Errorf("%w: the NATS connection was re-established", errRebuild)
		case <-in.poll:
			if err := l.onPoll(ctx, wg, in); err != nil {
				return nil
			}
		case ev := <-in.events:
			l.onEvents(ev, in.events)
		case live := <-in.live:
			l.onLive(live)
		case <-timer.C:
			l.popDue(time.Now())
		case r := <-l.results:
			if err := l.onResult(r); err != nil {
				return err
			}
		case send <- head:
			l.pending = l.pending[len(head):]
		case fetchReq <- ids:
			l.fetching = true
			l.reads++
			l.fetchRead = l.reads
			ids = nil
		case f := <-l.fetched:
			l.onFetched(f)
		case <-in.relist:
			if err := l.list(ctx); err != nil {
				return nil
			}
		}
		lastSnap = l.endTurn(ids, lastSnap)
	}
}

// fetchToSend is the fetcher's channel and the ids to read when a read is
// due at now; nil and nil otherwise.
func (l *loop) fetchToSend(now time.Time) (chan []int64, []int64) {
	if len(l.fetch) > 0 && !l.fetching && !now.Before(l.fetchAfter) {
		return l.fetchReq, l.takeFetch()
	}
	return nil, nil
}

// nextWake is when the loop must wake with no input: the first of the next
// due item, the next read allowed, the next metrics' snapshot, and an hour
// from now.
func (l *loop) nextWake(now, lastSnap time.Time) time.Time {
	next := now.Add(time.Hour)
	if at, ok := l.delay.Next(); ok && at.Before(next) {
		next = at
	}
	if len(l.fetch) > 0 && !l.fetching && l.fetchAfter.Before(next) {
		next = l.fetchAfter
	}
	if snap := lastSnap.Add(snapshotInterval(len(l.entries))); snap.Before(next) {
		next = snap // the metrics' walk (schedMetrics) stays fresh
	}
	return next
}

// onPoll follows the event stream when it is back and reads the store's
// state again; an error means ctx ended.
func (l *loop) onPoll(ctx context.Context, wg *sync.WaitGroup, in *leadInputs) error {
	if cons, ids, err := l.openConsumer(ctx); err == nil {
		l.log.Info("event stream available again: following it")
		l.goFollow(ctx, wg, in, cons, ids)
		in.poll = nil
	}
	return l.list(ctx)
}

// onEvents takes ev and what else events holds (up to 1000 more), to read
// states in one batch.
func (l *loop) onEvents(ev event, events <-chan event) {
	l.onEvent(ev)
	for range 1000 {
		select {
		case ev := <-events:
			l.onEvent(ev)
		default:
			return
		}
	}
}

// popDue handles every item due at now.
func (l *loop) popDue(now time.Time) {
	for _, id := range l.delay.PopDue(now) {
		l.onDue(id, now)
	}
}

// endTurn ends one turn of lead: ids taken for a read that was not sent go
// back, the status counts the resources tracked, and the metrics' snapshot
// is taken again when due. It returns when the snapshot was last taken.
func (l *loop) endTurn(ids []int64, lastSnap time.Time) time.Time {
	for _, id := range ids { // taken for a read that was not sent
		l.fetch[id] = struct{}{}
	}
	l.s.setStatus(func(st *Status) { st.Tracked = len(l.entries) })
	if now := time.Now(); now.Sub(lastSnap) >= snapshotInterval(len(l.entries)) {
		l.s.metrics.snap.Store(walk(l.entries, now))
		return now
	}
	return lastSnap
}

// openConsumer opens an ordered consumer on NO8S_EVENTS that starts after
// the newest event stored now, and the reader's view of the stream's store.
func (l *loop) openConsumer(ctx context.Context) (jetstream.Consumer, *eventstream.StoreIDs, error) {
	cctx, cancel := context.WithTimeout(ctx, l.s.cfg.CallTimeout)
	defer cancel()
	st, err := l.s.js.Stream(cctx, subjects.EventsStream)
	if err != nil {
		return nil, nil, err
	}
	info, err := st.Info(cctx)
	if err != nil {
		return nil, nil, err
	}
	id, _ := eventstream.IdentityOf(info.Config)
	ids := eventstream.NewStoreIDs(id.StoreID, eventstream.StreamStoreID(st))
	cons, err := l.s.js.OrderedConsumer(cctx, subjects.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.EventsAll},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    info.State.LastSeq + 1,
	})
	return cons, ids, err
}

// follow decodes events into out until ctx ends. Messages that are not
// events of the stream's store (eventstream.Check) are dropped and
// counted; when the stream turns out to belong to another store (rebuilt
// for another database), follow ends so that the state is rebuilt.
func (l *loop) follow(ctx context.Context, cons jetstream.Consumer, ids *eventstream.StoreIDs, out chan<- event) error {
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	var after int64 // the last revision taken: the store's only grow
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The ordered consumer recreates itself after a lost
			// message or heartbeat; an error means it could not.
			return fmt.Errorf("read events: %w", err)
		}
		storeID := ids.ID()
		if _, err := eventstream.Own(msg.Headers(), storeID); err != nil {
			if ids.Adopt(ctx, msg.Headers()) {
				return fmt.Errorf("the event stream belongs to store %s now", ids.ID())
			}
			l.s.foreign.Add(1)
			l.log.Warn("a message the store did not publish; dropped", "subject", msg.Subject(), "error", err)
			continue
		}
		ev, err := eventstream.DecodeHead(msg.Data())
		if err != nil {
			l.log.Warn("undecodable event skipped", "error", err)
			continue
		}
		if err := eventstream.Check(msg.Headers(), storeID, ev.Revision, after); err != nil {
			l.s.foreign.Add(1)
			l.log.Warn("a message the store did not publish; dropped", "subject", msg.Subject(), "error", err)
			continue
		}
		after = ev.Revision
		select {
		case out <- event{id: ev.ResourceID, purged: ev.Type == eventstream.Purged, typ: ev.Type, trace: l.eventTrace(msg.Headers()),
			controller: ev.ControllerUID, resType: reconcilers.TypeRef{Name: ev.ResourceTypeName, Version: ev.ResourceTypeVersion}, rev: ev.Revision}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// liveRead is one read of the registry: the live types, and the registry
// as read.
type liveRead struct {
	live map[reconcilers.TypeRef]bool
	reg  *reconcilers.Registry
}

// readLive reads the registry once; live is nil when it cannot be read.
func (l *loop) readLive(ctx context.Context) liveRead {
	rctx, cancel := context.WithTimeout(ctx, min(l.s.cfg.CallTimeout, reconcilers.ReadTimeout))
	defer cancel()
	reg, err := reconcilers.Read(rctx, l.s.js)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("reconciler registry not readable", "error", err)
		}
		return liveRead{}
	}
	live := make(map[reconcilers.TypeRef]bool, len(reg.Owners))
	for t := range reg.Owners {
		live[t] = true
	}
	return liveRead{live: live, reg: reg}
}

// pollLive sends every read of the registry (the loop keeps the replicas'
// heartbeats from each; it re-evaluates resources only when the live types
// changed).
func (l *loop) pollLive(ctx context.Context, out chan liveRead) {
	t := time.NewTicker(l.s.cfg.LivenessPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := l.readLive(ctx)
		if r.live == nil {
			continue
		}
		select {
		case <-out: // replace an update the loop has not taken yet
		default:
		}
		out <- r
	}
}

// list reads every resource's state (a rebuild, or the periodic safety
// net) and evaluates each.
func (l *loop) list(ctx context.Context) error {
	// A read of states in flight was made before this list: take its
	// answer first, or it would overwrite newer states.
	if l.fetching {
		select {
		case f := <-l.fetched:
			l.onFetched(f)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var after int64
	for {
		var resp *reconcilev1.ListReconcileStateResponse
		for {
			l.reads++
			cctx, cancel := context.WithTimeout(ctx, l.s.cfg.CallTimeout)
			var err error
			resp, err = l.s.rc.ListReconcileState(cctx, &reconcilev1.ListReconcileStateRequest{AfterId: after, Limit: int32(l.s.cfg.StatePage)})
			cancel()
			if err == nil {
				break
			}
			l.log.Warn("listing reconcile state failed; retrying", "error", err)
			if !sleep(ctx, l.s.cfg.RetryDelay) {
				return ctx.Err()
			}
		}
		now := time.Now()
		owners := toWake{}
		for _, p := range resp.GetStates() {
			after = p.GetResourceId()
			if neverReconciled(p) {
				continue
			}
			// A change found by a relist, or by the polls that stand in
			// for a lost event stream, reaches the owner too; the
			// rebuild at a term's start (nothing known yet) does not.
			old, settled, known := l.previous(p.GetResourceId())
			e := l.upsert(p)
			l.settleAbsent(e, l.reads)
			if known {
				l.noteChange(owners, old, settled, &e.st)
			} else if e.st.Waiting && e.st.Terminal() {
				// What it waits for may have come while no scheduler
				// led: one attempt finds out.
				e.depSeq++
			}
			l.evaluate(e, now)
		}
		l.wake(owners, now)
		if len(resp.GetStates()) < l.s.cfg.StatePage {
			return nil
		}
	}
}

// neverReconciled reports whether p is of a type no reconciler serves:
// roles and bindings, which the gateway reads and nothing dispatches (no
// work item, no ReconcilerAvailable condition).
func neverReconciled(p *reconcilev1.ReconcileState) bool {
	return rbac.IsRoleType(p.GetResourceTypeName()) && p.GetResourceTypeVersion() == rbac.Version
}

func (l *loop) upsert(p *reconcilev1.ReconcileState) *entry {
	st := stateFromProto(p)
	e := l.entries[st.ID]
	if e == nil {
		e = &entry{}
		l.entries[st.ID] = e
	}
	l.reindex(e, &st)
	e.st = st
	if st.Status != resource.StatusReconciling {
		e.settled = st.Status
	}
	l.byUID[st.UID] = st.ID
	l.byRef[st.Ref()] = st.ID
	l.noteGeneration(st.ID, st.Generation)
	return e
}

func (l *loop) remove(id int64) {
	if e := l.entries[id]; e != nil {
		delete(l.byUID, e.st.UID)
		if l.byRef[e.st.Ref()] == id {
			delete(l.byRef, e.st.Ref()) // not a newer resource of the same name
		}
		l.reindex(e, &trigger.State{ID: id})
	}
	delete(l.entries, id)
	delete(l.traces, id)
	delete(l.fetch, id)
	l.delay.Remove(id)
}

// takeFetch empties l.fetch into a list of ids to read.
func (l *loop) takeFetch() []int64 {
	ids := slices.Collect(maps.Keys(l.fetch))
	clear(l.fetch)
	return ids
}

// fetcher reads the states of the resources the loop asks for, in chunks,
// until ctx ends: the loop goes on dispatching meanwhile.
func (l *loop) fetcher(ctx context.Context) {
	for {
		var ids []int64
		select {
		case <-ctx.Done():
			return
		case ids = <-l.fetchReq:
		}
		f := fetchResult{ids: ids}
		for chunk := range slices.Chunk(ids, maxFetch) {
			cctx, cancel := context.WithTimeout(ctx, l.s.cfg.CallTimeout)
			resp, err := l.s.rc.ListReconcileState(cctx, &reconcilev1.ListReconcileStateRequest{ResourceIds: chunk, Limit: int32(len(chunk))})
			cancel()
			if err != nil {
				f.err = err
				break
			}
			f.states = append(f.states, resp.GetStates()...)
		}
		select {
		case <-ctx.Done():
			return
		case l.fetched <- f:
		}
	}
}

// onFetched takes the states read for f.ids and evaluates them; the ones
// that no longer exist are forgotten. After a failed read every id is read
// again after a pause.
func (l *loop) onFetched(f fetchResult) {
	l.fetching = false
	if f.err != nil {
		if !errors.Is(f.err, context.Canceled) {
			l.log.Warn("reading reconcile state failed; retrying", "resources", len(f.ids), "error", f.err)
		}
		for _, id := range f.ids {
			l.fetch[id] = struct{}{}
		}
		l.fetchAfter = time.Now().Add(l.s.cfg.RetryDelay)
		return
	}
	seen := make(map[int64]bool, len(f.states))
	now := time.Now()
	owners := toWake{}
	for _, p := range f.states {
		if neverReconciled(p) {
			continue
		}
		seen[p.GetResourceId()] = true
		old, settled, _ := l.previous(p.GetResourceId())
		e := l.upsert(p)
		l.settleAbsent(e, l.fetchRead)
		l.noteChange(owners, old, settled, &e.st)
		l.evaluate(e, now)
	}
	for _, id := range f.ids {
		if !seen[id] {
			l.gone(owners, id)
		}
	}
	l.wake(owners, now)
}

// headJobs returns the jobs to hand one dispatcher next: the dispatches at
// the head of the pending queue (at most maxDispatchBatch), or its first
// job of another kind.
func (l *loop) headJobs() []job {
	if l.pending[0].kind != jobDispatch {
		return l.pending[:1]
	}
	n := 1
	for n < len(l.pending) && n < maxDispatchBatch && l.pending[n].kind == jobDispatch {
		n++
	}
	return l.pending[:n]
}

func (l *loop) onEvent(ev event) {
	if ev.purged {
		owners := toWake{}
		l.gone(owners, ev.id)
		l.wake(owners, time.Now())
		return
	}
	if ev.typ == eventstream.Created {
		l.noteCreated(ev)
	}
	l.noteEvent(ev)
	l.fetch[ev.id] = struct{}{}
}

// onDue handles a wake-up. Resources with work in progress are read again
// first: a worker's lease renewals and the queue are not visible as events.
func (l *loop) onDue(id int64, now time.Time) {
	e := l.entries[id]
	if e == nil {
		return
	}
	if e.st.LeaseHolder != "" || e.flight != nil {
		l.fetch[id] = struct{}{}
		return
	}
	l.evaluate(e, now)
}

// onLive takes a read of the registry and evaluates the resources of the
// types whose liveness changed.
func (l *loop) onLive(r liveRead) {
	l.seen.update(r.reg)
	live := r.live
	prev := l.live
	l.live = live
	l.noteOwns(r)
	changed := map[reconcilers.TypeRef]bool{}
	for t := range live {
		if prev == nil || !prev[t] {
			changed[t] = true
		}
	}
	for t := range prev {
		if !live[t] {
			changed[t] = true
		}
	}
	if len(changed) == 0 && prev != nil {
		return
	}
	l.log.Info("live reconciler types changed", "live", len(live), "changed", len(changed))
	now := time.Now()
	for _, e := range l.entries {
		if prev == nil || changed[reconcilers.TypeRef{Name: e.st.TypeName, Version: e.st.TypeVersion}] {
			l.evaluate(e, now)
		}
	}
}

// evaluate decides what to do about one resource now.
func (l *loop) evaluate(e *entry, now time.Time) {
	st := &e.st
	if f := e.flight; f != nil {
		active := st.LeaseActive(now)
		if st.LeaseEpoch > f.baseEpoch {
			l.started[reconcilers.TypeRef{Name: st.TypeName, Version: st.TypeVersion}] = now
		}
		switch {
		case st.LeaseEpoch > f.baseEpoch && !active:
			// The attempt we dispatched finished, or its worker died and
			// its lease ran out: decide afresh.
			e.flight, e.warned = nil, false
			e.answered(f)
		case active:
			e.warned = false // a worker took it
			l.delay.Schedule(st.ID, st.LeaseExpiresAt.Add(leaseGrace))
			return
		case f.absent:
			return // a read of its state decides (settleAbsent)
		case !f.sent || f.checking:
			return // a dispatcher will report back
		case now.Before(f.at.Add(l.s.cfg.ItemLease)):
			l.delay.Schedule(st.ID, f.at.Add(l.s.cfg.ItemLease))
			return
		default:
			// Not started within the item lease: still queued?
			f.checking = true
			l.enqueue(job{kind: jobCheck, id: st.ID, seq: f.seq, item: dispatch.Item{DispatchID: f.id}})
			return
		}
	}
	st.DependencyChanged = e.depSeq != e.depDone
	if st.AnnotationIgnore {
		return
	}
	if l.live != nil {
		live := l.live[reconcilers.TypeRef{Name: st.TypeName, Version: st.TypeVersion}]
		if !live {
			l.evaluateUnserved(e, now)
			return
		}
		e.waitSince, e.warned = time.Time{}, false
		if st.ReconcilerUnavailable && !e.condBusy {
			l.setCondition(e, resource.ConditionTrue, resource.ReasonReconcilerLive, "a live reconciler serves "+st.TypeName+"/"+st.TypeVersion, nil)
		}
	}
	d := trigger.Evaluate(*st, now)
	if !d.Due(now) {
		if !d.At.IsZero() {
			l.delay.Schedule(st.ID, d.At)
		}
		return
	}
	f := &flight{id: uuid.NewString(), at: now, dispatched: now, reason: d.Reason, baseEpoch: st.LeaseEpoch, depFrom: e.depDone, changes: l.changes}
	e.flight = f
	// The attempt reads what it owns afresh: the changes so far are
	// answered by it.
	e.depDone, e.depRV = e.depSeq, 0
	if d.Reason == trigger.Retry && !st.LastReconcile.IsZero() {
		l.s.metrics.backoff.Observe(max(now.Sub(st.LastReconcile).Seconds(), 0))
	}
	parent, link := l.traceOf(st.ID, d.Reason)
	l.enqueue(job{kind: jobDispatch, id: st.ID, item: dispatch.Item{
		ResourceID: st.ID, ResourceUID: st.UID, TypeName: st.TypeName, TypeVersion: st.TypeVersion,
		Reason: d.Reason, SchedulerEpoch: l.term.Epoch, DispatchID: f.id, DispatchedAt: now,
	}, traceParent: parent, traceLink: link})
	l.log.Debug("dispatch", "resource", st.ID, "name", st.Name, "type", st.TypeName+"/"+st.TypeVersion,
		"reason", d.Reason.String(), "dispatch_id", f.id)
}

// evaluateUnserved decides about a resource whose type no live reconciler
// serves: condition ReconcilerAvailable False, of reason NoLiveReconciler
// while nothing waits for a reconciler (or for less than the item lease),
// and ReconcilerNotResponding, with a Warning Event, once work (anything
// but a resync) has waited for one longer than the item lease.
func (l *loop) evaluateUnserved(e *entry, now time.Time) {
	st := &e.st
	d := trigger.Evaluate(*st, now)
	if !d.Due(now) || d.Reason == trigger.Resync {
		e.waitSince, e.warned = time.Time{}, false
		if !st.ReconcilerUnavailable && !e.condBusy {
			l.setCondition(e, resource.ConditionFalse, resource.ReasonNoLiveReconciler,
				"no live reconciler serves "+st.TypeName+"/"+st.TypeVersion+"; start one to reconcile this resource", nil)
		}
		if !d.At.IsZero() && d.Reason != trigger.Resync {
			l.delay.Schedule(st.ID, d.At)
		}
		return
	}
	if e.waitSince.IsZero() {
		e.waitSince = now
	}
	bound := e.waitSince.Add(l.s.cfg.ItemLease)
	switch {
	case e.condBusy:
		l.delay.Schedule(st.ID, now.Add(l.s.cfg.RetryDelay))
	case now.Before(bound):
		if !st.ReconcilerUnavailable {
			l.setCondition(e, resource.ConditionFalse, resource.ReasonNoLiveReconciler,
				"no live reconciler serves "+st.TypeName+"/"+st.TypeVersion+"; start one to reconcile this resource", nil)
		}
		l.delay.Schedule(st.ID, bound)
	case !e.warned:
		e.warned = true
		t := reconcilers.TypeRef{Name: st.TypeName, Version: st.TypeVersion}
		msg := fmt.Sprintf("work (%s) has waited %s and no live reconciler serves %s: %s; start it, or check that it reaches the store's worker address and NATS (its /readyz)",
			d.Reason, now.Sub(e.waitSince).Round(time.Second), t, l.seen.describe(t, now))
		l.warnNotResponding(e, msg)
	}
}

// warnNotResponding sets condition ReconcilerNotResponding with message,
// and records a Warning Event of the same reason and message with it.
func (l *loop) warnNotResponding(e *entry, message string) {
	l.log.Info("work not leased within the item lease", "resource", e.st.ID, "name", e.st.Name,
		"type", e.st.TypeName+"/"+e.st.TypeVersion, "detail", message)
	l.setCondition(e, resource.ConditionFalse, resource.ReasonReconcilerNotResponding, message, []*storev1.EventInput{{
		Type: names.EventWarning, Reason: resource.ReasonReconcilerNotResponding, Message: message, Source: eventSource,
	}})
}

// eventSource is the source of the Events the scheduler records.
const eventSource = "scheduler"

func (l *loop) setCondition(e *entry, status, reason, message string, events []*storev1.EventInput) {
	e.condBusy = true
	l.enqueue(job{kind: jobCondition, id: e.st.ID, cond: &storev1.Condition{
		Type: resource.ConditionReconcilerAvailable, Status: status, Reason: reason, Message: message,
	}, events: events})
}

func (l *loop) enqueue(j job) { l.pending = append(l.pending, j) }

// dispatcher runs jobs until ctx ends.
func (l *loop) dispatcher(ctx context.Context) {
	for {
		var jobs []job
		select {
		case <-ctx.Done():
			return
		case jobs = <-l.jobs:
		}
		var rs []result
		if jobs[0].kind == jobDispatch {
			rs = l.dispatch(ctx, jobs)
		} else {
			rs = []result{l.do(ctx, jobs[0])}
		}
		for _, r := range rs {
			select {
			case <-ctx.Done():
				return
			case l.results <- r:
			}
		}
	}
}

// dispatch runs dispatch jobs together: they are recorded in the store
// first, in one call (fenced by the leader epoch), and published only while
// the term is still valid.
func (l *loop) dispatch(ctx context.Context, jobs []job) []result {
	rs := make([]result, len(jobs))
	for i, j := range jobs {
		rs[i] = result{job: j}
	}
	fail := func(err error) []result {
		for i := range rs {
			rs[i].err = err
		}
		return rs
	}
	cctx, cancel := context.WithTimeout(ctx, l.s.cfg.CallTimeout)
	defer cancel()
	if !l.term.Valid() {
		return fail(errLeaseLost)
	}
	req := &reconcilev1.RecordDispatchesRequest{SchedulerEpoch: l.term.Epoch, Dispatches: make([]*reconcilev1.Dispatch, len(jobs))}
	for i, j := range jobs {
		req.Dispatches[i] = &reconcilev1.Dispatch{ResourceId: j.id, DispatchId: j.item.DispatchID, Reason: enumpb.Reason(j.item.Reason)}
	}
	resp, err := l.s.rc.RecordDispatches(cctx, req)
	if err != nil {
		return fail(grpcstatus.FromStatus(err))
	}
	if !l.term.Valid() {
		return fail(errLeaseLost)
	}
	missing := make(map[int64]bool, len(resp.GetMissing()))
	for _, id := range resp.GetMissing() {
		missing[id] = true
	}
	var items []dispatch.Item
	var idx []int
	for i, j := range jobs {
		if missing[j.id] {
			rs[i].err = problem.NotFoundf("resource %d not found", j.id)
			continue
		}
		items, idx = append(items, j.item), append(idx, i)
	}
	spans := l.startDispatchSpans(ctx, jobs, idx, items)
	seqs, errs := dispatch.PublishAll(cctx, l.s.js, items)
	var again []int // positions in items to publish once more
	for k, err := range errs {
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			again = append(again, k)
		}
	}
	if len(again) > 0 {
		// No stream takes the subject: the broker lost it. Recreate it
		// and publish those once more.
		l.log.Warn("work stream missing; creating it again", "error", errs[again[0]])
		if _, err := dispatch.Ensure(cctx, l.s.js, l.s.cfg.Stream); err == nil {
			retry := make([]dispatch.Item, len(again))
			for n, k := range again {
				retry[n] = items[k]
			}
			s2, e2 := dispatch.PublishAll(cctx, l.s.js, retry)
			for n, k := range again {
				seqs[k], errs[k] = s2[n], e2[n]
			}
		}
	}
	for k, i := range idx {
		if spans != nil {
			l.endDispatchSpan(ctx, spans[k], items[k], seqs[k], errs[k])
		}
		rs[i].seq, rs[i].err = seqs[k], errs[k]
		if errs[k] == nil {
			l.s.dispatched.Add(1)
			l.s.metrics.dispatched(jobs[i].item.Reason)
		}
	}
	return rs
}

// do runs one job other than a dispatch.
func (l *loop) do(ctx context.Context, j job) result {
	r := result{job: j}
	cctx, cancel := context.WithTimeout(ctx, l.s.cfg.CallTimeout)
	defer cancel()
	switch j.kind {
	case jobCondition:
		if !l.term.Valid() {
			r.err = errLeaseLost
			return r
		}
		_, err := l.s.rc.SetCondition(cctx, &reconcilev1.SetConditionRequest{SchedulerEpoch: l.term.Epoch, ResourceId: j.id, Condition: j.cond, Events: j.events})
		r.err = grpcstatus.FromStatus(err)
	case jobCheck:
		msg, err := l.stream.GetMsg(cctx, j.seq)
		switch {
		case err == nil:
			// A stream recreated after a broker lost it numbers its
			// messages afresh: the sequence must still hold this item.
			r.present = msg.Header.Get(jetstream.MsgIDHeader) == j.item.DispatchID
		case errors.Is(err, jetstream.ErrMsgNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
		default:
			r.present, r.err = true, err
		}
	}
	return r
}

// onResult takes a job's outcome. A stale epoch ends the term at once.
func (l *loop) onResult(r result) error {
	if pe := problem.As(r.err); pe != nil && pe.Code == problem.CodeStaleEpoch {
		l.log.Warn("the store refused this leader's epoch; stopping", "error", r.err)
		return leader.ErrStale
	}
	e := l.entries[r.id]
	if e == nil {
		return nil
	}
	now := time.Now()
	if problem.KindOf(r.err) == problem.NotFound {
		owners := toWake{}
		l.gone(owners, r.id)
		l.wake(owners, now)
		return nil
	}
	switch r.kind {
	case jobCondition:
		e.condBusy = false
		switch {
		case r.err == nil:
			// Until the change's event arrives.
			e.st.ReconcilerUnavailable = r.cond.GetStatus() != resource.ConditionTrue
		case !errors.Is(r.err, errLeaseLost):
			l.log.Warn("setting condition failed", "resource", r.id, "error", r.err)
			if r.cond.GetReason() == resource.ReasonReconcilerNotResponding {
				e.warned = false // warn again
			}
			l.delay.Schedule(r.id, now.Add(l.s.cfg.RetryDelay))
		}
	case jobDispatch:
		f := e.flight
		if f == nil || f.id != r.item.DispatchID {
			return nil
		}
		if r.err != nil {
			l.dropFlight(e)
			if !errors.Is(r.err, errLeaseLost) {
				l.log.Warn("dispatch failed; retrying", "resource", r.id, "error", r.err)
				l.delay.Schedule(r.id, now.Add(l.s.cfg.RetryDelay))
			}
			return nil
		}
		f.sent, f.seq = true, r.seq
		if f.at.Add(l.s.cfg.ItemLease).After(now) {
			l.delay.Schedule(r.id, f.at.Add(l.s.cfg.ItemLease))
		} else {
			l.evaluate(e, now)
		}
	case jobCheck:
		f := e.flight
		if f == nil || f.id != r.item.DispatchID {
			return nil
		}
		f.checking = false
		if r.err != nil {
			l.log.Warn("checking a work item failed", "resource", r.id, "error", r.err)
		}
		if r.present {
			// Still queued (workers are behind, or none takes work) or
			// being redelivered: wait. When no item of its type was taken
			// within the item lease either, no worker takes work: say so
			// once. Workers merely behind a backlog are not reported.
			t := reconcilers.TypeRef{Name: e.st.TypeName, Version: e.st.TypeVersion}
			if !e.warned && !e.condBusy && r.err == nil && !now.Before(l.started[t].Add(l.s.cfg.ItemLease)) {
				e.warned = true
				l.warnNotResponding(e, fmt.Sprintf("work (%s) dispatched %s ago has not been leased by a worker: %s; check that its replicas reach the store's worker address and NATS (their /readyz)",
					f.reason, now.Sub(f.dispatched).Round(time.Second), l.seen.describe(t, now)))
			}
			f.at = now
			l.delay.Schedule(r.id, now.Add(l.s.cfg.ItemLease))
			return nil
		}
		// Gone: taken and settled, or dropped. Whether its attempt ran
		// is told by a read of the state begun from now on.
		f.absent, f.absentAfter = true, l.reads
		l.fetch[r.id] = struct{}{}
	}
	return nil
}

// settleAbsent takes a state of e read in read number read: when e's
// flight waits for such a read (its item was found gone before the read
// began) and no attempt took the item, the item was lost or refused, and
// the flight ends so that evaluate dispatches again. An attempt that did
// take it shows as a higher lease epoch, and evaluate answers the flight.
func (l *loop) settleAbsent(e *entry, read uint64) {
	f := e.flight
	if f == nil || !f.absent || read <= f.absentAfter || e.st.LeaseEpoch > f.baseEpoch {
		return
	}
	l.log.Info("work item was not started within the item lease; dispatching again", "resource", e.st.ID, "dispatch_id", f.id)
	l.dropFlight(e)
}
