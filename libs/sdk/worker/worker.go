package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/no8s/no8s/proto/enumpb"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/sdk/client"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
	"github.com/no8s/no8s/libs/sdk/registry"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// errLeaseLost cancels an attempt whose lease was taken over.
var errLeaseLost = errors.New("worker: reconcile lease lost to a newer attempt")

// Reconciler is what a worker runs for each work item, once it holds the
// resource's reconcile lease: an engine made with sdk.New. Its Reconcile
// runs one attempt and saves its outcome; the attempt's input and outcome
// are the runtime's own business.
type Reconciler = wire.Reconciler

// Worker runs one reconciler. Create it with New, run it with Run.
type Worker struct {
	rec     Reconciler
	cfg     Config
	o       options
	name    string
	replica string
	holder  string
	log     *slog.Logger
	store   *client.Store
	leases  *client.Leases
	link    *link

	running  atomic.Bool
	ready    atomic.Bool
	draining atomic.Bool
	// consuming is set once the work queue's consumer is there: only then
	// may a recovered heartbeat make the worker ready.
	consuming atomic.Bool
	stopped   atomic.Bool
	notReady  atomic.Value // string: why not ready
	reg       atomic.Pointer[registry.Registration]
	startedAt time.Time

	mu       sync.Mutex
	inflight map[*item]struct{}
	wg       sync.WaitGroup
	stats    Stats
	metrics  *workerMetrics // nil without WithMetrics
}

// Stats counts what the worker did.
type Stats struct {
	Fetched, Acked, Naked, Termed, Succeeded, Requeued, Failed, Terminal atomic.Int64
}

// item is one fetched message.
type item struct {
	msg     jetstream.Msg
	settled atomic.Bool
}

