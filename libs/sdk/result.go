package sdk

import (
	"errors"
	"fmt"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
)

// Result says when to come back; together with the error a step returns it
// decides how the attempt ends:
//
//	return sdk.Result{}, nil                 // done: go on with the next step
//	return sdk.RequeueAfter(30*time.Second), nil // not done yet: come back later
//	return sdk.Result{}, err                 // failed: retried with backoff
//	return sdk.Result{}, sdk.Terminal(err)   // failed: not retried until the
//	                                          // spec changes or a manual trigger
//	return sdk.Result{}, sdk.Degraded(err)   // failed partially, still serving:
//	                                          // retried with backoff, phase Degraded
//
// A non-zero Result or an error ends the Do (or Cleanup) phase: later steps
// do not run in this attempt, their Post still does. When both are
// returned, the error wins.
type Result struct {
	// Requeue asks for another attempt soon (after DefaultRequeueDelay).
	Requeue bool
	// RequeueAfter asks for another attempt after this long (rounded up to
	// whole seconds). No failure is counted: the scheduler's backoff is for
	// errors.
	RequeueAfter time.Duration
}

// DefaultRequeueDelay is the delay of Result{Requeue: true}.
const DefaultRequeueDelay = time.Second

// IsZero reports whether r means "done".
func (r Result) IsZero() bool { return !r.Requeue && r.RequeueAfter <= 0 }

// Delay is when to come back: RequeueAfter, or DefaultRequeueDelay for a
// plain Requeue, or zero for done.
func (r Result) Delay() time.Duration {
	switch {
	case r.RequeueAfter > 0:
		return r.RequeueAfter
	case r.Requeue:
		return DefaultRequeueDelay
	}
	return 0
}

// RequeueAfter returns a Result that asks for another attempt after d.
func RequeueAfter(d time.Duration) Result {
	if d <= 0 {
		return Result{Requeue: true}
	}
	return Result{RequeueAfter: d}
}

// TerminalError wraps an error that retrying cannot fix (a spec that cannot
// work, a permission that is missing). The attempt fails, and the scheduler
// does not retry it until the spec changes (a new generation) or a manual
// trigger (POST .../reconcile or the reconcile annotation).
type TerminalError struct{ Err error }

func (e *TerminalError) Error() string { return "terminal: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *TerminalError) Unwrap() error { return e.Err }

// Terminal wraps err as a TerminalError (nil becomes a generic one).
func Terminal(err error) error {
	if err == nil {
		err = errors.New("terminal error")
	}
	return &TerminalError{Err: err}
}

// Terminalf formats a TerminalError.
func Terminalf(format string, args ...any) error { return Terminal(fmt.Errorf(format, args...)) }

// IsTerminal reports whether err is or wraps a TerminalError.
func IsTerminal(err error) bool {
	var te *TerminalError
	return errors.As(err, &te)
}

// DegradedError wraps the error of a partial failure while the resource
// still serves (some replicas or some relays work, others not).
// The attempt fails and is retried with backoff like any error (or not,
// when it is also Terminal), Ready is False with reason Degraded, and the
// phase is Degraded instead of Progressing until the next attempt ends.
type DegradedError struct{ Err error }

func (e *DegradedError) Error() string { return "degraded: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *DegradedError) Unwrap() error { return e.Err }

// Degraded wraps err as a DegradedError (nil becomes a generic one).
func Degraded(err error) error {
	if err == nil {
		err = errors.New("partial failure")
	}
	return &DegradedError{Err: err}
}

// Degradedf formats a DegradedError.
func Degradedf(format string, args ...any) error { return Degraded(fmt.Errorf(format, args...)) }

// IsDegraded reports whether err is or wraps a DegradedError.
func IsDegraded(err error) bool {
	var de *DegradedError
	return errors.As(err, &de)
}

// PanicError is a panic in a step, recovered by the engine. It is an
// ordinary (retried) error.
type PanicError struct {
	Step  string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("step %s panicked: %v", e.Step, e.Value) }

// Outcome is how an attempt ended: libs/api's lifecycle.Outcome, which maps
// onto no8s.reconcile.v1.Outcome by name.
type Outcome = lifecycle.Outcome

// Outcomes.
const (
	OutcomeUnspecified = lifecycle.OutcomeUnspecified
	// OutcomeSuccess: every step done; the resource is ready (or, when
	// deleting, its cleanup finished).
	OutcomeSuccess = lifecycle.OutcomeSuccess
	// OutcomeRequeue: not done yet, come back after Report.RequeueAfter;
	// no failure counted.
	OutcomeRequeue = lifecycle.OutcomeRequeue
	// OutcomeError: failed; the scheduler retries with exponential backoff.
	OutcomeError = lifecycle.OutcomeError
	// OutcomeTerminal: failed; not retried until the spec changes or a
	// manual trigger.
	OutcomeTerminal = lifecycle.OutcomeTerminal
)
