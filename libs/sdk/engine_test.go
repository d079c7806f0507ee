package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// recorder is an in-memory wire.Client that records the calls the engine
// makes, so that the engine's pure logic is tested without a store. (The
// runtime and the test kit test against the real store.)
type recorder struct {
	mu        sync.Mutex
	calls     *[]string
	completed []*wire.Completion
	finErr    error
	saveErr   error
}

func (r *recorder) log(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.calls = append(*r.calls, s)
}

func (r *recorder) Get(context.Context, int64) (*sdk.Resource, error) { return nil, wire.ErrNotFound }
func (r *recorder) GetByName(context.Context, sdk.TypeRef, string, string) (*sdk.Resource, error) {
	return nil, wire.ErrNotFound
}
func (r *recorder) List(context.Context, wire.ListOptions) (*wire.ResourceList, error) {
	return &wire.ResourceList{}, nil
}
func (r *recorder) UpdateFinalizers(_ context.Context, id int64, add, remove []string) (*sdk.Resource, error) {
	r.log(fmt.Sprintf("finalizers +%v -%v", add, remove))
	return nil, r.finErr
}
func (r *recorder) Status() wire.StatusWriter { return r }
func (r *recorder) Complete(_ context.Context, c *wire.Completion) (*wire.Completed, error) {
	r.log("complete " + c.Outcome.String())
	r.mu.Lock()
	r.completed = append(r.completed, c)
	r.mu.Unlock()
	if r.saveErr != nil {
		return nil, r.saveErr
	}
	return &wire.Completed{}, nil
}

type spec struct {
	Size int `json:"size"`
}

// step is a configurable test step that logs its calls.
type step struct {
	name      string
	calls     *[]string
	doRes     sdk.Result
	doErr     error
	cleanRes  sdk.Result
	cleanErr  error
	postErr   error
	panicDo   bool
	condition string // set True on Do when non-empty
}

func (s *step) Name() string { return s.name }
func (s *step) Do(_ context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
	*s.calls = append(*s.calls, "do "+s.name)
	if s.panicDo {
		panic("boom")
	}
	if s.condition != "" {
		req.MarkTrue(s.condition, "Done", "")
	}
	return s.doRes, s.doErr
}
func (s *step) Cleanup(context.Context, *sdk.Request[spec]) (sdk.Result, error) {
	*s.calls = append(*s.calls, "cleanup "+s.name)
	return s.cleanRes, s.cleanErr
}
func (s *step) Post(context.Context, *sdk.Request[spec]) error {
	*s.calls = append(*s.calls, "post "+s.name)
	return s.postErr
}

const name = "widgets"

var fin = names.ReconcilerFinalizer(name)

func resource() *sdk.Resource {
	return &sdk.Resource{
		ID: 7, Name: "w1", Type: sdk.Type("Widget", "v1"), Generation: 3, Spec: json.RawMessage(`{"size":2}`),
		Status: client.StatusReconciling, Finalizers: []string{fin},
	}
}

func deleting(r *sdk.Resource) *sdk.Resource {
	r.DeletedAt = time.Now()
	r.Status = client.StatusDeleting
	return r
}

type fixture struct {
	calls []string
	steps []*step
	rec   *recorder
}

func newFixture(n int) *fixture {
	f := &fixture{}
	f.rec = &recorder{calls: &f.calls}
	for i := range n {
		f.steps = append(f.steps, &step{name: fmt.Sprintf("s%d", i+1), calls: &f.calls})
	}
	return f
}

func (f *fixture) run(t *testing.T, res *sdk.Resource) wire.Report {
	t.Helper()
	steps := make([]sdk.Step[spec], len(f.steps))
	for i, s := range f.steps {
		steps[i] = s
	}
	e := sdk.New(name, steps...)
	return e.Reconcile(context.Background(), &wire.Attempt{ID: "r1", Resource: res, Client: f.rec})
}

func (f *fixture) saved(t *testing.T) *wire.Completion {
	t.Helper()
	if len(f.rec.completed) != 1 {
		t.Fatalf("want exactly one save, got %d (calls %v)", len(f.rec.completed), f.calls)
	}
	return f.rec.completed[0]
}

func wantCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("calls\n got %q\nwant %q", got, want)
	}
}

