package client

import (
	"context"
	"math"
	"time"

	"github.com/no8s/no8s/proto/enumpb"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// Policy is a type's reconcile policy, with the defaults of the design
// applied to absent values.
type Policy struct {
	Resync      time.Duration
	BackoffBase time.Duration
	BackoffMax  time.Duration
	Timeout     time.Duration
}

// Policy defaults (docs/design/reconcile.md).
const (
	DefaultResync      = 300 * time.Second
	DefaultBackoffBase = 60 * time.Second
	DefaultBackoffMax  = 61440 * time.Second
	DefaultTimeout     = 300 * time.Second
)

// PolicyFromProto applies the defaults to absent (zero) fields.
func PolicyFromProto(p *reconcilev1.ReconcilePolicy) Policy {
	sec := func(v int32, def time.Duration) time.Duration {
		if v <= 0 {
			return def
		}
		return time.Duration(v) * time.Second
	}
	return Policy{
		Resync:      sec(p.GetResyncSeconds(), DefaultResync),
		BackoffBase: sec(p.GetBackoffBaseSeconds(), DefaultBackoffBase),
		BackoffMax:  sec(p.GetBackoffMaxSeconds(), DefaultBackoffMax),
		Timeout:     sec(p.GetTimeoutSeconds(), DefaultTimeout),
	}
}

// Lease is a held reconcile lease.
type Lease struct {
	ResourceID int64
	Epoch      int64
	Holder     string
	ExpiresAt  time.Time
	// Reason is the work item's reason, recorded in history.
	Reason reconcilev1.Reason
	// Resource is the fresh resource, already marked reconciling.
	Resource *sdk.Resource
	Policy   Policy
}

// Leases wraps the WorkerService calls of a worker around one attempt.
type Leases struct {
	rc reconcilev1.WorkerServiceClient
}

// NewLeases returns a lease client over a connection to the store's worker
// listener.
func NewLeases(conn grpc.ClientConnInterface) *Leases {
	return &Leases{rc: reconcilev1.NewWorkerServiceClient(conn)}
}

// Acquire takes the lease of item's resource for holder.
func (l *Leases) Acquire(ctx context.Context, item *reconcilev1.WorkItem, holder string, d time.Duration) (*Lease, error) {
	resp, err := l.rc.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{
		ResourceId: item.GetResourceId(), Holder: holder, LeaseSeconds: seconds(d),
		SchedulerEpoch: item.GetSchedulerEpoch(), DispatchId: item.GetDispatchId(),
	})
	if err != nil {
		return nil, Wrap("acquire lease", err)
	}
	return &Lease{
		ResourceID: item.GetResourceId(), Epoch: resp.GetLeaseEpoch(), Holder: holder,
		ExpiresAt: resp.GetExpiresAt().AsTime(), Reason: item.GetReason(),
		Resource: wire.ResourceFromProto(resp.GetResource()), Policy: PolicyFromProto(resp.GetPolicy()),
	}, nil
}

// Renew extends the lease by d.
func (l *Leases) Renew(ctx context.Context, lease *Lease, d time.Duration) error {
	resp, err := l.rc.RenewLease(ctx, &reconcilev1.RenewLeaseRequest{ResourceId: lease.ResourceID, LeaseEpoch: lease.Epoch, LeaseSeconds: seconds(d)})
	if err != nil {
		return Wrap("renew lease", err)
	}
	lease.ExpiresAt = resp.GetExpiresAt().AsTime()
	return nil
}

// StatusWriter returns the wire.StatusWriter of an attempt under lease: its
// Complete presents the lease epoch.
func (l *Leases) StatusWriter(lease *Lease) wire.StatusWriter {
	return statusWriter{l: l, lease: lease}
}

type statusWriter struct {
	l     *Leases
	lease *Lease
}

func (w statusWriter) Complete(ctx context.Context, c *wire.Completion) (*wire.Completed, error) {
	req := CompleteRequest(c, w.lease)
	resp, err := w.l.rc.CompleteReconcile(ctx, req)
	if err != nil {
		return nil, Wrap("complete reconcile", err)
	}
	return &wire.Completed{Resource: wire.ResourceFromProto(resp.GetResource()), Purged: resp.GetPurged()}, nil
}

// CompleteRequest builds the CompleteReconcile call of a completion.
func CompleteRequest(c *wire.Completion, lease *Lease) *reconcilev1.CompleteReconcileRequest {
	req := &reconcilev1.CompleteReconcileRequest{
		ResourceId: c.ResourceID, LeaseEpoch: lease.Epoch, Outcome: enumpb.Outcome(c.Outcome),
		StatusMessage: c.Message, Conditions: wire.ConditionsToProto(c.Conditions), Outputs: c.Outputs,
		Generation: c.Generation, RemoveFinalizers: c.RemoveFinalizers, AddFinalizers: c.AddFinalizers,
		RemoveAnnotations: c.RemoveAnnotations, Degraded: c.Degraded, Observed: c.Observed,
		History: &reconcilev1.HistoryEntry{
			ResourceId: c.ResourceID, Generation: c.Generation, Success: c.Outcome == lifecycle.OutcomeSuccess,
			ErrorMessage: c.Error, ResourcesCreated: int32(c.Changes.Created), ResourcesUpdated: int32(c.Changes.Updated),
			ResourcesDeleted: int32(c.Changes.Deleted), DurationMs: c.Duration.Milliseconds(),
			LeaseEpoch: lease.Epoch, Holder: lease.Holder, Reason: lease.Reason,
		},
	}
	if !c.StartedAt.IsZero() {
		req.History.StartedAt = timestamppb.New(c.StartedAt)
	}
	for _, e := range c.Events {
		req.Events = append(req.Events, &storev1.EventInput{Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	for _, d := range c.Dependencies {
		req.Dependencies = append(req.Dependencies, &reconcilev1.Dependency{
			TypeName: d.Type.Name, TypeVersion: d.Type.Version, Namespace: d.Namespace, Name: d.Name, Wait: d.Wait})
	}
	if c.Outcome == lifecycle.OutcomeRequeue {
		req.RequeueAfterSeconds = max(seconds(c.RequeueAfter), 1)
	}
	return req
}

// seconds rounds d up to whole seconds.
func seconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(min(math.Ceil(d.Seconds()), math.MaxInt32))
}

// ForAttempt combines a ReadWriter with an attempt's StatusWriter.
func ForAttempt(rw wire.ReadWriter, sw wire.StatusWriter) wire.Client { return attemptClient{rw, sw} }

type attemptClient struct {
	wire.ReadWriter
	sw wire.StatusWriter
}

func (c attemptClient) Status() wire.StatusWriter { return c.sw }
