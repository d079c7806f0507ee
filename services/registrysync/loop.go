package registrysync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/services/internal/leader"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// syncer is the leader's loop: it lists registries and templates every
// Poll (and at once when kicked), and syncs each registry when its
// interval is due, when its spec or the set of templates referencing it
// changed, or when it is being deleted. It keeps the latest result of each
// registry for the registry's reconcile, which writes the status, and asks
// for that reconcile (a manual trigger) only when the status would change.
//
// Each registry and each HttpSource syncs on its own (issue 27): a due one
// starts in a pool of Config.Syncs goroutines, bounded by
// Config.SyncTimeout besides its own read's timeout, and is not due again
// until it has finished; the loop never waits for a sync, so a datasource
// that hangs or answers garbage delays nobody else. A pool that is full
// leaves the rest due for the next round.
type syncer struct {
	svc  *Service
	term *leader.Term
	log  *slog.Logger
	kick chan struct{}
	// slots is the pool (one token per running sync); running holds them.
	slots   chan struct{}
	running sync.WaitGroup
	// stop ends run with a cause (a deposed sync).
	stop context.CancelCauseFunc

	mu      sync.Mutex
	state   map[string]*regState
	sources map[string]*srcState
	pending map[string]map[string]pendingDelete
	// memos are the registries' memos (memo.go).
	memos map[string]*memo
	// changed is closed (and replaced) whenever a result is recorded.
	changed chan struct{}
}

// regState is what the loop knows of one registry.
type regState struct {
	generation int64
	templates  string
	deleting   bool
	next       time.Time
	last       *result
	trig       trigState
	// busy: a sync of it is running.
	busy bool
}

// trigState is the status summary last asked to be written, and when.
type trigState struct {
	triggered string
	at        time.Time
}

func newSyncer(svc *Service, t *leader.Term) *syncer {
	return &syncer{svc: svc, term: t, log: svc.log.With("epoch", t.Epoch), kick: make(chan struct{}, 1), slots: make(chan struct{}, max(svc.cfg.Syncs, 1)),
		state: map[string]*regState{}, sources: map[string]*srcState{}, pending: map[string]map[string]pendingDelete{}, memos: map[string]*memo{}, changed: make(chan struct{})}
}