func TestDoInOrderThenPostThenOneSave(t *testing.T) {
	f := newFixture(3)
	rep := f.run(t, resource())
	wantCalls(t, f.calls, "do s1", "do s2", "do s3", "post s1", "post s2", "post s3", "complete success")
	c := f.saved(t)
	if rep.Outcome != lifecycle.OutcomeSuccess || rep.Err != nil || rep.SaveErr != nil {
		t.Fatalf("report %+v", rep)
	}
	if c.Phase != conditions.PhaseReady || c.Generation != 3 || c.ResourceID != 7 || c.Message != "reconciled" {
		t.Fatalf("completion %+v", c)
	}
	if r, _ := conditions.Find(c.Conditions, conditions.Ready); !r.IsTrue() || r.ObservedGeneration != 3 {
		t.Fatalf("Ready %+v", r)
	}
	if c.Outputs != nil || c.AddFinalizers != nil || c.RemoveFinalizers != nil || c.RemoveAnnotations != nil {
		t.Fatalf("unexpected changes %+v", c)
	}
}

func TestFailureStopsDoButPostAlwaysRuns(t *testing.T) {
	f := newFixture(3)
	f.steps[1].doErr = errors.New("disk full")
	rep := f.run(t, resource())
	wantCalls(t, f.calls, "do s1", "do s2", "post s1", "post s2", "post s3", "complete error")
	c := f.saved(t)
	if rep.Outcome != lifecycle.OutcomeError || c.Outcome != lifecycle.OutcomeError || c.Phase != conditions.PhaseProgressing {
		t.Fatalf("report %+v completion %+v", rep, c)
	}
	if !strings.Contains(c.Error, "step s2: disk full") || c.Message != c.Error {
		t.Fatalf("error %q message %q", c.Error, c.Message)
	}
	r, _ := conditions.Find(c.Conditions, conditions.Ready)
	if r.Status != conditions.False || r.Reason != conditions.ReasonReconcileError {
		t.Fatalf("Ready %+v", r)
	}
}

// A partial failure while still serving: retried like an error, phase
// Degraded, generation observed.
func TestDegradedError(t *testing.T) {
	f := newFixture(2)
	f.steps[0].doErr = fmt.Errorf("relays: %w", sdk.Degradedf("1 of 2 connected"))
	rep := f.run(t, resource())
	wantCalls(t, f.calls, "do s1", "post s1", "post s2", "complete error")
	c := f.saved(t)
	if rep.Outcome != lifecycle.OutcomeError || !sdk.IsDegraded(rep.Err) || !c.Degraded || !c.Observed || c.Phase != conditions.PhaseDegraded {
		t.Fatalf("report %+v completion %+v", rep, c)
	}
	if r, _ := conditions.Find(c.Conditions, conditions.Ready); r.Status != conditions.False || r.Reason != conditions.ReasonDegraded {
		t.Fatalf("Ready %+v", r)
	}
	// While deleting, a partial failure of the cleanup is Terminating.
	g := newFixture(1)
	g.steps[0].cleanErr = sdk.Degraded(errors.New("half gone"))
	g.run(t, deleting(resource()))
	if c := g.saved(t); c.Degraded || c.Phase != conditions.PhaseTerminating {
		t.Fatalf("deleting: completion %+v", c)
	}
}

// Every attempt that ends observes its generation; a requeue does not.
func TestObservedOnEveryEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		result sdk.Result
		want   bool
	}{
		{"success", nil, sdk.Result{}, true},
		{"error", errors.New("x"), sdk.Result{}, true},
		{"terminal", sdk.Terminal(errors.New("x")), sdk.Result{}, true},
		{"requeue", nil, sdk.RequeueAfter(time.Minute), false},
	} {
		f := newFixture(1)
		f.steps[0].doErr, f.steps[0].doRes = tc.err, tc.result
		f.run(t, resource())
		if c := f.saved(t); c.Observed != tc.want || c.Degraded {
			t.Errorf("%s: observed %v degraded %v", tc.name, c.Observed, c.Degraded)
		}
	}
}

func TestTerminalError(t *testing.T) {
	f := newFixture(2)
	f.steps[0].doErr = fmt.Errorf("validate: %w", sdk.Terminalf("size %d is too large", 2))
	rep := f.run(t, resource())
	wantCalls(t, f.calls, "do s1", "post s1", "post s2", "complete terminal")
	if rep.Outcome != lifecycle.OutcomeTerminal || !sdk.IsTerminal(rep.Err) {
		t.Fatalf("report %+v", rep)
	}
	if r, _ := conditions.Find(f.saved(t).Conditions, conditions.Ready); r.Reason != conditions.ReasonTerminalError {
		t.Fatalf("Ready %+v", r)
	}
}

