// Package storage is the store's contract: the Store interface every
// backend implements (PostgreSQL in services/store/pgstore, the embedded
// backend beside it), the EventLog the outbox relay reads through, their
// request and result types, their typed errors, and every rule that does
// not depend on the database: validation, the outcome→status policy of a
// completion, lease and leadership decisions, continue tokens, the stored
// form of a reconcile policy, the webhook set's version, the rendering of
// documents and events. A backend is SQL (or its own storage) and scanning,
// calling into this package for everything else; the conformance suite in
// storetest checks that it keeps the contract.
//
// The files, by concern:
//
//   - store.go, eventlog.go: the interfaces, the options every backend
//     takes, the bundle an opened backend is;
//   - errors.go: the store's errors;
//   - events.go, document.go: an event and a document from a resource;
//   - resources.go, list.go: resources and lists;
//   - namespaces.go: namespaces and the end of their deletion;
//   - types.go, webhooks.go: resource types and admission webhooks;
//   - tokens.go: API tokens;
//   - leases.go, completion.go, reconcilestate.go: the store's side of
//     reconciliation.
package storage

import (
	"context"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// Store is the store's domain operations. Every write of a resource takes a
// new revision (its resource_version, strictly increasing across every
// write) and records exactly one event per change in the outbox, in the
// same transaction; errors are *Error values wrapping this package's
// sentinels. A write whose context carries a Fence (WithFence) commits only
// while the fence holds (CheckFence), checked in its own transaction:
// otherwise ErrStaleEpoch and nothing is written.
type Store interface {
	// CreateResource stores a new resource and its CREATED event.
	CreateResource(ctx context.Context, req CreateResourceRequest) (*resource.Resource, error)
	// GetResource returns a resource.
	GetResource(ctx context.Context, key ResourceKey) (*resource.Resource, error)
	// UpdateResource applies an update, bumping generation when the spec
	// changes. An update that changes nothing writes nothing and returns
	// the resource.
	UpdateResource(ctx context.Context, req UpdateResourceRequest) (*resource.Resource, error)
	// DeleteResource requests deletion: the resource becomes deleting
	// (DELETED event), carrying the finalizer of the request's propagation
	// policy (MarkDeleting), and, when it has no finalizers, is removed at
	// once (PURGED event). Deleting a resource that is already deleting
	// changes nothing, whatever the policy.
	DeleteResource(ctx context.Context, req DeleteResourceRequest) (*DeleteResult, error)
	// UpdateFinalizers adds and removes finalizers. While a resource is
	// deleting, finalizers may be removed but not added; removing the last
	// one purges it.
	UpdateFinalizers(ctx context.Context, req UpdateFinalizersRequest) (*DeleteResult, error)
	// ListResources lists resources by ascending id. The first page is read
	// in one snapshot together with the relay's published revision, which
	// becomes ResourceVersion; later pages read current data after the last
	// id of the previous page.
	ListResources(ctx context.Context, req ListResourcesRequest) (*ListResourcesResult, error)

	// CreateNamespace creates an active namespace (ErrNameTaken when it
	// exists, ErrNamespaceTerminating while it is being deleted).
	CreateNamespace(ctx context.Context, name string, dryRun bool) (*resource.Namespace, error)
	// GetNamespace returns a namespace (ErrNotFound when absent).
	GetNamespace(ctx context.Context, name string) (*resource.Namespace, error)
	// ListNamespaces lists every namespace by name, the terminating ones
	// included.
	ListNamespaces(ctx context.Context) ([]*resource.Namespace, error)
	// DeleteNamespace requests a namespace's deletion: it becomes
	// terminating, so that nothing new is created in it (creates wait for
	// the ones in flight), and FinalizeNamespace runs at once. The default
	// namespace is refused (ErrNamespaceProtected). Deleting a terminating
	// namespace only runs FinalizeNamespace again.
	DeleteNamespace(ctx context.Context, name string, dryRun bool) (*DeleteNamespaceResult, error)
	// FinalizeNamespace advances the deletion of a terminating namespace
	// (storage.FinalizeNamespace): deletes its resources that are not
	// deleting yet and removes it when none is left. On an active
	// namespace it changes nothing.
	FinalizeNamespace(ctx context.Context, name string) (*DeleteNamespaceResult, error)

	// CreateType registers a resource type.
	CreateType(ctx context.Context, req CreateTypeRequest) (*resource.Type, error)
	// GetType returns a resource type.
	GetType(ctx context.Context, key TypeKey) (*resource.Type, error)
	// ListTypes lists resource types, optionally of one name, by name and
	// version.
	ListTypes(ctx context.Context, name string) ([]*resource.Type, error)
	// UpdateType changes a resource type.
	UpdateType(ctx context.Context, req UpdateTypeRequest) (*resource.Type, error)
	// DeleteType removes a resource type that no resource uses.
	DeleteType(ctx context.Context, id int64, dryRun bool) error

	// CreateWebhook registers an admission webhook.
	CreateWebhook(ctx context.Context, w webhookconf.Webhook, dryRun bool) (*webhookconf.Webhook, error)
	// GetWebhook returns one webhook.
	GetWebhook(ctx context.Context, id int64) (*webhookconf.Webhook, error)
	// ListWebhooks lists every webhook unless the set's version is unless:
	// then it answers NotModified.
	ListWebhooks(ctx context.Context, unless string) (*ListWebhooksResult, error)
	// UpdateWebhook replaces every registration field of webhook w.ID. A
	// non-zero expected must equal the current resource_version.
	UpdateWebhook(ctx context.Context, w webhookconf.Webhook, expected int64, dryRun bool) (*webhookconf.Webhook, error)
	// DeleteWebhook removes a webhook.
	DeleteWebhook(ctx context.Context, id int64, dryRun bool) error

	// CreateToken stores a new API token (CheckToken's rules) and returns
	// it without its hash, CreatedAt set by the store. ErrNameTaken when its
	// owner has a token of that name that is not revoked (a revoked
	// token's name may be used again). It takes no revision and writes no
	// event: tokens are not resources.
	CreateToken(ctx context.Context, t Token) (*Token, error)
	// ListTokens lists API tokens, of owner when set, oldest first, never
	// with their hash; revoked and expired ones only with includeInactive.
	ListTokens(ctx context.Context, owner string, includeInactive bool) ([]*Token, error)
	// RevokeToken sets a token's RevokedAt and returns it without its hash.
	// Revoking a revoked token changes nothing and returns it as it is.
	// ErrNotFound when no token has that id or, with owner set, none of
	// owner's.
	RevokeToken(ctx context.Context, id, owner string) (*Token, error)
	// LookupToken returns a token with its hash, revoked and expired ones
	// included (the caller checks both). ErrNotFound when no token has that
	// id.
	LookupToken(ctx context.Context, id string) (*Token, error)

	// AcquireLease grants the reconcile lease of a resource (Acquire's
	// rules), consuming a pending manual trigger and requeue.
	AcquireLease(ctx context.Context, req AcquireLeaseRequest) (*Lease, error)
	// RenewLease extends a held lease and returns its new expiry. It is
	// refused with ErrStaleEpoch once the lease was released or another
	// holder took a newer epoch.
	RenewLease(ctx context.Context, resourceID, epoch int64, d time.Duration) (time.Time, error)
	// CompleteReconcile saves the outcome of one attempt in one transaction
	// (Complete's rules), adds a history row (the oldest pruned beyond the
	// history limit) and releases the lease.
	CompleteReconcile(ctx context.Context, req CompleteReconcileRequest) (*CompleteResult, error)
	// ListHistory returns a resource's reconciliation history, newest first.
	ListHistory(ctx context.Context, req ListHistoryRequest) ([]HistoryEntry, error)

	// BecomeScheduler takes or renews the scheduler leadership lease
	// (Campaign's rules; d 0: DefaultSchedulerLease).
	BecomeScheduler(ctx context.Context, holder string, d time.Duration, epoch int64) (*SchedulerLease, error)
	// ReleaseScheduler gives up the scheduler lease of the given epoch: it
	// expires at once. Releasing an epoch that is no longer current does
	// nothing.
	ReleaseScheduler(ctx context.Context, holder string, epoch int64) error
	// RecordDispatches records, in one transaction, that the scheduler of
	// the given epoch dispatched work items (ValidateDispatches' rules). It
	// is refused with ErrStaleEpoch unless the epoch is current and its
	// lease unexpired. It returns the resources that no longer exist (their
	// dispatches are not recorded). Only bookkeeping changes: no revision,
	// no event. RecordDispatch records one.
	RecordDispatches(ctx context.Context, schedulerEpoch int64, ds []Dispatch) (missing []int64, err error)
	// SetCondition writes one condition outside a reconcile, fenced by the
	// scheduler epoch like RecordDispatches; one MODIFIED event unless
	// nothing changes. events (ValidateEvents' rules; their source is the
	// caller's) are recorded in the same transaction when the condition
	// changed, and not otherwise.
	SetCondition(ctx context.Context, schedulerEpoch, resourceID int64, c resource.Condition, events ...EventInput) (*resource.Resource, error)
	// RequestReconcile records a manual trigger, consumed by the next
	// attempt: one MODIFIED event.
	RequestReconcile(ctx context.Context, resourceID int64) (*resource.Resource, error)
	// ListReconcileState returns the reconcile state of resources by
	// ascending id, after AfterID, or of the resources named in IDs, read
	// with the relay's published revision.
	ListReconcileState(ctx context.Context, req ListReconcileStateRequest) (*ListReconcileStateResult, error)

	// RecordEvent records an event on a resource (records.go): a repeat
	// within the dedup window raises the existing record's count. It takes
	// no revision and writes no outbox row. NotFound when the resource does
	// not exist.
	RecordEvent(ctx context.Context, req RecordEventRequest) (*EventRecord, error)
	// ListEvents pages through events, newest first.
	ListEvents(ctx context.Context, req ListEventsRequest) ([]EventRecord, error)

	// CampaignLeader takes or renews the named leader lease (Campaign's
	// rules, as BecomeScheduler's; d 0: DefaultSchedulerLease). A lease is
	// created on first use.
	CampaignLeader(ctx context.Context, name, holder string, d time.Duration, epoch int64) (*SchedulerLease, error)
	// ReleaseLeader gives up the named leader lease of the given epoch: it
	// expires at once. Releasing an epoch that is no longer current does
	// nothing.
	ReleaseLeader(ctx context.Context, name, holder string, epoch int64) error

	// OwnerStore: the garbage collector's reads of owner references.
	OwnerStore

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
}

// Options are what every backend takes besides its database.
type Options struct {
	// AfterCommit, when set, is called after every committed change (it
	// wakes the relay).
	AfterCommit func()
	// ObserveCommit, when set, is called after every COMMIT with the
	// writes it carried (more than one when writes were committed
	// together) and the time from the transaction's start: the store's
	// commit metrics.
	ObserveCommit func(writes int, d time.Duration)
	// BeforeCommit, when set, runs inside every write transaction just
	// before commit; an error rolls the transaction back. Tests use it to
	// inject delays and rollbacks.
	BeforeCommit func(ctx context.Context) error
	// HistoryLimit bounds the reconciliation history rows kept per
	// resource (<= 0: DefaultHistoryLimit). The oldest rows are pruned by
	// the transaction that adds a row.
	HistoryLimit int
	// EventDedup is the window within which a repeated event raises the
	// count of its record (<= 0: DefaultEventDedupWindow).
	EventDedup time.Duration
	// EventRetention is how long an event record is kept after its last
	// occurrence (<= 0: DefaultEventRetention).
	EventRetention time.Duration
	// EventsPerResource bounds the records kept per resource, the oldest
	// pruned first (<= 0: DefaultEventsPerResource).
	EventsPerResource int
}

// MaxHistory is the history rows kept per resource.
func (o Options) MaxHistory() int {
	if o.HistoryLimit <= 0 {
		return DefaultHistoryLimit
	}
	return o.HistoryLimit
}

// Backend is an opened backend: its Store, its EventLog, and Close, which
// releases both.
type Backend struct {
	Store Store
	Log   EventLog
	// Name names the kind of backend ("postgres", "sqlite") in probes and
	// logs.
	Name  string
	Close func()
}

// Committed calls the after-commit hooks of o for a COMMIT of writes
// writes whose transaction started at start.
func (o Options) Committed(writes int, start time.Time) {
	if o.ObserveCommit != nil {
		o.ObserveCommit(writes, time.Since(start))
	}
	if o.AfterCommit != nil {
		o.AfterCommit()
	}
}
