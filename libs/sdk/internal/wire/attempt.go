package wire

import (
	"context"
	"log/slog"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/secret"
)

// Reconciler is what the worker runtime runs for each work item, once it
// holds the resource's reconcile lease. The SDK's Engine implements it.
type Reconciler interface {
	// Name is the reconciler's registered name; its finalizer is
	// reconciler.no8s.io/<name>.
	Name() string
	// Reconcile runs one attempt on att.Resource and saves its outcome with
	// att.Client.Status() exactly once (unless the resource is ignored).
	Reconcile(ctx context.Context, att *Attempt) Report
}

// FinalizerOwner is a Reconciler that owns finalizers beyond its own
// reconciler.no8s.io/<name>: an Engine with action plugins owns theirs
// (github_actions). The worker declares them in its registration; admission
// then adds them to every new resource of the reconciler's types, and the
// store's worker door lets this reconciler, and no other, remove them.
type FinalizerOwner interface {
	OwnedFinalizers() []string
}

// TypeOwner is a Reconciler that declares the types it owns (an Engine's
// Owns, OwnsAnyType). The worker declares them in its registration; the
// scheduler then reconciles an owner when a resource of such a type whose
// controller owner reference names it is created, changes or goes.
type TypeOwner interface {
	OwnedTypes() (types []client.TypeRef, any bool)
}

// Attempt is the input of one reconcile.
type Attempt struct {
	// ID is the reconcile id that every log line of the attempt carries.
	ID string
	// Resource is the fresh resource, already marked reconciling.
	Resource *Resource
	// Reason is why it was dispatched.
	Reason string
	// LeaseEpoch is the epoch of the attempt's reconcile lease: it grows by
	// one with every attempt on the resource.
	LeaseEpoch int64
	// Client reads, writes finalizers and (Status) saves the outcome.
	Client Client
	// API is the control plane's REST API client the attempt's steps write
	// other resources with (Request.API); nil when the runtime has none.
	API *client.Client
	// Secrets resolves secret references (Local when nil).
	Secrets secret.Resolver
	// Log is the base logger (discarded when nil).
	Log *slog.Logger
	// StartStep, when set, is called as each step's Do, Cleanup or Post
	// begins (stage "do", "cleanup", "post"): the step runs with the
	// context it returns, and end is called with the step's error when it
	// returns. The worker runtime's step metrics and spans.
	StartStep func(ctx context.Context, step, stage string) (_ context.Context, end func(error))
	// StartAction, when set, is called likewise around each action plugin
	// call that RunAction makes (operation "apply" or "destroy"): the
	// worker runtime's action spans.
	StartAction func(ctx context.Context, plugin, operation string) (_ context.Context, end func(error))
}

// Report is how an attempt ended, for the runtime to map onto the broker.
type Report struct {
	Outcome lifecycle.Outcome
	// RequeueAfter is set for lifecycle.OutcomeRequeue.
	RequeueAfter time.Duration
	// Err is the error of a failed attempt (OutcomeError or
	// OutcomeTerminal).
	Err error
	// Skipped is true when the resource carries no8s.io/operation: ignore:
	// no step ran and nothing was saved.
	Skipped bool
	// Completion is what was saved (or was to be saved).
	Completion *Completion
	// Completed is the store's answer; nil when the save failed.
	Completed *Completed
	// SaveErr is the error of the save (ErrStaleEpoch when the lease was
	// lost to a newer attempt).
	SaveErr error
}

// Engine defaults.
const (
	// DefaultRequeueDelay is the delay of a plain requeue (sdk.Result{Requeue:
	// true}), and of an attempt that comes back at once (interrupted, store
	// unavailable).
	DefaultRequeueDelay = time.Second
	// DefaultNotReadyRequeue is how soon an attempt whose steps are all done
	// while some condition is not True comes back.
	DefaultNotReadyRequeue = 30 * time.Second
	// DefaultSaveTimeout bounds the final save (which runs even after the
	// attempt's context ended).
	DefaultSaveTimeout = 15 * time.Second
)