// New validates the configuration and options and returns a worker for rec.
func New(rec Reconciler, cfg Config, opts ...Option) (*Worker, error) {
	if err := cfg.validate(rec); err != nil {
		return nil, err
	}
	o := defaults()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.replicaID == "" {
		o.replicaID = defaultReplicaID()
	}
	if !validReplicaRE.MatchString(o.replicaID) {
		return nil, invalid("replica id %q: want A-Z, a-z, 0-9, _ and -, at most 128", o.replicaID)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{
		rec: rec, cfg: cfg, o: o, name: rec.Name(), replica: o.replicaID,
		holder: rec.Name() + "/" + o.replicaID,
		store:  client.NewStore(cfg.Store), leases: client.NewLeases(cfg.Store),
		inflight: map[*item]struct{}{},
	}
	w.log = o.log.With("reconciler", w.name, "replica", w.replica)
	w.link = newLink(cfg.Store, cfg.NATS, o.linkCheck, w.log)
	if o.metrics != nil {
		w.metrics = newWorkerMetrics(o.metrics, w)
	}
	w.notReady.Store("not started")
	return w, nil
}

var validReplicaRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func defaultReplicaID() string {
	host, _ := os.Hostname()
	host = regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(host, "-")
	if len(host) > 64 {
		host = host[:64]
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Name is the reconciler's name.
func (w *Worker) Name() string { return w.name }

// Holder is the lease holder name of this replica: <name>/<replica>.
func (w *Worker) Holder() string { return w.holder }

// Stats returns the worker's counters.
func (w *Worker) Stats() *Stats { return &w.stats }

// Ready reports whether the worker is registered and consuming.
func (w *Worker) Ready() bool { return w.ready.Load() && !w.draining.Load() }

// Run registers the reconciler and processes work items until ctx ends, then
// drains (see the package doc) and deregisters. It returns an error when
// registration is refused (ErrTypeTaken) or the broker cannot be set up.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer w.stopped.Store(true)
	w.startedAt = time.Now()
	js, err := jetstream.New(w.cfg.NATS)
	if err != nil {
		return fmt.Errorf("worker: jetstream: %w", err)
	}
	// The link's checks run for the whole run: readiness follows them, and
	// the worker registers (and fetches work) only while the store's
	// worker address answers; it first waits for NATS too.
	linkCtx, stopLink := context.WithCancel(context.WithoutCancel(ctx))
	linkDone := make(chan struct{})
	go func() {
		defer close(linkDone)
		w.link.watch(linkCtx)
	}()
	defer func() {
		stopLink()
		<-linkDone
	}()
	w.notReady.Store("waiting for the store's worker address " + w.link.addr + " and NATS")
	if err := w.link.waitUsable(ctx); err != nil {
		return nil // stopped before the store answered: nothing to drain
	}
	owns, ownsAny := ownedTypes(w.rec)
	replica := registry.Replica{
		Name: w.name, ID: w.replica, Types: w.cfg.Types, Finalizers: ownedFinalizers(w.rec),
		Owns: owns, OwnsAny: ownsAny, StartedAt: w.startedAt.UTC(),
	}
	reg, err := w.register(ctx, js, replica)
	if err != nil {
		return fmt.Errorf("worker %s: register: %w", w.name, err)
	}
	if reg == nil {
		return nil // stopped before it could register: nothing to drain
	}
	w.reg.Store(reg)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := reg.Deregister(dctx); err != nil {
			w.log.Warn("deregister failed; the registry forgets this replica after its TTL", "error", err)
		}
	}()
	// The registration is kept alive from now on, while the worker waits
	// for its work queue too: a worker that waits longer than the
	// registry's TTL must not drop out of the live types.
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeat(hbCtx, reg)
	}()
	defer func() {
		stopHB()
		<-hbDone
	}()

	// The work queue is the scheduler's to create: where NATS checks
	// identities this worker may not, and waits for it, not ready.
	cons, err := w.consumer(ctx, js)
	for failures := uint64(1); err != nil; failures++ {
		w.notReady.Store("work queue consumer not available yet: " + err.Error())
		w.linkLog("work queue consumer not available yet", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff(failures, 100*time.Millisecond, 2*time.Second)):
		}
		cons, err = w.consumer(ctx, js)
	}
	w.log.Info("worker started", "types", fmt.Sprint(w.cfg.Types), "max_concurrency", w.o.maxConcurrency, "lease", w.o.lease)

	// Attempts run on workCtx, which outlives ctx by the shutdown grace.
	workCtx, interrupt := context.WithCancelCause(context.WithoutCancel(ctx))
	defer interrupt(nil)
	w.consuming.Store(true)
	w.ready.Store(true)
	w.notReady.Store("")
	w.fetchLoop(ctx, workCtx, js, cons)
	w.drain(interrupt)
	w.log.Info("worker stopped")
	return nil
}

// register joins the registry, and tries again while the failure may pass
// (retryRegistration); its Registration is nil when ctx ended first.
func (w *Worker) register(ctx context.Context, js jetstream.JetStream, replica registry.Replica) (*registry.Registration, error) {
	join := func(ctx context.Context) (*registry.Registration, error) {
		if w.cfg.NATS.Opts.UserJWT != nil {
			// As a NATS user it may not create the bucket: the store does.
			return registry.JoinExisting(ctx, js, replica)
		}
		return registry.Join(ctx, js, w.o.registryTTL, replica)
	}
	return retryRegistration(ctx, join, func(err error) {
		w.notReady.Store("registering in the reconciler registry: " + err.Error())
		w.linkLog("registration failed; trying again", err)
	})
}

// retryRegistration calls join until it succeeds, with backoff, telling
// failed of each failure that may pass (NATS restarting just after the
// worker found it usable, the bucket not created yet by the store). A
// refusal no retry changes (an invalid registration, a type served by
// another reconciler) is returned at once. A nil Registration and nil
// error: ctx ended first.
func retryRegistration(ctx context.Context, join func(context.Context) (*registry.Registration, error), failed func(error)) (*registry.Registration, error) {
	for failures := uint64(1); ; failures++ {
		reg, err := join(ctx)
		switch {
		case err == nil:
			return reg, nil
		case errors.Is(err, registry.ErrInvalid) || errors.Is(err, registry.ErrTypeTaken):
			return nil, err
		case ctx.Err() != nil:
			return nil, nil
		}
		failed(err)
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(backoff(failures, 100*time.Millisecond, 2*time.Second)):
		}
	}
}