func TestRequeue(t *testing.T) {
	for _, tc := range []struct {
		res  sdk.Result
		want time.Duration
	}{
		{sdk.Result{Requeue: true}, wire.DefaultRequeueDelay},
		{sdk.RequeueAfter(45 * time.Second), 45 * time.Second},
	} {
		f := newFixture(2)
		f.steps[0].doRes = tc.res
		rep := f.run(t, resource())
		wantCalls(t, f.calls, "do s1", "post s1", "post s2", "complete requeue")
		c := f.saved(t)
		if rep.Outcome != lifecycle.OutcomeRequeue || rep.RequeueAfter != tc.want || c.RequeueAfter != tc.want || c.Phase != conditions.PhaseProgressing {
			t.Fatalf("report %+v completion %+v", rep, c)
		}
		if r, _ := conditions.Find(c.Conditions, conditions.Ready); r.Status != conditions.False || r.Reason != conditions.ReasonRequeued {
			t.Fatalf("Ready %+v", r)
		}
	}
}

func TestDoneWithConditionNotTrueIsARequeue(t *testing.T) {
	f := newFixture(1)
	steps := []sdk.Step[spec]{sdk.StepFuncs[spec]{StepName: "probe", DoFunc: func(_ context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
		req.MarkFalse("Reachable", "Timeout", "no answer from the server")
		return sdk.Result{}, nil
	}}}
	rep := sdk.New(name, steps...).WithNotReadyRequeue(time.Minute).
		Reconcile(context.Background(), &wire.Attempt{Resource: resource(), Client: f.rec})
	c := f.saved(t)
	if rep.Outcome != lifecycle.OutcomeRequeue || rep.RequeueAfter != time.Minute || c.Phase != conditions.PhaseProgressing {
		t.Fatalf("report %+v completion %+v", rep, c)
	}
	r, _ := conditions.Find(c.Conditions, conditions.Ready)
	if r.Status != conditions.False || r.Reason != "Timeout" || !strings.Contains(r.Message, "no answer") {
		t.Fatalf("Ready %+v", r)
	}
}

func TestInitializedConditionsKeepReadyFalse(t *testing.T) {
	f := newFixture(0)
	rep := sdk.New[spec](name).WithConditions("DatabaseExists").
		Reconcile(context.Background(), &wire.Attempt{Resource: resource(), Client: f.rec})
	c := f.saved(t)
	if rep.Outcome != lifecycle.OutcomeRequeue {
		t.Fatalf("outcome %s", rep.Outcome)
	}
	if d, ok := conditions.Find(c.Conditions, "DatabaseExists"); !ok || d.Status != conditions.Unknown {
		t.Fatalf("conditions %+v", c.Conditions)
	}
}

func TestConditionsKeepTransitionTimeAcrossAttempts(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	now := func() time.Time { return clock }
	res := resource()
	mk := func() *sdk.Engine[spec] {
		return sdk.New(name, sdk.Step[spec](sdk.StepFuncs[spec]{StepName: "a", DoFunc: func(_ context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
			req.MarkTrue("DatabaseExists", "Created", fmt.Sprintf("size %d", req.Spec.Size))
			return sdk.Result{}, nil
		}})).WithClock(now)
	}
	f := newFixture(0)
	mk().Reconcile(context.Background(), &wire.Attempt{Resource: res, Client: f.rec})
	first := f.rec.completed[0]
	// The next attempt starts from what was saved, a generation later.
	res.Conditions, res.Generation = first.Conditions, 4
	clock = t0.Add(time.Hour)
	mk().Reconcile(context.Background(), &wire.Attempt{Resource: res, Client: f.rec})
	second := f.rec.completed[1]
	for _, typ := range []string{"DatabaseExists", conditions.Ready} {
		c, _ := conditions.Find(second.Conditions, typ)
		if !c.LastTransitionTime.Equal(t0) || c.ObservedGeneration != 4 || !c.IsTrue() {
			t.Fatalf("%s: %+v", typ, c)
		}
	}
	if got := len(second.Conditions); got != 2 {
		t.Fatalf("conditions not unique by type: %+v", second.Conditions)
	}
}

