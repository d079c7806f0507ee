package sdk

import (
	"errors"
	"fmt"
	"time"

	"github.com/no8s/no8s/libs/sdk/internal/wire"
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
	// Requeue asks for another attempt soon (after a second).
	Requeue bool
	// RequeueAfter asks for another attempt after this long (rounded up to
	// whole seconds). No failure is counted: the scheduler's backoff is for
	// errors.
	RequeueAfter time.Duration
}

// IsZero reports whether r means "done".
func (r Result) IsZero() bool { return !r.Requeue && r.RequeueAfter <= 0 }

// Delay is when to come back: RequeueAfter, or a second for a plain
// Requeue, or zero for done.
func (r Result) Delay() time.Duration {
	switch {
	case r.RequeueAfter > 0:
		return r.RequeueAfter
	case r.Requeue:
		return wire.DefaultRequeueDelay
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

// terminalError wraps an error that retrying cannot fix (a spec that cannot
// work, a permission that is missing). The attempt fails, and the scheduler
// does not retry it until the spec changes (a new generation) or a manual
// trigger (POST .../reconcile or the reconcile annotation).
type terminalError struct{ Err error }

func (e *terminalError) Error() string { return "terminal: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *terminalError) Unwrap() error { return e.Err }

// Terminal wraps err as an error that retrying cannot fix (a spec that
// cannot work, a permission that is missing): the attempt fails, and the
// scheduler does not retry it until the spec changes (a new generation) or
// a manual trigger (POST .../reconcile or the reconcile annotation). A nil
// err becomes a generic one. errors.Is and errors.As see err through it.
func Terminal(err error) error {
	if err == nil {
		err = errors.New("terminal error")
	}
	return &terminalError{Err: err}
}

// Terminalf is Terminal of a formatted error.
func Terminalf(format string, args ...any) error { return Terminal(fmt.Errorf(format, args...)) }

// IsTerminal reports whether err is or wraps an error made by Terminal.
func IsTerminal(err error) bool {
	var te *terminalError
	return errors.As(err, &te)
}

// degradedError wraps the error of a partial failure while the resource
// still serves (some replicas or some relays work, others not).
// The attempt fails and is retried with backoff like any error (or not,
// when it is also Terminal), Ready is False with reason Degraded, and the
// phase is Degraded instead of Progressing until the next attempt ends.
type degradedError struct{ Err error }

func (e *degradedError) Error() string { return "degraded: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *degradedError) Unwrap() error { return e.Err }

// Degraded wraps the error of a partial failure while the resource still
// serves (some replicas or some relays work, others not): the attempt fails
// and is retried with backoff like any error (or not, when it is also
// Terminal), Ready is False with reason Degraded, and the phase is Degraded
// instead of Progressing until the next attempt ends. A nil err becomes a
// generic one.
func Degraded(err error) error {
	if err == nil {
		err = errors.New("partial failure")
	}
	return &degradedError{Err: err}
}

// Degradedf is Degraded of a formatted error.
func Degradedf(format string, args ...any) error { return Degraded(fmt.Errorf(format, args...)) }

// IsDegraded reports whether err is or wraps an error made by Degraded.
func IsDegraded(err error) bool {
	var de *degradedError
	return errors.As(err, &de)
}

// panicError is a panic in a step, recovered by the engine. It is an
// ordinary (retried) error.
type panicError struct {
	Step  string
	Value any
	Stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("step %s panicked: %v", e.Step, e.Value) }