// WorkStreamConfig is the work queue stream's configuration under the
// settings s, named name (subjects.ReconcileStream but in tests): whoever
// creates the stream first, the scheduler or a worker, creates the same one.
// Its retention is work-queue: a message is gone once a consumer
// acknowledges it.
func WorkStreamConfig(name string, s subjects.StreamSettings) jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if s.Memory {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:        name,
		Description: "no8s work items: one per dispatch, consumed once by the reconciler serving the type",
		Subjects:    []string{subjects.ReconcileAll},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     storage,
		MaxAge:      s.MaxAge,
		Duplicates:  s.Duplicates,
		Replicas:    max(s.Replicas, 1),
		Discard:     jetstream.DiscardOld,
	}
}

// consumer ensures the stream (when allowed) and the reconciler's durable
// consumer, filtered on its types. A worker connected to NATS with a user
// (NATS checks identities) leaves the stream to the scheduler: its user may
// not create it.
func (w *Worker) consumer(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	stream, err := js.Stream(ctx, w.o.stream)
	if err != nil {
		if !errors.Is(err, jetstream.ErrStreamNotFound) || !w.o.createStream || w.cfg.NATS.Opts.UserJWT != nil {
			return nil, fmt.Errorf("worker: stream %s: %w", w.o.stream, err)
		}
		stream, err = js.CreateStream(ctx, WorkStreamConfig(w.o.stream, subjects.ReconcileSettings()))
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			stream, err = js.Stream(ctx, w.o.stream)
		}
		if err != nil {
			return nil, fmt.Errorf("worker: create stream %s: %w", w.o.stream, err)
		}
	}
	subjects := make([]string, 0, len(w.cfg.Types))
	for _, t := range w.cfg.Types {
		subjects = append(subjects, Subject(t))
	}
	if err := w.removeStaleConsumers(ctx, stream, subjects); err != nil {
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{
		Durable: w.name, Description: "no8s reconciler " + w.name, FilterSubjects: subjects,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: w.o.lease, MaxDeliver: -1,
		MaxAckPending: max(1000, 4*w.o.maxConcurrency), DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if len(subjects) == 1 {
		cfg.FilterSubject, cfg.FilterSubjects = subjects[0], nil
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, w.o.stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("worker: consumer %s on %s: %w", w.name, w.o.stream, err)
	}
	return cons, nil
}

// removeStaleConsumers deletes other reconcilers' consumers that filter on
// this reconciler's subjects. The registry has just granted this reconciler
// its types, so such a consumer belongs to a reconciler that no longer
// serves them (renamed or replaced); a work-queue stream would refuse a
// second consumer of the same subjects. Its unacknowledged items stay in
// the stream and come to the new consumer.
func (w *Worker) removeStaleConsumers(ctx context.Context, stream jetstream.Stream, subjects []string) error {
	lister := stream.ListConsumers(ctx)
	var stale []string
	for info := range lister.Info() {
		if info.Name == w.name {
			continue
		}
		filters := info.Config.FilterSubjects
		if info.Config.FilterSubject != "" {
			filters = append(filters, info.Config.FilterSubject)
		}
		for _, f := range filters {
			if slices.Contains(subjects, f) {
				stale = append(stale, info.Name)
				break
			}
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("worker: list consumers of %s: %w", w.o.stream, err)
	}
	for _, name := range stale {
		w.log.Warn("removing the consumer of a reconciler that no longer serves these types", "consumer", name)
		if err := stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("worker: remove stale consumer %s: %w", name, err)
		}
	}
	return nil
}

// heartbeat refreshes the registration every heartbeat interval, and at
// once when the connection to NATS is re-established: a broker that lost
// its storage has lost the bucket too, and admission refuses creates of
// the types until the keys are back (Refresh recreates the bucket).
//
// While the store's worker address does not answer, the worker cannot take
// work: it stops refreshing its registration, which lapses after the
// registry's TTL (the types stay served only by other live replicas, so
// admission's "no live reconciler" rule refuses creates when there are
// none), and refreshes it again when the store answers. A store restart
// shorter than the TTL therefore refuses no create; one that outlasts it
// does, until the store is back.
func (w *Worker) heartbeat(ctx context.Context, reg *registry.Registration) {
	t := time.NewTicker(w.o.heartbeat)
	defer t.Stop()
	reconnected := w.cfg.NATS.StatusChanged(nats.CONNECTED)
	defer w.cfg.NATS.RemoveStatusListener(reconnected)
	registered := true
	for {
		linkChanged := w.link.wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-linkChanged:
		case <-reconnected:
			w.log.Info("nats reconnected: renewing the registration")
		}
		if err := w.link.storeDown(); err != nil {
			if !w.draining.Load() {
				w.ready.Store(false)
				w.notReady.Store(err.Error())
			}
			if registered {
				registered = false
				w.log.Info("registration not refreshed while the store's worker address does not answer; it lapses after the registry TTL",
					"store_addr", w.link.addr, "ttl", w.o.registryTTL)
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, w.o.heartbeat)
		err := reg.Refresh(rctx)
		cancel()
		switch {
		case err == nil:
			if !registered {
				registered = true
				w.log.Info("registration refreshed again", "types", fmt.Sprint(w.cfg.Types))
			}
			if w.notReady.Load() != "" && !w.draining.Load() && w.consuming.Load() {
				w.log.Info("registry heartbeat recovered")
				w.notReady.Store("")
				w.ready.Store(true)
			}
		case errors.Is(err, registry.ErrTypeTaken):
			w.log.Error("lost a type to another reconciler", "error", err)
			w.ready.Store(false)
			w.notReady.Store(err.Error())
		default:
			if _, nerr := w.link.readiness(); nerr != nil {
				w.log.Debug("registry heartbeat failed", "error", err) // the link logged NATS's state once
			} else {
				w.log.Warn("registry heartbeat failed", "error", err)
			}
			if time.Since(reg.LastRefresh()) > w.o.registryTTL-w.o.heartbeat {
				w.ready.Store(false)
				w.notReady.Store("registry heartbeat failing: " + err.Error())
			}
		}
	}
}

// fetchLoop fetches as many items as there are free slots and starts an
// attempt for each, until ctx ends.
func (w *Worker) fetchLoop(ctx, workCtx context.Context, js jetstream.JetStream, cons jetstream.Consumer) {
	slots := make(chan struct{}, w.o.maxConcurrency)
	var failures int
	reconnected := w.cfg.NATS.StatusChanged(nats.CONNECTED)
	defer w.cfg.NATS.RemoveStatusListener(reconnected)
	for ctx.Err() == nil {
		// No work is taken while the store's worker address does not
		// answer: its lease could not be acquired.
		for w.link.storeDown() != nil {
			select {
			case <-w.link.wait():
			case <-ctx.Done():
				return
			}
		}
		select { // wait for one free slot, then take every other free one
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
	more:
		for n < w.o.maxConcurrency {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		fctx, cancel := context.WithTimeout(ctx, w.o.fetchWait)
		// A pull request sent before the connection dropped is lost with
		// it: end the fetch when the connection comes back, not after the
		// whole fetch wait.
		go func() {
			select {
			case <-fctx.Done():
			case <-reconnected:
				cancel()
			}
		}()
		batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			for range n {
				<-slots
			}
			failures++
			w.linkLog("fetch failed", err)
			cons = w.recover(ctx, js, cons, failures, reconnected)
			continue
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			w.stats.Fetched.Add(1)
			it := w.track(msg)
			if ctx.Err() != nil {
				w.finish(it, outcome{stage: stageNotStarted})
				<-slots
				continue
			}
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				defer func() { <-slots }()
				w.process(workCtx, it)
			}()
		}
		cancel()
		for range n - got {
			<-slots
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, jetstream.ErrNoMessages) {
			failures++
			w.linkLog("fetch ended with an error", err)
			cons = w.recover(ctx, js, cons, failures, reconnected)
			continue
		}
		failures = 0
	}
}

// recover follows a failed fetch: it waits a backoff growing with the
// consecutive failures (cut short when the NATS connection comes back),
// then ensures the work stream and the consumer again, which a broker
// restarted without its storage has lost (a deleted consumer likewise). It
// returns the consumer to fetch from next.
func (w *Worker) recover(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, failures int, reconnected <-chan nats.Status) jetstream.Consumer {
	t := time.NewTimer(backoff(uint64(failures), 100*time.Millisecond, 2*time.Second))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return cons
	case <-t.C:
	case <-reconnected:
	}
	c, err := w.consumer(ctx, js)
	if err != nil {
		if ctx.Err() == nil {
			w.linkLog("work queue consumer not available yet", err)
		}
		return cons
	}
	if failures > 1 {
		w.log.Info("work queue consumer ensured again", "failures", failures)
	}
	return c
}

