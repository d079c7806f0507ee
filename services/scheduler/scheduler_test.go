package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/no8s/no8s/libs/api/subjects"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/scheduler"
	"github.com/no8s/no8s/services/scheduler/dispatch"
	"github.com/no8s/no8s/services/store"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
)

// Finalizer is the test reconciler's own finalizer.
const finalizer = "reconciler.no8s.io/test"

// env is a real control plane without the HTTP edge: the store service
// (PostgreSQL, outbox relay) over real gRPC and an embedded JetStream.
type env struct {
	t     *testing.T
	store storage.Store
	addr  string
	rc    reconcilev1.ReconcileServiceClient
	// wc is the store's WorkerService (its worker listener), for the test
	// workers.
	wc  reconcilev1.WorkerServiceClient
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	log *slog.Logger
}

func testLogger() *slog.Logger {
	if os.Getenv("NO8S_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := t.Context()
	log := testLogger()
	db := testenv.Database(t)
	ns := testenv.NATS(t)
	nc := testenv.Connect(t, ns)
	cfg := store.DefaultConfig()
	cfg.DatabaseURL, cfg.MaxConns, cfg.ShutdownGrace, cfg.Stream.Memory = db, 8, time.Second, true
	svc, err := store.New(ctx, cfg, nc, log.With("service", "store"))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	workerLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Serve(ctx, lis, workerLis) }()
	t.Cleanup(func() { <-done })
	e := &env{t: t, store: svc.Store(), addr: lis.Addr().String(), log: log}
	e.rc = reconcilev1.NewReconcileServiceClient(e.dial())
	wconn, err := grpc.NewClient(workerLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wconn.Close() })
	e.wc = reconcilev1.NewWorkerServiceClient(wconn)
	if e.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if _, err := dispatch.Ensure(ctx, e.js, dispatch.StreamConfig{Memory: true, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if e.kv, err = e.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.RegistryBucket, TTL: subjects.RegistryTTL, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) dial(opts ...grpc.DialOption) *grpc.ClientConn {
	e.t.Helper()
	conn, err := grpc.NewClient(e.addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// serve marks a type as served by a live reconciler, heartbeating its key
// (the bucket's max age is 15 s) until the test ends.
func (e *env) serve(typeName string) {
	e.t.Helper()
	key := subjects.TypeKey(typeName, "v1")
	if _, err := e.kv.PutString(e.t.Context(), key, "test"); err != nil {
		e.t.Fatal(err)
	}
	ctx := e.t.Context()
	go func() {
		tk := time.NewTicker(5 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				_, _ = e.kv.PutString(ctx, key, "test")
			}
		}
	}()
}

// typ registers a type served by the test reconciler.
func (e *env) typ(name string, policy resource.ReconcilePolicy) {
	e.t.Helper()
	if _, err := e.store.CreateType(e.t.Context(), storage.CreateTypeRequest{Name: name, Version: "v1", Schema: []byte(`{"type":"object"}`), ReconcilePolicy: policy}); err != nil {
		e.t.Fatal(err)
	}
	e.serve(name)
}

func (e *env) create(typeName, name string) *resource.Resource {
	e.t.Helper()
	r, err := e.store.CreateResource(e.t.Context(), storage.CreateResourceRequest{Resource: resource.Resource{
		Name: name, ResourceTypeName: typeName, ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"n":1}`), Finalizers: []string{finalizer},
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) get(id int64) *resource.Resource {
	e.t.Helper()
	r, err := e.store.GetResource(e.t.Context(), storage.ResourceKey{ID: id})
	if err != nil {
		e.t.Fatalf("get %d: %v", id, err)
	}
	return r
}

func (e *env) setSpec(id int64, n int) {
	e.t.Helper()
	if _, err := e.store.UpdateResource(e.t.Context(), storage.UpdateResourceRequest{ID: id, Spec: fmt.Appendf(nil, `{"n":%d}`, n)}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) annotate(id int64, ann map[string]string) {
	e.t.Helper()
	if _, err := e.store.UpdateResource(e.t.Context(), storage.UpdateResourceRequest{ID: id, Annotations: ann, SetAnnotations: true}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) trigger(id int64) {
	e.t.Helper()
	if _, err := e.store.RequestReconcile(e.t.Context(), id); err != nil {
		e.t.Fatal(err)
	}
}

// testConfig is a scheduler tuned for tests: short leases and polls.
func testConfig(holder string) scheduler.Config {
	cfg := scheduler.DefaultConfig()
	cfg.Holder, cfg.Lease, cfg.Renew = holder, time.Second, 250*time.Millisecond
	cfg.ItemLease, cfg.LivenessPoll, cfg.RetryDelay = 2*time.Second, 100*time.Millisecond, 200*time.Millisecond
	cfg.Stream.Memory = true
	return cfg
}

// running is a scheduler running in the test.
type running struct {
	*scheduler.Service
	stop func()
}

// scheduler starts a scheduler over rc (the env's client when nil).
func (e *env) scheduler(cfg scheduler.Config, rc reconcilev1.ReconcileServiceClient) *running {
	e.t.Helper()
	if rc == nil {
		rc = e.rc
	}
	svc, err := scheduler.New(cfg, rc, e.js, e.log.With("service", "scheduler", "name", cfg.Holder))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Run(ctx) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	e.t.Cleanup(stop)
	return &running{Service: svc, stop: stop}
}

// attempt is one work item as the test worker saw it.
type attempt struct {
	resourceID int64
	reason     reconcilev1.Reason
	epoch      int64
	dispatched time.Time
	received   time.Time
	start, end time.Time // of the lease; zero when not acquired
	refused    string    // the store's code when the lease was refused
}

// outcome is what the test reconciler answers.
type outcome struct {
	result  reconcilev1.Outcome
	message string
	requeue time.Duration
	sleep   time.Duration
	// deps are the dependencies the completion reports.
	deps []*reconcilev1.Dependency
}

// worker is a test reconciler: it consumes work items the way the SDK's
// runtime does (acquire the lease, run, complete, ack) and records every
// item.
type worker struct {
	e      *env
	behave func(r *reconcilev1.AcquireLeaseResponse, it *reconcilev1.WorkItem) outcome
	// delay, when set, is how long the worker waits before acquiring an
	// item's lease (an item that waits in the queue); set it before the
	// first item arrives.
	delay func(it *reconcilev1.WorkItem) time.Duration
	mu    sync.Mutex
	seen  []attempt
}

func (e *env) worker(behave func(*reconcilev1.AcquireLeaseResponse, *reconcilev1.WorkItem) outcome) *worker {
	e.t.Helper()
	w := &worker{e: e, behave: behave}
	if w.behave == nil {
		w.behave = func(*reconcilev1.AcquireLeaseResponse, *reconcilev1.WorkItem) outcome { return outcome{} }
	}
	ctx := e.t.Context()
	cons, err := e.js.CreateOrUpdateConsumer(ctx, subjects.ReconcileStream, jetstream.ConsumerConfig{
		Durable: "test-worker", FilterSubject: subjects.ReconcileAll, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			w.handle(ctx, msg)
		})
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cc.Stop(); wg.Wait() })
	return w
}

func (w *worker) handle(ctx context.Context, msg jetstream.Msg) {
	it, err := dispatch.Decode(msg.Data())
	if err != nil {
		_ = msg.Term()
		return
	}
	a := attempt{resourceID: it.GetResourceId(), reason: it.GetReason(), epoch: it.GetSchedulerEpoch(),
		dispatched: it.GetDispatchedAt().AsTime(), received: time.Now()}
	defer func() {
		w.mu.Lock()
		w.seen = append(w.seen, a)
		w.mu.Unlock()
	}()
	if w.delay != nil {
		time.Sleep(w.delay(it))
	}
	l, err := w.e.wc.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: it.GetResourceId(), Holder: "test/worker",
		LeaseSeconds: 5, SchedulerEpoch: it.GetSchedulerEpoch(), DispatchId: it.GetDispatchId()})
	if err != nil {
		pe := problem.As(grpcstatus.FromStatus(err))
		if pe != nil {
			a.refused = pe.Code
		}
		switch {
		case pe != nil && pe.Code == problem.CodeLeaseHeld:
			_ = msg.NakWithDelay(100 * time.Millisecond)
		default:
			_ = msg.Term()
		}
		return
	}
	a.start = time.Now()
	o := w.behave(l, it)
	if o.sleep > 0 {
		time.Sleep(o.sleep)
	}
	if o.result == reconcilev1.Outcome_OUTCOME_UNSPECIFIED {
		o.result = reconcilev1.Outcome_OUTCOME_SUCCESS
	}
	req := &reconcilev1.CompleteReconcileRequest{ResourceId: it.GetResourceId(), LeaseEpoch: l.GetLeaseEpoch(), Outcome: o.result,
		StatusMessage: o.message, Generation: l.GetResource().GetGeneration(), RequeueAfterSeconds: int32(o.requeue / time.Second),
		History: &reconcilev1.HistoryEntry{Reason: it.GetReason(), ErrorMessage: o.message}, Dependencies: o.deps}
	if l.GetResource().GetAnnotations()[resource.AnnotationOperation] == resource.OperationReconcile {
		req.RemoveAnnotations = []string{resource.AnnotationOperation}
	}
	if l.GetResource().GetDeletedAt() != nil && o.result == reconcilev1.Outcome_OUTCOME_SUCCESS {
		req.RemoveFinalizers = []string{finalizer}
	}
	if _, err := w.e.wc.CompleteReconcile(ctx, req); err != nil {
		_ = msg.Nak()
		return
	}
	a.end = time.Now()
	if o.result == reconcilev1.Outcome_OUTCOME_TERMINAL {
		_ = msg.Term()
		return
	}
	_ = msg.Ack()
}

// attempts returns the items the worker acquired for a resource (all items
// when id is 0), in order.
func (w *worker) attempts(id int64) []attempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []attempt
	for _, a := range w.seen {
		if (id == 0 || a.resourceID == id) && !a.start.IsZero() {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b attempt) int { return a.start.Compare(b.start) })
	return out
}

func (w *worker) all() []attempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quiet checks that cond stays false for d.
func quiet(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			t.Fatalf("%s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) ready(id int64, generation int64) func() bool {
	return func() bool {
		r, err := e.store.GetResource(e.t.Context(), storage.ResourceKey{ID: id})
		return err == nil && r.Status == resource.StatusReady && r.ObservedGeneration == generation
	}
}

func (e *env) gone(id int64) func() bool {
	return func() bool {
		_, err := e.store.GetResource(e.t.Context(), storage.ResourceKey{ID: id})
		return errors.Is(err, storage.ErrNotFound)
	}
}

// and is cond combined with "the worker has recorded more than n attempts
// on id" (a completion is visible in the store a moment before the worker
// records it).
func and(w *worker, id int64, n int, cond func() bool) func() bool {
	return func() bool { return cond() && len(w.attempts(id)) > n }
}

func lastReason(w *worker, id int64) reconcilev1.Reason {
	a := w.attempts(id)
	if len(a) == 0 {
		return reconcilev1.Reason_REASON_UNSPECIFIED
	}
	return a[len(a)-1].reason
}

func TestDispatchTriggers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.typ("Widget", resource.ReconcilePolicy{})
	e.typ("Drifty", resource.ReconcilePolicy{ResyncSeconds: 1})
	w := e.worker(nil)
	e.scheduler(testConfig("sched"), nil)

	// Pending → dispatched → ready.
	r := e.create("Widget", "one")
	waitFor(t, 5*time.Second, "the new resource ready", and(w, r.ID, 0, e.ready(r.ID, 1)))
	if got := lastReason(w, r.ID); got != reconcilev1.Reason_REASON_PENDING {
		t.Fatalf("first reason %v", got)
	}
	// Spec change.
	n := len(w.attempts(r.ID))
	e.setSpec(r.ID, 2)
	waitFor(t, 5*time.Second, "generation 2 reconciled", and(w, r.ID, n, e.ready(r.ID, 2)))
	if got := lastReason(w, r.ID); got != reconcilev1.Reason_REASON_GENERATION {
		t.Fatalf("spec change reason %v", got)
	}
	// Manual trigger.
	n = len(w.attempts(r.ID))
	e.trigger(r.ID)
	waitFor(t, 5*time.Second, "a manual attempt", func() bool { return len(w.attempts(r.ID)) == n+1 })
	if got := lastReason(w, r.ID); got != reconcilev1.Reason_REASON_MANUAL {
		t.Fatalf("manual reason %v", got)
	}
	// The reconcile annotation: one attempt, then removed.
	n = len(w.attempts(r.ID))
	e.annotate(r.ID, map[string]string{resource.AnnotationOperation: resource.OperationReconcile})
	waitFor(t, 5*time.Second, "the annotation removed", and(w, r.ID, n, func() bool { return e.get(r.ID).Annotations[resource.AnnotationOperation] == "" }))
	if a := w.attempts(r.ID); len(a) != n+1 || a[n].reason != reconcilev1.Reason_REASON_ANNOTATION {
		t.Fatalf("annotation attempts %+v", a[n:])
	}
	// Ignore: a spec change is not reconciled until the annotation goes.
	n = len(w.attempts(r.ID))
	e.annotate(r.ID, map[string]string{resource.AnnotationOperation: resource.OperationIgnore})
	e.setSpec(r.ID, 3)
	e.trigger(r.ID)
	quiet(t, 1500*time.Millisecond, "an ignored resource was reconciled", func() bool { return len(w.attempts(r.ID)) > n })
	e.annotate(r.ID, map[string]string{})
	waitFor(t, 5*time.Second, "generation 3 reconciled after ignore", e.ready(r.ID, 3))

	// Resync of ready resources, about resync_seconds apart.
	d := e.create("Drifty", "drift")
	waitFor(t, 8*time.Second, "three resyncs", func() bool { return len(w.attempts(d.ID)) >= 4 })
	a := w.attempts(d.ID)
	for i := 1; i < 4; i++ {
		gap := a[i].start.Sub(a[i-1].end)
		if a[i].reason != reconcilev1.Reason_REASON_RESYNC || gap < 800*time.Millisecond || gap > 2*time.Second {
			t.Fatalf("resync %d: reason %v after %v", i, a[i].reason, gap)
		}
	}

	// Deletion: cleanup runs, the finalizer goes, the resource is purged.
	n = len(w.attempts(r.ID))
	if _, err := e.store.DeleteResource(t.Context(), storage.DeleteResourceRequest{ID: r.ID}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the deleted resource purged", and(w, r.ID, n, e.gone(r.ID)))
	if got := lastReason(w, r.ID); got != reconcilev1.Reason_REASON_DELETION {
		t.Fatalf("deletion reason %v", got)
	}
}

func TestBackoffTerminalAndRequeue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.typ("Flaky", resource.ReconcilePolicy{BackoffBaseSeconds: 1, BackoffMaxSeconds: 2})
	var mu sync.Mutex
	script := map[string][]reconcilev1.Outcome{
		"flaky": {reconcilev1.Outcome_OUTCOME_ERROR, reconcilev1.Outcome_OUTCOME_ERROR, reconcilev1.Outcome_OUTCOME_ERROR,
			reconcilev1.Outcome_OUTCOME_TERMINAL, reconcilev1.Outcome_OUTCOME_TERMINAL},
		"later": {reconcilev1.Outcome_OUTCOME_REQUEUE},
	}
	w := e.worker(func(l *reconcilev1.AcquireLeaseResponse, _ *reconcilev1.WorkItem) outcome {
		mu.Lock()
		defer mu.Unlock()
		name := l.GetResource().GetName()
		if len(script[name]) == 0 {
			return outcome{}
		}
		o := script[name][0]
		script[name] = script[name][1:]
		if o == reconcilev1.Outcome_OUTCOME_REQUEUE {
			return outcome{result: o, requeue: time.Second}
		}
		return outcome{result: o, message: "boom"}
	})
	e.scheduler(testConfig("sched"), nil)

	later := e.create("Flaky", "later")
	r := e.create("Flaky", "flaky")
	// Three errors: the gaps grow from the base (1 s) to the cap (2 s).
	waitFor(t, 10*time.Second, "four attempts", func() bool { return len(w.attempts(r.ID)) >= 4 })
	a := w.attempts(r.ID)
	gaps := []time.Duration{a[1].start.Sub(a[0].end), a[2].start.Sub(a[1].end), a[3].start.Sub(a[2].end)}
	if gaps[0] < 850*time.Millisecond || gaps[0] > 1500*time.Millisecond ||
		gaps[1] < 1750*time.Millisecond || gaps[1] > 2600*time.Millisecond ||
		gaps[2] < 1750*time.Millisecond || gaps[2] > 2600*time.Millisecond {
		t.Fatalf("backoff gaps %v, want about 1s, 2s, 2s (capped)", gaps)
	}
	for _, x := range a[1:] {
		if x.reason != reconcilev1.Reason_REASON_RETRY {
			t.Fatalf("retry reason %v", x.reason)
		}
	}
	got := e.get(r.ID)
	if got.Status != resource.StatusFailed || got.StatusMessage != "boom" {
		t.Fatalf("after terminal: %+v", got)
	}
	// The fourth attempt was terminal: no retry.
	quiet(t, 2500*time.Millisecond, "a terminal failure was retried", func() bool { return len(w.attempts(r.ID)) > 4 })
	// A spec change resets the backoff: dispatched at once (terminal again).
	e.setSpec(r.ID, 2)
	waitFor(t, 1500*time.Millisecond, "the spec change dispatched at once", func() bool { return len(w.attempts(r.ID)) == 5 })
	if got := lastReason(w, r.ID); got != reconcilev1.Reason_REASON_GENERATION {
		t.Fatalf("spec change reason %v", got)
	}
	quiet(t, 1200*time.Millisecond, "a terminal failure was retried", func() bool { return len(w.attempts(r.ID)) > 5 })
	// A manual trigger retries a terminal failure.
	e.trigger(r.ID)
	waitFor(t, 5*time.Second, "ready after the manual trigger", e.ready(r.ID, 2))
	// History agrees: failures first, then the success.
	h, err := e.store.ListHistory(t.Context(), storage.ListHistoryRequest{ResourceID: r.ID})
	if err != nil || len(h) != 6 || !h[0].Success || h[1].Success || h[0].Reason != "manual" {
		t.Fatalf("history %+v %v", h, err)
	}

	// Requeue: the second attempt comes about requeue_after later.
	waitFor(t, 5*time.Second, "the requeued resource ready", and(w, later.ID, 1, e.ready(later.ID, 1)))
	b := w.attempts(later.ID)
	if len(b) != 2 || b[1].reason != reconcilev1.Reason_REASON_REQUEUE {
		t.Fatalf("requeue attempts %+v", b)
	}
	if gap := b[1].start.Sub(b[0].end); gap < 800*time.Millisecond || gap > 2*time.Second {
		t.Fatalf("requeue gap %v", gap)
	}
}

// reconcilerAvailable returns the resource's ReconcilerAvailable condition
// (zero when it has none).
func (e *env) reconcilerAvailable(id int64) resource.Condition {
	for _, c := range e.get(id).Conditions {
		if c.Type == resource.ConditionReconcilerAvailable {
			return c
		}
	}
	return resource.Condition{}
}

// notRespondingEvents returns the resource's Warning Events of reason
// ReconcilerNotResponding.
func (e *env) notRespondingEvents(id int64) []storage.EventRecord {
	e.t.Helper()
	evs, err := e.store.ListEvents(e.t.Context(), storage.ListEventsRequest{ResourceID: id, Reason: resource.ReasonReconcilerNotResponding})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func TestNoLiveReconciler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.store.CreateType(t.Context(), storage.CreateTypeRequest{Name: "Orphan", Version: "v1", Schema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	w := e.worker(nil)
	e.scheduler(testConfig("sched"), nil)
	r := e.create("Orphan", "lonely")
	condition := func(status string) func() bool {
		return func() bool { return e.reconcilerAvailable(r.ID).Status == status }
	}
	waitFor(t, 5*time.Second, "ReconcilerAvailable=False", condition(resource.ConditionFalse))
	// Its work (the first reconcile) waits longer than the item lease:
	// ReconcilerNotResponding, with one Warning Event.
	waitFor(t, 10*time.Second, "ReconcilerNotResponding", func() bool {
		return e.reconcilerAvailable(r.ID).Reason == resource.ReasonReconcilerNotResponding
	})
	rv := e.get(r.ID).ResourceVersion
	quiet(t, time.Second, "a resource without a live reconciler was dispatched", func() bool { return len(w.all()) > 0 })
	if got := e.get(r.ID); got.ResourceVersion != rv || got.Phase != resource.PhaseProgressing {
		t.Fatalf("the condition was written more than once or the phase is wrong: %+v", got)
	}
	if evs := e.notRespondingEvents(r.ID); len(evs) != 1 || evs[0].Type != "Warning" || evs[0].Source != "scheduler" ||
		!strings.Contains(evs[0].Message, "no live reconciler serves Orphan/v1") {
		t.Fatalf("events %+v", evs)
	}
	// A reconciler appears: dispatched, condition True, ready.
	e.serve("Orphan")
	waitFor(t, 5*time.Second, "ready once a reconciler serves the type", e.ready(r.ID, 1))
	waitFor(t, 2*time.Second, "ReconcilerAvailable=True", condition(resource.ConditionTrue))
	if got := e.get(r.ID); got.Phase != resource.PhaseReady {
		t.Fatalf("phase %s", got.Phase)
	}
}

// TestReconcilerNotResponding: work dispatched for a type a reconciler is
// registered for, which no worker leases within the item lease, gives the
// resource condition and Warning Event ReconcilerNotResponding naming the
// reconciler and its replica; once a worker takes it, it becomes Ready.
func TestReconcilerNotResponding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.store.CreateType(t.Context(), storage.CreateTypeRequest{Name: "Silent", Version: "v1", Schema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	e.register(t.Context(), "quiet", "Silent")
	e.scheduler(testConfig("sched"), nil)
	r := e.create("Silent", "unheard")
	waitFor(t, 10*time.Second, "ReconcilerNotResponding", func() bool {
		return e.reconcilerAvailable(r.ID).Reason == resource.ReasonReconcilerNotResponding
	})
	c := e.reconcilerAvailable(r.ID)
	if c.Status != resource.ConditionFalse || !strings.Contains(c.Message, "has not been leased") || !strings.Contains(c.Message, `reconciler "quiet" is registered`) ||
		!strings.Contains(c.Message, "replica-1 (last heartbeat ") {
		t.Fatalf("condition %+v", c)
	}
	if evs := e.notRespondingEvents(r.ID); len(evs) != 1 || evs[0].Type != "Warning" || evs[0].Message != c.Message {
		t.Fatalf("events %+v", evs)
	}
	// A worker comes: it takes the item, and the resource is ready.
	e.worker(nil)
	waitFor(t, 10*time.Second, "ready once a worker takes the work", e.ready(r.ID, 1))
	if c := e.reconcilerAvailable(r.ID); c.Status != resource.ConditionTrue {
		t.Fatalf("condition after the lease %+v", c)
	}
}

func TestAtMostOneOutstandingItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.typ("Widget", resource.ReconcilePolicy{})
	e.scheduler(testConfig("sched"), nil)
	stream, err := e.js.Stream(t.Context(), subjects.ReconcileStream)
	if err != nil {
		t.Fatal(err)
	}
	queued := func() uint64 {
		info, err := stream.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	// No worker yet: many triggers, one queued item per resource, also past
	// the item lease (the scheduler sees the item still queued).
	var ids []int64
	for i := range 5 {
		ids = append(ids, e.create("Widget", fmt.Sprintf("w%d", i)).ID)
	}
	waitFor(t, 5*time.Second, "five items queued", func() bool { return queued() == 5 })
	for range 3 {
		for _, id := range ids {
			e.trigger(id)
		}
	}
	e.setSpec(ids[0], 2)
	quiet(t, 3*time.Second, "more than one item per resource was queued", func() bool { return queued() > 5 })

	// A slow worker: attempts on one resource never overlap, and triggers
	// that arrive meanwhile lead to one more attempt, not one each.
	w := e.worker(func(*reconcilev1.AcquireLeaseResponse, *reconcilev1.WorkItem) outcome {
		return outcome{sleep: 150 * time.Millisecond}
	})
	stopTriggers := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopTriggers:
				return
			case <-time.After(20 * time.Millisecond):
			}
			e.trigger(ids[i%len(ids)])
		}
	})
	time.Sleep(1500 * time.Millisecond)
	close(stopTriggers)
	wg.Wait()
	for _, id := range ids {
		waitFor(t, 5*time.Second, "every resource settled", func() bool {
			res, err := e.store.ListReconcileState(t.Context(), storage.ListReconcileStateRequest{IDs: []int64{id}})
			return err == nil && res.States[0].Status == resource.StatusReady && res.States[0].ReconcileRequestedAt == nil &&
				res.States[0].ObservedGeneration == res.States[0].Generation
		})
	}
	total := 0
	for _, id := range ids {
		a := w.attempts(id)
		total += len(a)
		for i := 1; i < len(a); i++ {
			if a[i].start.Before(a[i-1].end) {
				t.Fatalf("resource %d: attempts overlap: %v-%v and %v-%v", id, a[i-1].start, a[i-1].end, a[i].start, a[i].end)
			}
		}
	}
	// About 75 triggers; each 150 ms attempt absorbs the ones that arrive
	// while it runs.
	if total > 60 {
		t.Fatalf("%d attempts for about 75 triggers on 5 resources: triggers were not coalesced", total)
	}
	for _, a := range w.all() {
		if a.refused != "" {
			t.Fatalf("an item was refused (%s): more than one was outstanding", a.refused)
		}
	}
}

// pauser blocks a client's calls while paused, as if the process were
// stopped (SIGSTOP): calls wait until resumed or until their deadline.
type pauser struct {
	mu   sync.Mutex
	gate chan struct{}
}

func (p *pauser) pause() { p.mu.Lock(); p.gate = make(chan struct{}); p.mu.Unlock() }
func (p *pauser) resume() {
	p.mu.Lock()
	close(p.gate)
	p.gate = nil
	p.mu.Unlock()
}

func (p *pauser) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func TestFailover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.typ("Widget", resource.ReconcilePolicy{})
	w := e.worker(nil)
	a := e.scheduler(testConfig("sched-a"), nil)
	waitFor(t, 3*time.Second, "a leads", func() bool { return a.Status().Ready })
	b := e.scheduler(testConfig("sched-b"), nil)
	var ids []int64
	for i := range 10 {
		ids = append(ids, e.create("Widget", fmt.Sprintf("before-%d", i)).ID)
	}
	for _, id := range ids {
		waitFor(t, 5*time.Second, "ready under a", e.ready(id, 1))
	}
	if b.Status().Leader {
		t.Fatal("two leaders")
	}
	epochA := a.Status().Epoch
	// a stops (graceful: it releases the lease); resources created
	// meanwhile are not lost.
	a.stop()
	stopped := time.Now()
	for i := range 10 {
		ids = append(ids, e.create("Widget", fmt.Sprintf("after-%d", i)).ID)
	}
	for _, id := range ids[:3] {
		e.setSpec(id, 2)
	}
	waitFor(t, 10*time.Second, "b takes over and rebuilds", func() bool { return b.Status().Ready })
	if took := time.Since(stopped); took > 10*time.Second {
		t.Fatalf("takeover took %v, more than the 10 s allowed", took)
	}
	// Resources created while b took over reach it from the rebuild or from
	// the event stream, whichever came first.
	waitFor(t, 5*time.Second, "b tracks every resource", func() bool { return b.Status().Tracked >= len(ids) })
	if st := b.Status(); st.Epoch <= epochA {
		t.Fatalf("b: %+v (a had epoch %d)", st, epochA)
	}
	for i, id := range ids {
		gen := int64(1)
		if i < 3 {
			gen = 2
		}
		waitFor(t, 5*time.Second, "ready under b", e.ready(id, gen))
	}
	for _, x := range w.all() {
		if x.epoch == epochA && x.received.After(stopped.Add(100*time.Millisecond)) && x.dispatched.After(stopped) {
			t.Fatalf("a dispatched after it stopped: %+v", x)
		}
	}
}

func TestPausedLeaderDispatchesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.typ("Widget", resource.ReconcilePolicy{})
	w := e.worker(nil)
	p := &pauser{}
	a := e.scheduler(testConfig("sched-a"), reconcilev1.NewReconcileServiceClient(e.dial(grpc.WithUnaryInterceptor(p.intercept))))
	waitFor(t, 3*time.Second, "a leads", func() bool { return a.Status().Ready })
	b := e.scheduler(testConfig("sched-b"), nil)
	first := e.create("Widget", "first")
	waitFor(t, 5*time.Second, "ready under a", e.ready(first.ID, 1))
	epochA := a.Status().Epoch

	// a stops answering (its store calls hang) past its lease; b takes over.
	p.pause()
	paused := time.Now()
	sentByA := a.Status().Dispatched
	second := e.create("Widget", "second")
	e.trigger(first.ID)
	waitFor(t, 4*time.Second, "b takes over", func() bool { return b.Status().Ready })
	bSince := b.Status().Since
	waitFor(t, 5*time.Second, "ready under b", e.ready(second.ID, 1))
	// a resumes: it must find its epoch stale and dispatch nothing.
	p.resume()
	resumed := time.Now()
	third := e.create("Widget", "third")
	e.trigger(second.ID)
	waitFor(t, 5*time.Second, "ready under b after a resumed", and(w, third.ID, 0, e.ready(third.ID, 1)))
	time.Sleep(time.Second)
	if st := a.Status(); st.Leader || st.Dispatched != sentByA {
		t.Fatalf("a after resuming: %+v (had dispatched %d when paused)", st, sentByA)
	}
	if !b.Status().Leader {
		t.Fatal("b lost the lead")
	}
	for _, x := range w.all() {
		if x.epoch != epochA {
			continue
		}
		if !x.dispatched.Before(bSince) || x.received.After(resumed) || x.dispatched.After(paused) {
			t.Fatalf("a's item after its pause: %+v (paused %v, b leads since %v, resumed %v)", x, paused, bSince, resumed)
		}
	}
	if a := w.attempts(third.ID); len(a) == 0 || a[0].epoch == epochA {
		t.Fatalf("third resource attempts %+v", a)
	}
}

func TestStaleEpochStopsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.typ("Widget", resource.ReconcilePolicy{})
	w := e.worker(nil)
	cfg := testConfig("sched-a")
	cfg.Lease, cfg.Renew = 6*time.Second, 2*time.Second // renewals too rare to notice first
	a := e.scheduler(cfg, nil)
	waitFor(t, 3*time.Second, "a leads", func() bool { return a.Status().Ready })
	r := e.create("Widget", "one")
	waitFor(t, 5*time.Second, "ready under a", e.ready(r.ID, 1))
	epochA, sent := a.Status().Epoch, a.Status().Dispatched

	// Another scheduler takes over behind a's back (as after a pause that
	// a's clock did not notice).
	if _, err := e.store.(*pgstore.Store).Pool().Exec(t.Context(),
		`UPDATE scheduler_state SET epoch = epoch + 1, holder = 'intruder', lease_expires_at = now() + interval '30 seconds'`); err != nil {
		t.Fatal(err)
	}
	bumped := time.Now()
	e.trigger(r.ID)
	// a's next dispatch is refused: it stops leading at once, long before
	// its next renewal would have told it.
	waitFor(t, time.Second, "a steps down", func() bool { return !a.Status().Leader })
	if took := time.Since(bumped); took > 1500*time.Millisecond {
		t.Fatalf("a took %v to step down", took)
	}
	quiet(t, 500*time.Millisecond, "a dispatched with a stale epoch", func() bool { return a.Status().Dispatched != sent })
	for _, x := range w.all() {
		if x.epoch == epochA && x.dispatched.After(bumped) {
			t.Fatalf("item of the stale epoch: %+v", x)
		}
	}
}
