package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/sdk/action"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// Engine runs Steps on a resource (okofw's reconcile request handler): it
// decodes the spec, ensures its finalizer before the first Do, runs Do or
// Cleanup and always Post, keeps conditions, derives Ready and the phase,
// and saves status, conditions, outputs, finalizer and annotation changes
// and one history row in one call at the end.
type Engine[S any] struct {
	name            string
	steps           []Step[S]
	initConditions  []string
	notReadyRequeue time.Duration
	saveTimeout     time.Duration
	now             func() time.Time
	actions         *action.Registry
	owns            []TypeRef
	ownsAny         bool
	watches         []watch[S]
}

// New returns an engine called name (the reconciler's registered name)
// running steps in order.
func New[S any](name string, steps ...Step[S]) *Engine[S] {
	return &Engine[S]{
		name: name, steps: slices.Clone(steps),
		notReadyRequeue: wire.DefaultNotReadyRequeue, saveTimeout: wire.DefaultSaveTimeout, now: time.Now,
	}
}

// WithConditions declares condition types that every attempt initializes
// to Unknown when missing, so that Ready is False until a step sets each.
func (e *Engine[S]) WithConditions(types ...string) *Engine[S] {
	e.initConditions = append(e.initConditions, types...)
	return e
}

// WithNotReadyRequeue sets how soon an attempt comes back when every step
// is done but some condition is not True (default 30 seconds).
func (e *Engine[S]) WithNotReadyRequeue(d time.Duration) *Engine[S] {
	if d > 0 {
		e.notReadyRequeue = d
	}
	return e
}

// WithSaveTimeout bounds the final save, which runs even after the
// attempt's context ended (default 15 seconds).
func (e *Engine[S]) WithSaveTimeout(d time.Duration) *Engine[S] {
	if d > 0 {
		e.saveTimeout = d
	}
	return e
}

// WithClock replaces time.Now (for tests).
func (e *Engine[S]) WithClock(now func() time.Time) *Engine[S] {
	if now != nil {
		e.now = now
	}
	return e
}

// WithActions gives the steps the action plugins of reg (Request.Action,
// Request.RunAction). Their names are finalizers the reconciler owns
// (OwnedFinalizers): resources of its types carry them from creation.
func (e *Engine[S]) WithActions(reg *action.Registry) *Engine[S] {
	e.actions = reg
	return e
}

// Owns declares types the reconciler owns: when a resource of one of them
// whose controller owner reference names a resource of the reconciler's
// types is created, changes (spec, status, deletion) or goes, the scheduler
// reconciles that owner, as controller-runtime's Owns does. Changes
// coalesce: one pending reconcile per owner however many children
// changed. The reconciler need not poll for its children's readiness.
func (e *Engine[S]) Owns(types ...TypeRef) *Engine[S] {
	for _, t := range types {
		if !slices.Contains(e.owns, t) {
			e.owns = append(e.owns, t)
		}
	}
	return e
}

// OwnsAnyType is Owns for every type: for a reconciler whose children's
// types are data (a template's), not code.
func (e *Engine[S]) OwnsAnyType() *Engine[S] {
	e.ownsAny = true
	return e
}

// OwnedTypes are the types declared by Owns, and whether OwnsAnyType was
// (the worker declares them when it registers).
func (e *Engine[S]) OwnedTypes() (types []TypeRef, any bool) { return slices.Clone(e.owns), e.ownsAny }

// OwnedFinalizers are the finalizers the reconciler owns beyond its own
// (the worker declares them when it registers): the names of the engine's
// action plugins.
func (e *Engine[S]) OwnedFinalizers() []string { return e.actions.Names() }

// Name is the reconciler's registered name.
func (e *Engine[S]) Name() string { return e.name }

// Finalizer is the engine's own finalizer, reconciler.no8s.io/<name>.
func (e *Engine[S]) Finalizer() string { return names.ReconcilerFinalizer(e.name) }