// linkLog logs a failure to reach NATS at WARN, or at DEBUG while the
// link knows NATS is unreachable (it logged that once).
func (w *Worker) linkLog(msg string, err error) {
	if _, nerr := w.link.readiness(); nerr != nil || !w.cfg.NATS.IsConnected() {
		w.log.Debug(msg, "error", err)
		return
	}
	w.log.Warn(msg, "error", err)
}

func (w *Worker) track(msg jetstream.Msg) *item {
	it := &item{msg: msg}
	w.mu.Lock()
	w.inflight[it] = struct{}{}
	w.mu.Unlock()
	return it
}

// finish settles an item once.
func (w *Worker) finish(it *item, o outcome) {
	if !it.settled.CompareAndSwap(false, true) {
		return
	}
	w.mu.Lock()
	delete(w.inflight, it)
	w.mu.Unlock()
	if md, err := it.msg.Metadata(); err == nil && o.deliveries == 0 {
		o.deliveries = md.NumDelivered
	}
	a := settle(o, w.o.lease)
	switch a.verb {
	case ack:
		w.stats.Acked.Add(1)
	case nak:
		w.stats.Naked.Add(1)
	case term:
		w.stats.Termed.Add(1)
	}
	if err := apply(it.msg, a); err != nil {
		w.log.Warn("settling a work item failed; it returns after the lease", "action", a.verb.String(), "error", err)
	}
}