func TestFinalizerEnsuredBeforeFirstDo(t *testing.T) {
	f := newFixture(2)
	res := resource()
	res.Finalizers = nil
	f.run(t, res)
	wantCalls(t, f.calls, "finalizers +["+fin+"] -[]", "do s1", "do s2", "post s1", "post s2", "complete success")
	if c := f.saved(t); !slices.Equal(c.AddFinalizers, []string{fin}) {
		t.Fatalf("completion %+v", c)
	}
}

func TestFinalizerFailureRunsNoStep(t *testing.T) {
	f := newFixture(2)
	denied := errors.New("finalizer refused")
	f.rec.finErr = denied
	res := resource()
	res.Finalizers = nil
	rep := f.run(t, res)
	wantCalls(t, f.calls, "finalizers +["+fin+"] -[]", "post s1", "post s2", "complete error")
	if rep.Outcome != lifecycle.OutcomeError || !errors.Is(rep.Err, denied) {
		t.Fatalf("report %+v", rep)
	}
}

// A store that cannot reach its database (here while adding the
// finalizer) is an outage, not the resource's failure: the attempt is a
// requeue in a second, not an error with the failure backoff.
func TestStoreUnavailableIsARequeue(t *testing.T) {
	f := newFixture(2)
	f.rec.finErr = fmt.Errorf("update finalizers: %w", wire.ErrUnavailable)
	res := resource()
	res.Finalizers = nil
	rep := f.run(t, res)
	wantCalls(t, f.calls, "finalizers +["+fin+"] -[]", "post s1", "post s2", "complete requeue")
	if rep.Outcome != lifecycle.OutcomeRequeue || rep.RequeueAfter != wire.DefaultRequeueDelay || !errors.Is(rep.Err, wire.ErrUnavailable) {
		t.Fatalf("report %+v", rep)
	}
	c := f.saved(t)
	if c.Observed || len(c.Conditions) == 0 || c.Conditions[0].Reason != conditions.ReasonStoreUnavailable {
		t.Fatalf("completion %+v", c)
	}
}

func TestCleanupInReverseThenFinalizerRemoved(t *testing.T) {
	f := newFixture(3)
	rep := f.run(t, deleting(resource()))
	wantCalls(t, f.calls, "cleanup s3", "cleanup s2", "cleanup s1", "post s1", "post s2", "post s3", "complete success")
	c := f.saved(t)
	if rep.Outcome != lifecycle.OutcomeSuccess || !slices.Equal(c.RemoveFinalizers, []string{fin}) || c.Phase != conditions.PhaseTerminating {
		t.Fatalf("report %+v completion %+v", rep, c)
	}
	if r, _ := conditions.Find(c.Conditions, conditions.Ready); r.Reason != conditions.ReasonDeleting || r.IsTrue() {
		t.Fatalf("Ready %+v", r)
	}
}

func TestCleanupFailureKeepsFinalizer(t *testing.T) {
	f := newFixture(3)
	f.steps[1].cleanErr = errors.New("drop database: in use")
	rep := f.run(t, deleting(resource()))
	wantCalls(t, f.calls, "cleanup s3", "cleanup s2", "post s1", "post s2", "post s3", "complete error")
	c := f.saved(t)
	if rep.Outcome != lifecycle.OutcomeError || c.RemoveFinalizers != nil || c.Phase != conditions.PhaseTerminating {
		t.Fatalf("report %+v completion %+v", rep, c)
	}
	f = newFixture(2)
	f.steps[0].cleanRes = sdk.RequeueAfter(5 * time.Second)
	rep = f.run(t, deleting(resource()))
	if rep.Outcome != lifecycle.OutcomeRequeue || f.saved(t).RemoveFinalizers != nil {
		t.Fatalf("requeued cleanup: %+v", rep)
	}
}

func TestDeletingWithoutOwnFinalizerRunsNoCleanup(t *testing.T) {
	f := newFixture(2)
	res := deleting(resource())
	res.Finalizers = []string{"example.com/external"}
	rep := f.run(t, res)
	wantCalls(t, f.calls, "post s1", "post s2", "complete success")
	if rep.Outcome != lifecycle.OutcomeSuccess || f.saved(t).RemoveFinalizers != nil {
		t.Fatalf("report %+v", rep)
	}
}

