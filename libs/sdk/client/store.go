package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// Store is a thin wire.ReadWriter over the store's WorkerService, the
// workers' door (the store's worker listener).
type Store struct {
	w reconcilev1.WorkerServiceClient
}

var _ wire.ReadWriter = (*Store)(nil)

// NewStore returns a client over a connection to the store's worker
// listener.
func NewStore(conn grpc.ClientConnInterface) *Store {
	return &Store{w: reconcilev1.NewWorkerServiceClient(conn)}
}

// Get implements wire.Reader.
func (s *Store) Get(ctx context.Context, id int64) (*sdk.Resource, error) {
	resp, err := s.w.GetResource(ctx, &reconcilev1.GetResourceRequest{Key: &reconcilev1.GetResourceRequest_Id{Id: id}})
	if err != nil {
		return nil, Wrap("get resource", err)
	}
	return wire.ResourceFromProto(resp.GetResource()), nil
}

// GetByName implements wire.Reader.
func (s *Store) GetByName(ctx context.Context, t sdk.TypeRef, namespace, name string) (*sdk.Resource, error) {
	resp, err := s.w.GetResource(ctx, &reconcilev1.GetResourceRequest{Key: &reconcilev1.GetResourceRequest_Name{Name: &storev1.ResourceName{
		ResourceTypeName: t.Name, ResourceTypeVersion: t.Version, Namespace: namespace, Name: name,
	}}})
	if err != nil {
		return nil, Wrap("get resource", err)
	}
	return wire.ResourceFromProto(resp.GetResource()), nil
}

// List implements wire.Reader.
func (s *Store) List(ctx context.Context, opts wire.ListOptions) (*wire.ResourceList, error) {
	resp, err := s.w.ListResources(ctx, &reconcilev1.ListResourcesRequest{
		ResourceTypeName: opts.Type.Name, ResourceTypeVersion: opts.Type.Version, Namespace: opts.Namespace, Status: opts.Status,
		LabelSelector: opts.LabelSelector, Limit: int32(min(max(opts.Limit, 0), 1<<30)), ContinueToken: opts.Continue,
	})
	if err != nil {
		return nil, Wrap("list resources", err)
	}
	out := &wire.ResourceList{Continue: resp.GetContinueToken(), ResourceVersion: resp.GetResourceVersion()}
	for _, r := range resp.GetResources() {
		out.Items = append(out.Items, wire.ResourceFromProto(r))
	}
	return out, nil
}

// UpdateFinalizers implements wire.Writer without a lease: the store refuses
// it (PermissionDenied). Within an attempt, ForAttempt's client presents
// the attempt's lease.
func (s *Store) UpdateFinalizers(ctx context.Context, id int64, add, remove []string) (*sdk.Resource, error) {
	return s.updateFinalizers(ctx, id, 0, add, remove)
}

func (s *Store) updateFinalizers(ctx context.Context, id, epoch int64, add, remove []string) (*sdk.Resource, error) {
	resp, err := s.w.UpdateFinalizers(ctx, &reconcilev1.UpdateFinalizersRequest{ResourceId: id, LeaseEpoch: epoch, Add: add, Remove: remove})
	if err != nil {
		return nil, Wrap("update finalizers", err)
	}
	return wire.ResourceFromProto(resp.GetResource()), nil
}

// UnderLease returns the reader-writer of an attempt: its finalizer changes
// present the lease's epoch, so that the store accepts the reconciler's own
// finalizer on the leased resource.
func (s *Store) UnderLease(lease *Lease) wire.ReadWriter { return leasedStore{s, lease} }

type leasedStore struct {
	*Store
	lease *Lease
}

func (s leasedStore) UpdateFinalizers(ctx context.Context, id int64, add, remove []string) (*sdk.Resource, error) {
	return s.updateFinalizers(ctx, id, s.lease.Epoch, add, remove)
}