// drain waits for in-flight attempts within the grace, interrupts them,
// waits a little more for their saves and naks whatever is left.
func (w *Worker) drain(interrupt context.CancelCauseFunc) {
	w.draining.Store(true)
	w.ready.Store(false)
	w.notReady.Store("draining")
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	w.mu.Lock()
	n := len(w.inflight)
	w.mu.Unlock()
	if n > 0 {
		w.log.Info("draining in-flight attempts", "count", n, "grace", w.o.shutdownGrace)
	}
	select {
	case <-done:
		return
	case <-time.After(w.o.shutdownGrace):
	}
	w.log.Warn("shutdown grace over: interrupting in-flight attempts")
	interrupt(wire.ErrInterrupted)
	select {
	case <-done:
		return
	case <-time.After(w.o.interruptWait):
	}
	w.mu.Lock()
	left := make([]*item, 0, len(w.inflight))
	for it := range w.inflight {
		left = append(left, it)
	}
	w.mu.Unlock()
	w.log.Warn("attempts did not stop; their items are handed back", "count", len(left))
	for _, it := range left {
		w.finish(it, outcome{stage: stageAbandoned})
	}
}

// process runs one item: decode, acquire, reconcile (with keepalive), settle.
func (w *Worker) process(workCtx context.Context, it *item) {
	wi, err := decodeItem(it.msg.Data())
	if err != nil {
		w.log.Error("dropping a message that is not a work item", "subject", it.msg.Subject(), "error", err)
		w.finish(it, outcome{stage: stageDecode, err: err})
		return
	}
	// The attempt's span continues the work item's trace; the store calls
	// below are made inside it (client spans, and the store's server
	// spans), and so are the reconciler's steps.
	ctx, span := w.startAttempt(workCtx, it.msg, wi)
	log := w.log.With("resource_id", wi.GetResourceId(), "dispatch_id", wi.GetDispatchId())
	actx, cancel := context.WithTimeout(ctx, w.o.lease)
	lease, err := w.leases.Acquire(actx, wi, w.holder, w.o.lease)
	cancel()
	if err != nil {
		log.DebugContext(ctx, "lease not acquired", "error", err)
		endAttempt(span, wire.Report{Outcome: lifecycle.OutcomeRequeue, Err: err})
		w.finish(it, outcome{stage: stageAcquire, err: err})
		return
	}
	timeout := lease.Policy.Timeout
	if w.o.maxTimeout > 0 {
		timeout = min(timeout, w.o.maxTimeout)
	}
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	runCtx, cancelTimeout := context.WithTimeoutCause(runCtx, timeout, fmt.Errorf("reconcile timeout of %s exceeded", timeout))
	defer cancelTimeout()
	kaDone := make(chan struct{})
	stopKA := make(chan struct{})
	go func() {
		defer close(kaDone)
		// The renewals are not the attempt's work: outside its span.
		w.keepalive(trace.ContextWithSpan(runCtx, nil), stopKA, it.msg, lease, cancelRun, log)
	}()

	id := wi.GetDispatchId()
	if id == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	cl := client.ForAttempt(w.store.UnderLease(lease), w.leases.StatusWriter(lease))
	if w.o.wrapClient != nil {
		cl = w.o.wrapClient(cl)
	}
	att := &wire.Attempt{
		ID: id, Resource: lease.Resource, Reason: enumpb.ReasonName(wi.GetReason()), LeaseEpoch: lease.Epoch,
		Client: cl, API: w.o.api,
		Secrets: w.o.secrets, Log: tracing.WithSpan(ctx, w.log.With("holder", w.holder, "lease_epoch", lease.Epoch, "reason", enumpb.ReasonName(wi.GetReason()))),
		StartStep: w.stepHook(), StartAction: w.actionHook(),
	}
	started := time.Now()
	rep := w.reconcile(runCtx, att)
	if rep.Skipped {
		rep = w.release(ctx, lease)
	}
	rep = w.saveAgain(ctx, att, rep, log)
	close(stopKA)
	<-kaDone
	w.metrics.attempt(lease.Resource.Type, rep, time.Since(started))
	switch rep.Outcome {
	case lifecycle.OutcomeSuccess:
		w.stats.Succeeded.Add(1)
	case lifecycle.OutcomeRequeue:
		w.stats.Requeued.Add(1)
	case lifecycle.OutcomeError:
		w.stats.Failed.Add(1)
	case lifecycle.OutcomeTerminal:
		w.stats.Terminal.Add(1)
	}
	endAttempt(span, rep)
	w.finish(it, outcome{stage: stageRun, report: rep})
}