// Reconcile runs one attempt: the worker runtime calls it once per work
// item, holding the resource's reconcile lease (it implements the runtime's
// Reconciler). Test a reconciler with the test kit, and single steps on a
// Request from NewRequest.
func (e *Engine[S]) Reconcile(ctx context.Context, att *wire.Attempt) wire.Report {
	start := e.now()
	res := att.Resource
	log := att.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("reconcile_id", att.ID, "resource_id", res.ID, "type", res.Type.String(), "namespace", res.Namespace, "name", res.Name, "generation", res.Generation)

	if res.Operation() == names.OperationIgnore {
		log.Info("skipping resource: " + names.OperationAnnotation + ": " + names.OperationIgnore)
		return wire.Report{Skipped: true, Err: wire.ErrIgnored}
	}

	var rw Client
	if att.Client != nil {
		rw = att.Client
	}
	req := newRequest[S](res, e.now)
	req.ID, req.Reason, req.LeaseEpoch, req.Log, req.Client, req.secrets = att.ID, att.Reason, att.LeaseEpoch, log, rw, att.Secrets
	req.actions, req.api = e.actions, att.API
	req.startStep, req.startAction = att.StartStep, att.StartAction
	req.conds = conditions.Initialize(req.conds, res.Generation, start, e.initConditions...)
	deleting := res.Deleting()
	fin := e.Finalizer()
	comp := &wire.Completion{ResourceID: res.ID, Generation: res.Generation, StartedAt: start}
	if req.Force {
		comp.RemoveAnnotations = []string{names.OperationAnnotation}
		log.Info("forced reconcile (" + names.OperationAnnotation + ": " + names.OperationReconcile + ")")
	}

	var result Result
	var err error
	if derr := res.DecodeSpec(&req.Spec); derr != nil {
		err = Terminal(derr)
	}
	switch {
	case err != nil:
	case deleting:
		if res.HasFinalizer(fin) || req.Force {
			result, err = e.cleanup(ctx, req)
			if err == nil && result.IsZero() && res.HasFinalizer(fin) {
				comp.RemoveFinalizers = []string{fin}
			}
		}
	default:
		if !res.HasFinalizer(fin) {
			err = e.ensureFinalizer(ctx, req, fin)
			comp.AddFinalizers = []string{fin}
		}
		if err == nil {
			result, err = e.do(ctx, req)
		}
	}
	if err != nil && ctx.Err() != nil {
		// Say why the context ended (timeout, interruption, lost lease).
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
	}
	if perr := e.post(ctx, req); perr != nil {
		if err == nil {
			err = perr
		} else {
			err = errors.Join(err, perr)
		}
	}

	rep := e.conclude(req, comp, deleting, result, err)
	comp.RemoveFinalizers = append(comp.RemoveFinalizers, req.removeFinalizers...)
	comp.Changes = req.Changes
	comp.Events = req.Events()
	comp.Dependencies = e.dependencies(req, log, err)
	if req.outputsChanged {
		if b, merr := json.Marshal(req.outputs); merr == nil {
			comp.Outputs = b
		} else {
			log.Error("outputs are not JSON; not saved", "error", merr)
		}
	}
	comp.Duration = e.now().Sub(start)
	rep.Completion = comp

	logAttempt(log, rep)
	if att.Client == nil {
		rep.SaveErr = wire.ErrNoClient
		return rep
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.saveTimeout)
	defer cancel()
	rep.Completed, rep.SaveErr = att.Client.Status().Complete(sctx, comp)
	if rep.SaveErr != nil {
		log.Warn("saving the result failed", "error", rep.SaveErr)
	}
	return rep
}

