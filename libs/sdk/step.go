package sdk

import "context"

// Step is one piece of the work of reconciling a resource (okofw's Step).
// The engine runs, for an attempt:
//
//   - not deleting: Do of every step in order, stopping at the first that
//     returns an error or a non-zero Result;
//   - deleting: Cleanup (steps that implement Cleaner) in reverse order,
//     stopping likewise; the engine's finalizer goes once all succeeded;
//   - then, always, Post (steps that implement Poster) of every step in
//     order, even after a failure, right before the result is saved.
//
// Retry rules: a nil error and zero Result means done; a non-zero Result
// means not done yet, come back (no failure counted); an error fails the
// attempt and the scheduler retries it with exponential backoff; an error
// wrapped with Terminal fails it for good, until the spec changes or a
// manual trigger. A panic is recovered and counts as an error.
//
// Steps must honour ctx (the per-reconcile timeout cancels it), must be
// idempotent (any attempt may be repeated), and must do the work even when
// their "already done" check says otherwise if req.Force is set.
type Step[S any] interface {
	// Name identifies the step in logs and errors.
	Name() string
	// Do moves the world one step towards the spec.
	Do(ctx context.Context, req *Request[S]) (Result, error)
}

// Cleaner is a Step with work to undo on deletion.
type Cleaner[S any] interface {
	Cleanup(ctx context.Context, req *Request[S]) (Result, error)
}

// Poster is a Step with work to do after every attempt, successful or not,
// before the result is saved (for example computing a condition from what
// the other steps left in Scratch). An error fails the attempt.
type Poster[S any] interface {
	Post(ctx context.Context, req *Request[S]) error
}

// StepFuncs builds a Step from functions; nil functions do nothing.
type StepFuncs[S any] struct {
	StepName    string
	DoFunc      func(ctx context.Context, req *Request[S]) (Result, error)
	CleanupFunc func(ctx context.Context, req *Request[S]) (Result, error)
	PostFunc    func(ctx context.Context, req *Request[S]) error
}

// Name implements Step.
func (s StepFuncs[S]) Name() string { return s.StepName }

// Do implements Step.
func (s StepFuncs[S]) Do(ctx context.Context, req *Request[S]) (Result, error) {
	if s.DoFunc == nil {
		return Result{}, nil
	}
	return s.DoFunc(ctx, req)
}

// Cleanup implements Cleaner.
func (s StepFuncs[S]) Cleanup(ctx context.Context, req *Request[S]) (Result, error) {
	if s.CleanupFunc == nil {
		return Result{}, nil
	}
	return s.CleanupFunc(ctx, req)
}

// Post implements Poster.
func (s StepFuncs[S]) Post(ctx context.Context, req *Request[S]) error {
	if s.PostFunc == nil {
		return nil
	}
	return s.PostFunc(ctx, req)
}

// Func adapts one function into a single-step reconciler, as
// controller-runtime's reconcile.Func does: it is called for every attempt,
// as Do when the resource is live and as Cleanup when it is being deleted
// (check req.Deleting()).
//
//	engine := sdk.New("widgets", sdk.Func[WidgetSpec](func(ctx context.Context, req *sdk.Request[WidgetSpec]) (sdk.Result, error) {
//		...
//	}))
type Func[S any] func(ctx context.Context, req *Request[S]) (Result, error)

// Name implements Step.
func (f Func[S]) Name() string { return "reconcile" }

// Do implements Step.
func (f Func[S]) Do(ctx context.Context, req *Request[S]) (Result, error) { return f(ctx, req) }

// Cleanup implements Cleaner.
func (f Func[S]) Cleanup(ctx context.Context, req *Request[S]) (Result, error) { return f(ctx, req) }