// Kick asks for a round now.
func (s *syncer) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run runs rounds until ctx ends or the epoch is found stale, then waits
// for the syncs it started.
func (s *syncer) run(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	s.stop = stop
	defer s.running.Wait()
	defer stop(nil)
	t := time.NewTicker(s.svc.cfg.Poll)
	defer t.Stop()
	for {
		if err := errors.Join(s.round(ctx), s.roundSources(ctx)); err != nil {
			if errors.Is(err, leader.ErrStale) {
				return err
			}
			if ctx.Err() == nil {
				s.log.Warn("sync round failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); errors.Is(cause, leader.ErrStale) {
				return cause
			}
			return nil
		case <-t.C:
		case <-s.kick:
		}
	}
}

// start runs sync in the pool, bounded by Config.SyncTimeout, and reports
// false (running nothing) when every slot is taken.
func (s *syncer) start(ctx context.Context, sync func(ctx context.Context)) bool {
	select {
	case s.slots <- struct{}{}:
	default:
		return false
	}
	s.running.Go(func() {
		defer func() { <-s.slots }()
		sctx, cancel := context.WithTimeout(ctx, s.svc.cfg.SyncTimeout)
		defer cancel()
		sync(sctx)
	})
	return true
}

// deposed ends the loop: a sync found the epoch stale.
func (s *syncer) deposed(what string, err error) {
	s.stop(fmt.Errorf("%s: %w", what, err))
}

func (s *syncer) round(ctx context.Context) error {
	regs, err := s.svc.list(ctx, sdk.Type(tenancy.RegistryType, tenancy.Version), "", "")
	if err != nil {
		return err
	}
	tmpls, err := s.svc.list(ctx, sdk.Type(tenancy.TemplateType, tenancy.Version), "", "")
	if err != nil {
		return err
	}
	byRegistry := map[string][]*sdk.Resource{}
	for _, t := range tmpls {
		var ts tenancy.TemplateSpec
		if t.Deleting() || t.DecodeSpec(&ts) != nil {
			continue
		}
		// A template references the registry of its own namespace.
		k := t.Namespace + "/" + ts.RegistryID
		byRegistry[k] = append(byRegistry[k], t)
	}
	now := time.Now()
	present := map[string]bool{}
	for _, reg := range regs {
		present[key(reg)] = true
		ts := byRegistry[key(reg)]
		tkey := templatesKey(ts)
		s.mu.Lock()
		st := s.state[key(reg)]
		if st == nil {
			st = &regState{}
			s.state[key(reg)] = st
		}
		due := !st.busy && (st.last == nil || reg.Generation != st.generation || tkey != st.templates || reg.Deleting() != st.deleting || !now.Before(st.next))
		if due {
			st.busy = true
		}
		s.mu.Unlock()
		if !due {
			continue
		}
		if reg.Deleting() {
			ts = nil
		}
		if !s.start(ctx, func(ctx context.Context) { s.syncRegistry(ctx, reg, ts, tkey) }) {
			s.mu.Lock()
			st.busy = false
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	for name, st := range s.state {
		if !present[name] && !st.busy {
			delete(s.state, name)
			delete(s.pending, name)
		}
	}
	s.mu.Unlock()
	return nil
}

// syncRegistry syncs one registry (in the pool), records the result and
// asks for its status write.
func (s *syncer) syncRegistry(ctx context.Context, reg *sdk.Resource, ts []*sdk.Resource, tkey string) {
	ctx, span := s.startSpan(ctx, reg)
	res := s.sync(ctx, reg, ts)
	endSyncSpan(span, res.Err, res.Reason)
	if errors.Is(res.Err, errDeposed) {
		s.deposed("registry "+key(reg), res.Err)
		return
	}
	s.svc.m.registrySynced(res)
	s.record(reg, tkey, res)
	s.mu.Lock()
	st := s.state[key(reg)]
	s.mu.Unlock()
	s.triggerStatus(ctx, reg, storedSummary(reg), fmt.Sprint(res.summary()), &st.trig)
	s.mu.Lock()
	st.busy = false
	s.mu.Unlock()
}

// key names a registry in the loop's state: namespace/name.
func key(r *sdk.Resource) string { return r.Namespace + "/" + r.Name }

// templatesKey identifies a set of templates at their generations.
func templatesKey(ts []*sdk.Resource) string {
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s@%d", t.Name, t.Generation))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// interval is a registry's syncInterval (1m when it does not parse).
func interval(reg *sdk.Resource) time.Duration {
	var spec tenancy.RegistrySpec
	if reg.DecodeSpec(&spec) == nil {
		if d, err := time.ParseDuration(spec.SyncInterval); err == nil && d > 0 {
			return d
		}
	}
	return time.Minute
}

// record keeps a result and schedules the next sync.
func (s *syncer) record(reg *sdk.Resource, tkey string, res *result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[key(reg)]
	st.generation, st.templates, st.deleting, st.last = reg.Generation, tkey, reg.Deleting(), res
	st.next = s.recorded(interval(reg), res.settled() && !res.Deleting)
}

// recorded wakes the waiters of results and returns when to sync again:
// after interval, or after Settle when that is sooner and the result has
// not settled (its resources are not all ready or failed, or it is a
// deletion's). Called with s.mu held.
func (s *syncer) recorded(interval time.Duration, settled bool) time.Time {
	close(s.changed)
	s.changed = make(chan struct{})
	if !settled && s.svc.cfg.Settle < interval {
		interval = s.svc.cfg.Settle
	}
	return time.Now().Add(interval)
}

// triggerStatus asks for the reconcile of r (a registry or an HttpSource,
// which writes its status) when the result's summary want differs from the
// stored one, once per summary (again after 30 s if it still differs).
func (s *syncer) triggerStatus(ctx context.Context, r *sdk.Resource, stored, want string, ts *trigState) {
	if stored == want {
		return
	}
	s.mu.Lock()
	if ts.triggered == want && time.Since(ts.at) < 30*time.Second {
		s.mu.Unlock()
		return
	}
	ts.triggered, ts.at = want, time.Now()
	s.mu.Unlock()
	if _, err := s.svc.api.Reconcile(ctx, r.ID); ignoreGone(err) != nil {
		s.log.Warn("asking for the status write failed", "type", r.Type.Name, "name", r.Name, "error", err)
	}
}

// storedSummary is the summary the registry's stored status shows.
func storedSummary(reg *sdk.Resource) string {
	var out struct {
		ReferencingTemplates int    `json:"referencingTemplates"`
		Desired              int    `json:"desired"`
		Ready                int    `json:"ready"`
		Failed               int    `json:"failed"`
		ActiveRows           int    `json:"activeRows"`
		InvalidRows          int    `json:"invalidRows"`
		SyncedReason         string `json:"syncedReason"`
	}
	if len(reg.Outputs) == 0 || decodeJSON(reg.Outputs, &out) != nil {
		return ""
	}
	return fmt.Sprint(map[string]any{
		"referencingTemplates": out.ReferencingTemplates, "desired": out.Desired, "ready": out.Ready, "failed": out.Failed,
		"activeRows": out.ActiveRows, "invalidRows": out.InvalidRows, "syncedReason": out.SyncedReason,
	})
}

// waitResult waits until a result of the registry (namespace/name) at
// generation gen or later (and, when deleting, of its deletion) exists,
// kicking the loop; nil when ctx ends first.
func (s *syncer) waitResult(ctx context.Context, name string, gen int64, deleting bool) *result {
	return waitLast(ctx, s, func() *result {
		if st := s.state[name]; st != nil && st.last != nil && st.last.Generation >= gen && st.last.Deleting == deleting {
			return st.last
		}
		return nil
	})
}

// waitLast kicks the loop and waits until last (called with s.mu held)
// returns a result; nil when ctx ends first.
func waitLast[R any](ctx context.Context, s *syncer, last func() *R) *R {
	s.Kick()
	for {
		s.mu.Lock()
		res := last()
		ch := s.changed
		s.mu.Unlock()
		if res != nil {
			return res
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// startSpan starts the trace of one sync of r (a registry or an
// HttpSource): a root span, as a sync follows a schedule rather than a
// change; the writes it makes through the API join it.
func (s *syncer) startSpan(ctx context.Context, r *sdk.Resource) (context.Context, trace.Span) {
	return s.svc.cfg.Tracing.Tracer(tracing.Scope).Start(ctx, "sync "+r.Type.Name, trace.WithNewRoot(),
		trace.WithAttributes(attribute.String("no8s.resource.type", r.Type.Name+"/"+r.Type.Version),
			attribute.String("no8s.resource.namespace", r.Namespace), attribute.String("no8s.resource.name", r.Name),
			attribute.Int64("no8s.resource.id", r.ID), attribute.Int64("no8s.resource.generation", r.Generation)))
}

// endSyncSpan ends a sync's span with its outcome: the Synced reason, and
// Error when the sync failed.
func endSyncSpan(span trace.Span, err error, reason string) {
	span.SetAttributes(attribute.String("no8s.sync.reason", reason))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