// conclude decides the outcome, Ready and the phase.
func (e *Engine[S]) conclude(req *Request[S], comp *wire.Completion, deleting bool, result Result, err error) wire.Report {
	gen := req.Resource.Generation
	now := e.now()
	rep := wire.Report{Err: err}
	var ready conditions.Condition
	switch {
	case err != nil && errors.Is(err, wire.ErrInterrupted):
		// The worker is stopping: not a failure, come back at once.
		rep.Outcome, rep.RequeueAfter = lifecycle.OutcomeRequeue, wire.DefaultRequeueDelay
		ready = conditions.Condition{Type: conditions.Ready, Status: conditions.False, Reason: conditions.ReasonInterrupted, Message: err.Error()}
	case err != nil && errors.Is(err, wire.ErrUnavailable) && !IsTerminal(err):
		// The store (its database) was unreachable: not the resource's
		// failure; come back once the store answers again.
		rep.Outcome, rep.RequeueAfter = lifecycle.OutcomeRequeue, wire.DefaultRequeueDelay
		ready = conditions.Condition{Type: conditions.Ready, Status: conditions.False, Reason: conditions.ReasonStoreUnavailable, Message: err.Error()}
	case err != nil && IsTerminal(err):
		rep.Outcome = lifecycle.OutcomeTerminal
		ready = conditions.Condition{Type: conditions.Ready, Status: conditions.False, Reason: conditions.ReasonTerminalError, Message: err.Error()}
		if we := waitOf(err); we != nil {
			ready.Reason = we.reason
		}
	case err != nil:
		rep.Outcome = lifecycle.OutcomeError
		ready = conditions.Condition{Type: conditions.Ready, Status: conditions.False, Reason: conditions.ReasonReconcileError, Message: err.Error()}
		if IsDegraded(err) {
			ready.Reason = conditions.ReasonDegraded
		}
	case !result.IsZero():
		rep.Outcome, rep.RequeueAfter = lifecycle.OutcomeRequeue, result.Delay()
		ready = conditions.DeriveReady(req.conds, gen)
		if ready.IsTrue() {
			ready = conditions.Condition{Type: conditions.Ready, Status: conditions.False, Reason: conditions.ReasonRequeued,
				Message: fmt.Sprintf("not done yet; next attempt in %s", rep.RequeueAfter)}
		}
	case deleting:
		rep.Outcome = lifecycle.OutcomeSuccess
		ready = conditions.Condition{Type: conditions.Ready, Status: conditions.False, Reason: conditions.ReasonDeleting, Message: "the resource is being deleted"}
	default:
		ready = conditions.DeriveReady(req.conds, gen)
		rep.Outcome = lifecycle.OutcomeSuccess
		if !ready.IsTrue() {
			// Every step is done but the conditions say "not yet": the
			// lifecycle status must not say ready while the phase says
			// Progressing, so this is a requeue.
			rep.Outcome, rep.RequeueAfter = lifecycle.OutcomeRequeue, e.notReadyRequeue
		}
	}
	ready.ObservedGeneration = gen
	req.conds = conditions.Normalize(conditions.Set(req.conds, ready, now))

	comp.Outcome, comp.RequeueAfter = rep.Outcome, rep.RequeueAfter
	comp.Conditions = req.Conditions()
	// Every attempt that ran to an end observed its generation, failed or
	// not; the failure is in the conditions.
	comp.Observed = rep.Outcome != lifecycle.OutcomeRequeue
	comp.Degraded = err != nil && IsDegraded(err) && !deleting && rep.Outcome != lifecycle.OutcomeRequeue
	comp.Phase = conditions.PhaseOf(conditions.PhaseFacts{
		Deleting: deleting, Degraded: comp.Degraded, Succeeded: rep.Outcome == lifecycle.OutcomeSuccess, Statuses: conditions.Statuses(req.conds),
	})
	if err != nil {
		comp.Error = err.Error()
	}
	switch rep.Outcome {
	case lifecycle.OutcomeSuccess:
		comp.Message = "reconciled"
		if deleting {
			comp.Message = "cleanup finished"
		}
	case lifecycle.OutcomeRequeue:
		comp.Message = ready.Message
	default:
		comp.Message = comp.Error
	}
	return rep
}

func (e *Engine[S]) ensureFinalizer(ctx context.Context, req *Request[S], fin string) error {
	if req.Client == nil {
		return fmt.Errorf("add finalizer %s: %w", fin, wire.ErrNoClient)
	}
	if _, err := req.Client.UpdateFinalizers(ctx, req.Resource.ID, []string{fin}, nil); err != nil {
		return fmt.Errorf("add finalizer %s before the first step: %w", fin, err)
	}
	req.Log.Info("finalizer added", "finalizer", fin)
	return nil
}