// reconcile calls the reconciler, turning a panic outside the engine's steps
// into an error report.
func (w *Worker) reconcile(ctx context.Context, att *wire.Attempt) (rep wire.Report) {
	defer func() {
		if v := recover(); v != nil {
			w.log.Error("reconciler panicked", "panic", fmt.Sprint(v))
			rep = wire.Report{Outcome: lifecycle.OutcomeError, Err: fmt.Errorf("reconciler panicked: %v", v),
				SaveErr: errors.New("nothing saved: the reconciler panicked")}
		}
	}()
	return w.rec.Reconcile(ctx, att)
}

// saveRetryDelay spaces the saves of a result the store could not take.
const saveRetryDelay = time.Second

// saveAgain saves once a second, for up to a lease, a result the store
// could not take because it was unavailable (its database went away). The
// attempt keeps its item (InProgress) and its lease meanwhile, so the
// result lands within a second of the database's return, instead of the
// item being redelivered to find its own lease held until it expires. A
// save refused (a stale epoch: the lease was taken over) or accepted ends
// it; so does the worker stopping. The store fences every save by the
// lease epoch, so saving again is safe.
func (w *Worker) saveAgain(ctx context.Context, att *wire.Attempt, rep wire.Report, log *slog.Logger) wire.Report {
	if rep.Completion == nil || att.Client == nil || !errors.Is(rep.SaveErr, wire.ErrUnavailable) {
		return rep
	}
	deadline := time.Now().Add(w.o.lease)
	tries := 0
	for errors.Is(rep.SaveErr, wire.ErrUnavailable) && time.Now().Before(deadline) {
		t := time.NewTimer(saveRetryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return rep
		case <-t.C:
		}
		tries++
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wire.DefaultSaveTimeout)
		rep.Completed, rep.SaveErr = att.Client.Status().Complete(sctx, rep.Completion)
		cancel()
	}
	if rep.SaveErr == nil {
		log.InfoContext(ctx, "result saved after the store came back", "tries", tries)
	} else {
		log.WarnContext(ctx, "saving the result again failed", "tries", tries, "error", rep.SaveErr)
	}
	return rep
}

