package wire

import (
	"context"
	"encoding/json"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk/conditions"
)

// Reader reads resources. A step that only reads takes a Reader.
type Reader interface {
	// Get returns the resource with the given id (ErrNotFound when absent).
	Get(ctx context.Context, id int64) (*Resource, error)
	// GetByName returns the resource called name of type t in namespace
	// ("": the default namespace). A reconciler reads its resource's
	// siblings in req.Namespace().
	GetByName(ctx context.Context, t client.TypeRef, namespace, name string) (*Resource, error)
	// List returns one page of resources.
	List(ctx context.Context, opts ListOptions) (*ResourceList, error)
}

// ListOptions filters and pages List.
type ListOptions struct {
	// Namespace restricts the list to one namespace ("": every namespace).
	Namespace string
	// Type restricts the list to one type (Version optional).
	Type client.TypeRef
	// Status restricts it to one lifecycle status.
	Status string
	// LabelSelector uses the Kubernetes syntax: a=b,c!=d,e,!f,g in (x,y).
	LabelSelector string
	// Limit bounds the page (the store's default when zero).
	Limit int
	// Continue is the token of the previous page.
	Continue string
}

// ResourceList is one page.
type ResourceList struct {
	Items []*Resource
	// Continue is empty on the last page.
	Continue string
	// ResourceVersion is the revision the first page was read at.
	ResourceVersion int64
}

// Writer is what a reconciler writes beside the status the engine saves:
// its own finalizers on the resource it reconciles. Workers reach the store
// through a narrow door (WorkerService) that takes nothing else. Other
// resources, child resources for one, are created and changed through the
// public API, as a client does, so that admission applies.
type Writer interface {
	// UpdateFinalizers adds and removes finalizers of the resource under
	// reconcile. Only the reconciler's own finalizers (reconciler.no8s.io/<name>,
	// and those it declared: FinalizerOwner) are accepted, and only under the
	// attempt's lease; anything else is refused (a gRPC PermissionDenied,
	// reason not_owned). Removing the
	// last finalizer of a deleting resource purges it.
	UpdateFinalizers(ctx context.Context, id int64, add, remove []string) (*Resource, error)
}

// ReadWriter is what a step gets: reads and non-status writes. The status of
// the resource being reconciled belongs to the engine, which saves it once.
type ReadWriter interface {
	Reader
	Writer
}

// StatusWriter saves the outcome of an attempt. The worker runtime's
// implementation presents the reconcile lease's epoch, so that a stalled
// attempt whose lease was taken over cannot overwrite a newer result
// (ErrStaleEpoch).
type StatusWriter interface {
	Complete(ctx context.Context, c *Completion) (*Completed, error)
}

// Client combines them, as controller-runtime's client does.
type Client interface {
	Reader
	Writer
	Status() StatusWriter
}

// Changes counts what an attempt did to the world outside the control
// plane; it goes into the history row.
type Changes struct {
	Created, Updated, Deleted int
}

// Completion is everything one attempt saves, in one store call.
type Completion struct {
	ResourceID int64
	// Generation is the generation the attempt reconciled; it becomes
	// observed_generation on success, and when Observed is set.
	Generation int64
	// Observed makes Generation the observed_generation whatever the
	// outcome. The engine sets it on every attempt that ran to
	// an end (success, error, terminal), not on a requeue.
	Observed bool
	// Degraded reports a partial failure while the resource still serves
	// (an sdk.Degraded error): the phase becomes Degraded.
	Degraded bool
	Outcome  lifecycle.Outcome
	// RequeueAfter is set for lifecycle.OutcomeRequeue.
	RequeueAfter time.Duration
	// Message is the status message.
	Message string
	// Error is the error text of a failed attempt.
	Error string
	// Phase is the phase the store will derive from this completion with the
	// same rule (lifecycle.PhaseOf in libs/api): Terminating, Degraded, Ready or
	// Progressing. It is not sent; the store computes it.
	Phase string
	// Conditions is the full list (Ready included).
	Conditions []conditions.Condition
	// Outputs replaces the outputs when non-nil (a JSON object).
	Outputs json.RawMessage
	// AddFinalizers, RemoveFinalizers and RemoveAnnotations change the
	// resource's metadata together with the status.
	AddFinalizers     []string
	RemoveFinalizers  []string
	RemoveAnnotations []string
	Changes           Changes
	// Events are recorded on the resource with the result (Request.Event).
	Events []Event
	// Dependencies are the resources the attempt depends on beyond its
	// children (Engine.Watches, Request.WaitFor), at most MaxDependencies;
	// they replace the last attempt's.
	Dependencies []Dependency
	StartedAt    time.Time
	Duration     time.Duration
}

// MaxDependencies bounds the dependencies one attempt reports.
const MaxDependencies = 64

// Dependency names a resource an attempt depends on (it need not exist):
// the scheduler reconciles the resource again when that one is created,
// changes or goes.
type Dependency struct {
	Type      client.TypeRef
	Namespace string
	Name      string
	// Wait: the attempt ended waiting for it (Request.WaitFor).
	Wait bool
}

// MaxEvents bounds the events one attempt records.
const MaxEvents = 32

// Event is an Event (the Kubernetes kind) an attempt records on its
// resource.
type Event struct {
	// Type is names.EventNormal or names.EventWarning.
	Type    string
	Reason  string
	Message string
}

// Completed is what the store answered.
type Completed struct {
	// Resource is the saved resource; nil when purged.
	Resource *Resource
	// Purged is true when the last finalizer of a deleting resource went
	// and the row is gone.
	Purged bool
}