// do runs Do of every step in order until one is not done.
func (e *Engine[S]) do(ctx context.Context, req *Request[S]) (Result, error) {
	for _, s := range e.steps {
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("before step %s: %w", s.Name(), ctxErr(ctx))
		}
		res, err := req.guard(ctx, s.Name(), "do", func(ctx context.Context) (Result, error) { return s.Do(ctx, req) })
		if err != nil {
			return res, stepError(s.Name(), err)
		}
		if !res.IsZero() {
			req.Log.Debug("step not done yet", "step", s.Name(), "requeue_after", res.Delay())
			return res, nil
		}
	}
	return Result{}, nil
}

// cleanup runs Cleanup of the steps in reverse order until one is not done.
func (e *Engine[S]) cleanup(ctx context.Context, req *Request[S]) (Result, error) {
	for _, s := range slices.Backward(e.steps) {
		c, ok := s.(Cleaner[S])
		if !ok {
			continue
		}
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("before cleanup of step %s: %w", s.Name(), ctxErr(ctx))
		}
		res, err := req.guard(ctx, s.Name(), "cleanup", func(ctx context.Context) (Result, error) { return c.Cleanup(ctx, req) })
		if err != nil {
			return res, fmt.Errorf("cleanup: %w", stepError(s.Name(), err))
		}
		if !res.IsZero() {
			return res, nil
		}
	}
	return Result{}, nil
}

// post runs Post of every step, whatever happened before.
func (e *Engine[S]) post(ctx context.Context, req *Request[S]) error {
	var errs []error
	for _, s := range e.steps {
		p, ok := s.(Poster[S])
		if !ok {
			continue
		}
		_, err := req.guard(ctx, s.Name(), "post", func(ctx context.Context) (Result, error) { return Result{}, p.Post(ctx, req) })
		if err != nil {
			errs = append(errs, fmt.Errorf("post: %w", stepError(s.Name(), err)))
		}
	}
	return errors.Join(errs...)
}

func stepError(name string, err error) error { return fmt.Errorf("step %s: %w", name, err) }

// guard runs step's f (guard), within the attempt's StartStep when set.
func (r *Request[S]) guard(ctx context.Context, step, stage string, f func(context.Context) (Result, error)) (Result, error) {
	if r.startStep == nil {
		return guard(r.Log, step, func() (Result, error) { return f(ctx) })
	}
	ctx, end := r.startStep(ctx, step, stage)
	res, err := guard(r.Log, step, func() (Result, error) { return f(ctx) })
	end(err)
	return res, err
}

// guard runs f, turning a panic into a *panicError.
func guard(log *slog.Logger, step string, f func() (Result, error)) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			log.Error("step panicked", "step", step, "panic", fmt.Sprint(v), "stack", string(stack))
			res, err = Result{}, &panicError{Step: step, Value: v, Stack: stack}
		}
	}()
	return f()
}

func logAttempt(log *slog.Logger, rep wire.Report) {
	c := rep.Completion
	attrs := []any{"outcome", rep.Outcome.String(), "phase", c.Phase, "duration", c.Duration}
	switch rep.Outcome {
	case lifecycle.OutcomeSuccess:
		// Debug: one line per successful attempt is the worker's busiest
		// log; failures and requeues stay visible.
		log.Debug("reconciled", attrs...)
	case lifecycle.OutcomeRequeue:
		log.Info("requeued", append(attrs, "requeue_after", rep.RequeueAfter, "message", c.Message)...)
	default:
		log.Warn("reconcile failed", append(attrs, "error", rep.Err)...)
	}
}

// ctxErr is why ctx ended: its cause (for instance the reconcile timeout's
// message) that still matches context.Canceled or DeadlineExceeded with
// errors.Is.
func ctxErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || errors.Is(cause, err) {
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}