// release ends the attempt on an ignored resource: nothing ran; the lease is
// given back with a requeue that leaves the conditions as they are.
func (w *Worker) release(ctx context.Context, lease *client.Lease) wire.Report {
	comp := &wire.Completion{
		ResourceID: lease.ResourceID, Generation: lease.Resource.Generation, Outcome: lifecycle.OutcomeRequeue,
		RequeueAfter: time.Second, Message: "skipped: " + names.OperationAnnotation + ": " + names.OperationIgnore, StartedAt: time.Now(),
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wire.DefaultSaveTimeout)
	defer cancel()
	done, err := w.leases.StatusWriter(lease).Complete(sctx, comp)
	return wire.Report{Outcome: lifecycle.OutcomeRequeue, Skipped: true, Err: wire.ErrIgnored, Completion: comp, Completed: done, SaveErr: err}
}

// keepalive tells the broker the item is in progress and renews the lease
// every lease/3 until stop, or until ctx ends (the reconcile timeout: a
// stuck attempt then loses its lease, and its late write is refused).
func (w *Worker) keepalive(ctx context.Context, stop <-chan struct{}, msg jetstream.Msg, lease *client.Lease, cancel context.CancelCauseFunc, log *slog.Logger) {
	t := time.NewTicker(w.o.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := msg.InProgress(); err != nil {
			log.Warn("in-progress signal failed", "error", err)
		}
		rctx, c := context.WithTimeout(ctx, w.o.lease/3)
		err := w.leases.Renew(rctx, lease, w.o.lease)
		c()
		w.metrics.renewed(err)
		switch {
		case err == nil:
		case errors.Is(err, wire.ErrStaleEpoch), errors.Is(err, wire.ErrNotFound):
			log.Warn("lease lost; cancelling the attempt", "error", err)
			w.metrics.leaseLost()
			cancel(errLeaseLost)
			return
		default:
			log.Warn("lease renewal failed", "error", err)
		}
	}
}

// decodeItem reads a WorkItem in protobuf binary or JSON form.
func decodeItem(data []byte) (*reconcilev1.WorkItem, error) {
	wi := &reconcilev1.WorkItem{}
	var err error
	if len(data) > 0 && data[0] == '{' {
		err = protojson.Unmarshal(data, wi)
	} else {
		err = proto.Unmarshal(data, wi)
	}
	if err != nil {
		return nil, err
	}
	if wi.GetResourceId() <= 0 {
		return nil, fmt.Errorf("work item without a resource id")
	}
	return wi, nil
}
