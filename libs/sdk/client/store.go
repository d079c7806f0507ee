package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/sdk"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// Store is a thin sdk.ReadWriter over the store's gRPC API.
type Store struct {
	store     storev1.StoreServiceClient
	reconcile reconcilev1.ReconcileServiceClient
}

var _ sdk.ReadWriter = (*Store)(nil)

// NewStore returns a client over a connection to the store.
func NewStore(conn grpc.ClientConnInterface) *Store {
	return &Store{store: storev1.NewStoreServiceClient(conn), reconcile: reconcilev1.NewReconcileServiceClient(conn)}
}

// Get implements sdk.Reader.
func (s *Store) Get(ctx context.Context, id int64) (*sdk.Resource, error) {
	resp, err := s.store.GetResource(ctx, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Id{Id: id}})
	if err != nil {
		return nil, Wrap("get resource", err)
	}
	return sdk.ResourceFromProto(resp.GetResource()), nil
}

// GetByName implements sdk.Reader.
func (s *Store) GetByName(ctx context.Context, t sdk.TypeRef, name string) (*sdk.Resource, error) {
	resp, err := s.store.GetResource(ctx, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Name{Name: &storev1.ResourceName{
		ResourceTypeName: t.Name, ResourceTypeVersion: t.Version, Name: name,
	}}})
	if err != nil {
		return nil, Wrap("get resource", err)
	}
	return sdk.ResourceFromProto(resp.GetResource()), nil
}

// List implements sdk.Reader.
func (s *Store) List(ctx context.Context, opts sdk.ListOptions) (*sdk.ResourceList, error) {
	resp, err := s.store.ListResources(ctx, &storev1.ListResourcesRequest{
		ResourceTypeName: opts.Type.Name, ResourceTypeVersion: opts.Type.Version, Status: opts.Status,
		LabelSelector: opts.LabelSelector, Limit: int32(min(max(opts.Limit, 0), 1<<30)), ContinueToken: opts.Continue,
	})
	if err != nil {
		return nil, Wrap("list resources", err)
	}
	out := &sdk.ResourceList{Continue: resp.GetContinueToken(), ResourceVersion: resp.GetResourceVersion()}
	for _, r := range resp.GetResources() {
		out.Items = append(out.Items, sdk.ResourceFromProto(r))
	}
	return out, nil
}

// UpdateFinalizers implements sdk.Writer.
func (s *Store) UpdateFinalizers(ctx context.Context, id int64, add, remove []string) (*sdk.Resource, error) {
	resp, err := s.store.UpdateFinalizers(ctx, &storev1.UpdateFinalizersRequest{Id: id, Add: add, Remove: remove})
	if err != nil {
		return nil, Wrap("update finalizers", err)
	}
	return sdk.ResourceFromProto(resp.GetResource()), nil
}

// RequestReconcile implements sdk.Writer.
func (s *Store) RequestReconcile(ctx context.Context, id int64) error {
	_, err := s.reconcile.RequestReconcile(ctx, &reconcilev1.RequestReconcileRequest{ResourceId: id})
	return Wrap("request reconcile", err)
}
