package wire

import "errors"

// Sentinel errors, matchable with errors.Is. The store clients (package
// client) wrap the store's refusals in errors that match these.
var (
	// ErrNotFound: the resource does not exist (or was purged).
	ErrNotFound = errors.New("no8s: not found")
	// ErrConflict: a precondition such as an expected resource version failed.
	ErrConflict = errors.New("no8s: conflict")
	// ErrUnavailable: the store could not be reached; retrying may help.
	ErrUnavailable = errors.New("no8s: store unavailable")
	// ErrLeaseHeld: another worker holds the resource's reconcile lease.
	ErrLeaseHeld = errors.New("no8s: reconcile lease held by another worker")
	// ErrStaleEpoch: the lease epoch presented is no longer current; a newer
	// attempt owns the resource and this attempt's writes are refused.
	ErrStaleEpoch = errors.New("no8s: stale lease epoch")
	// ErrStaleDispatch: the work item was dispatched by a deposed scheduler.
	ErrStaleDispatch = errors.New("no8s: stale dispatch")
	// ErrIgnored: the resource carries no8s.io/operation: ignore.
	ErrIgnored = errors.New("no8s: resource is ignored")
	// ErrNoClient: the attempt has no client to save its result with.
	ErrNoClient = errors.New("no8s: attempt has no client")
)

// ErrInterrupted is the cause with which the worker runtime cancels an
// attempt it has to stop (shutdown after the grace period). An attempt
// interrupted this way ends as a requeue, not as a failure.
var ErrInterrupted = errors.New("no8s: attempt interrupted: worker shutting down")