func TestPanicIsRecovered(t *testing.T) {
	f := newFixture(2)
	f.steps[0].panicDo = true
	rep := f.run(t, resource())
	wantCalls(t, f.calls, "do s1", "post s1", "post s2", "complete error")
	if rep.Outcome != lifecycle.OutcomeError || !strings.Contains(rep.Err.Error(), "step s1 panicked: boom") {
		t.Fatalf("report %+v", rep)
	}
}

func TestPostErrorFailsASuccess(t *testing.T) {
	f := newFixture(2)
	f.steps[1].postErr = errors.New("metrics")
	rep := f.run(t, resource())
	if rep.Outcome != lifecycle.OutcomeError || !strings.Contains(rep.Err.Error(), "post: step s2: metrics") {
		t.Fatalf("report %+v", rep)
	}
}

func TestIgnoreAnnotationSkips(t *testing.T) {
	f := newFixture(2)
	res := resource()
	res.Annotations = map[string]string{names.OperationAnnotation: names.OperationIgnore}
	rep := f.run(t, res)
	wantCalls(t, f.calls)
	if !rep.Skipped || !errors.Is(rep.Err, wire.ErrIgnored) || len(f.rec.completed) != 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestReconcileAnnotationForcesAndIsRemoved(t *testing.T) {
	f := newFixture(0)
	var forced bool
	e := sdk.New(name, sdk.Step[spec](sdk.StepFuncs[spec]{StepName: "x", DoFunc: func(_ context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
		forced = req.Force
		return sdk.Result{}, nil
	}}))
	res := resource()
	res.Annotations = map[string]string{names.OperationAnnotation: names.OperationReconcile, "keep": "me"}
	e.Reconcile(context.Background(), &wire.Attempt{Resource: res, Client: f.rec})
	if c := f.saved(t); !forced || !slices.Equal(c.RemoveAnnotations, []string{names.OperationAnnotation}) {
		t.Fatalf("forced %v completion %+v", forced, c)
	}
	// Without the annotation: no force, nothing removed.
	f = newFixture(0)
	forced = true
	e.Reconcile(context.Background(), &wire.Attempt{Resource: resource(), Client: f.rec})
	if c := f.saved(t); forced || c.RemoveAnnotations != nil {
		t.Fatalf("forced %v completion %+v", forced, c)
	}
}

func TestOutputsScratchAndChanges(t *testing.T) {
	f := newFixture(0)
	res := resource()
	res.Outputs = json.RawMessage(`{"host":"old","stale":1}`)
	e := sdk.New(name,
		sdk.Step[spec](sdk.StepFuncs[spec]{StepName: "a", DoFunc: func(_ context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
			req.Scratch["db"] = "conn-1"
			req.Changes.Created++
			return sdk.Result{}, nil
		}}),
		sdk.Step[spec](sdk.StepFuncs[spec]{StepName: "b", DoFunc: func(_ context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
			db, ok := sdk.Lookup[string](req, "db")
			if !ok {
				return sdk.Result{}, errors.New("no db in scratch")
			}
			req.SetOutput("host", db)
			req.DeleteOutput("stale")
			return sdk.Result{}, nil
		}}),
	)
	rep := e.Reconcile(context.Background(), &wire.Attempt{Resource: res, Client: f.rec})
	c := f.saved(t)
	if rep.Outcome != lifecycle.OutcomeSuccess || string(c.Outputs) != `{"host":"conn-1"}` || c.Changes.Created != 1 {
		t.Fatalf("report %+v completion %+v outputs %s", rep, c, c.Outputs)
	}
}

func TestUndecodableSpecIsTerminal(t *testing.T) {
	f := newFixture(1)
	res := resource()
	res.Spec = json.RawMessage(`{"size":"big"}`)
	rep := f.run(t, res)
	wantCalls(t, f.calls, "post s1", "complete terminal")
	if rep.Outcome != lifecycle.OutcomeTerminal {
		t.Fatalf("report %+v", rep)
	}
}

func TestCanceledContextStopsSteps(t *testing.T) {
	f := newFixture(2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	steps := []sdk.Step[spec]{f.steps[0], f.steps[1]}
	rep := sdk.New(name, steps...).Reconcile(ctx, &wire.Attempt{Resource: resource(), Client: f.rec})
	wantCalls(t, f.calls, "post s1", "post s2", "complete error")
	if !errors.Is(rep.Err, context.Canceled) || rep.SaveErr != nil {
		t.Fatalf("report %+v (the save must still happen after cancellation)", rep)
	}
}

func TestSaveErrorIsReported(t *testing.T) {
	f := newFixture(1)
	f.rec.saveErr = fmt.Errorf("complete: %w", wire.ErrStaleEpoch)
	rep := f.run(t, resource())
	if rep.Outcome != lifecycle.OutcomeSuccess || !errors.Is(rep.SaveErr, wire.ErrStaleEpoch) || rep.Completed != nil {
		t.Fatalf("report %+v", rep)
	}
}

func TestFuncAdapter(t *testing.T) {
	f := newFixture(0)
	var seen []bool
	e := sdk.New(name, sdk.Step[spec](sdk.Func[spec](func(_ context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
		seen = append(seen, req.Deleting())
		return sdk.Result{}, nil
	})))
	e.Reconcile(context.Background(), &wire.Attempt{Resource: resource(), Client: f.rec})
	e.Reconcile(context.Background(), &wire.Attempt{Resource: deleting(resource()), Client: f.rec})
	if !slices.Equal(seen, []bool{false, true}) || !slices.Equal(f.rec.completed[1].RemoveFinalizers, []string{fin}) {
		t.Fatalf("seen %v completions %+v", seen, f.rec.completed)
	}
}

func TestInterruptedAttemptIsARequeue(t *testing.T) {
	f := newFixture(2)
	ctx, cancel := context.WithCancelCause(context.Background())
	steps := []sdk.Step[spec]{sdk.StepFuncs[spec]{StepName: "slow", DoFunc: func(ctx context.Context, _ *sdk.Request[spec]) (sdk.Result, error) {
		cancel(wire.ErrInterrupted)
		<-ctx.Done()
		return sdk.Result{}, ctx.Err()
	}}}
	rep := sdk.New(name, steps...).Reconcile(ctx, &wire.Attempt{Resource: resource(), Client: f.rec})
	if rep.Outcome != lifecycle.OutcomeRequeue || rep.RequeueAfter != wire.DefaultRequeueDelay || !errors.Is(rep.Err, wire.ErrInterrupted) {
		t.Fatalf("report %+v", rep)
	}
	if c := f.saved(t); c.Outcome != lifecycle.OutcomeRequeue {
		t.Fatalf("completion %+v", c)
	}
}

func TestTimeoutCauseIsInTheError(t *testing.T) {
	f := newFixture(0)
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Millisecond, errors.New("reconcile timeout of 1ms exceeded"))
	defer cancel()
	steps := []sdk.Step[spec]{sdk.StepFuncs[spec]{StepName: "slow", DoFunc: func(ctx context.Context, _ *sdk.Request[spec]) (sdk.Result, error) {
		<-ctx.Done()
		return sdk.Result{}, ctx.Err()
	}}}
	rep := sdk.New(name, steps...).Reconcile(ctx, &wire.Attempt{Resource: resource(), Client: f.rec})
	if rep.Outcome != lifecycle.OutcomeError || !errors.Is(rep.Err, context.DeadlineExceeded) || !strings.Contains(rep.Err.Error(), "reconcile timeout of 1ms exceeded") {
		t.Fatalf("report %+v", rep)
	}
}

func TestNewRequestForStepTests(t *testing.T) {
	res := resource()
	res.Annotations = map[string]string{names.OperationAnnotation: names.OperationReconcile}
	req, err := sdk.NewRequest[spec](res)
	if err != nil || req.Spec.Size != 2 || !req.Force {
		t.Fatalf("%+v %v", req, err)
	}
	s := &step{name: "x", calls: new([]string), condition: "Sized"}
	if _, err := s.Do(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	req.SetOutput("k", 1)
	if c, ok := req.Condition("Sized"); !ok || !c.IsTrue() || c.ObservedGeneration != 3 || req.Outputs()["k"] != 1 {
		t.Fatalf("conditions %+v outputs %v", req.Conditions(), req.Outputs())
	}
	res.Spec = json.RawMessage(`[]`)
	if _, err := sdk.NewRequest[spec](res); !sdk.IsTerminal(err) {
		t.Fatalf("err %v", err)
	}
}
