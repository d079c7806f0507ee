package store

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/no8s/no8s/libs/api/fence"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/store/storage"
)

// The garbage collector's reads (storage.OwnerStore), served to the
// scheduler on its ReconcileService.

func (h *reconcileHandler) ListDependents(ctx context.Context, req *reconcilev1.ListDependentsRequest) (*reconcilev1.ListDependentsResponse, error) {
	if req.GetOwnerUid() == "" {
		return nil, toStatus(storage.InvalidField("/owner_uid", "required"))
	}
	rs, err := h.store.ListDependents(ctx, storage.ListDependentsRequest{OwnerUID: req.GetOwnerUid(), AfterID: req.GetAfterId(), Limit: int(req.GetLimit())})
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.ListDependentsResponse{Resources: resourcesToProto(rs)}, nil
}

func (h *reconcileHandler) ListDangling(ctx context.Context, req *reconcilev1.ListDanglingRequest) (*reconcilev1.ListDanglingResponse, error) {
	p, err := h.store.ListDangling(ctx, storage.ListDanglingRequest{AfterID: req.GetAfterId(), Limit: int(req.GetLimit())})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &reconcilev1.ListDanglingResponse{Next: p.Next, Items: make([]*reconcilev1.DanglingDependent, 0, len(p.Items))}
	for _, d := range p.Items {
		out.Items = append(out.Items, &reconcilev1.DanglingDependent{Resource: resourcepb.ToProto(d.Resource), Refs: resourcepb.OwnerReferencesToProto(d.Refs)})
	}
	return out, nil
}

func (h *reconcileHandler) ListPropagating(ctx context.Context, req *reconcilev1.ListPropagatingRequest) (*reconcilev1.ListPropagatingResponse, error) {
	rs, err := h.store.ListPropagating(ctx, req.GetAfterId(), int(req.GetLimit()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.ListPropagatingResponse{Resources: resourcesToProto(rs)}, nil
}

// CampaignCollector is CampaignLeader for the garbage collector's lease,
// fence.GarbageCollectorLease.
func (h *reconcileHandler) CampaignCollector(ctx context.Context, req *reconcilev1.CampaignCollectorRequest) (*reconcilev1.CampaignCollectorResponse, error) {
	if req.GetRelease() {
		if err := h.store.ReleaseLeader(ctx, fence.GarbageCollectorLease, req.GetHolder(), req.GetEpoch()); err != nil {
			return nil, toStatus(err)
		}
		return &reconcilev1.CampaignCollectorResponse{Epoch: req.GetEpoch()}, nil
	}
	l, err := h.store.CampaignLeader(ctx, fence.GarbageCollectorLease, req.GetHolder(), seconds(req.GetLeaseSeconds()), req.GetEpoch())
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.CampaignCollectorResponse{Leader: l.Leader, Epoch: l.Epoch, ExpiresAt: timestamppb.New(l.ExpiresAt), CurrentHolder: l.Holder}, nil
}

func resourcesToProto(rs []*resource.Resource) []*storev1.Resource {
	out := make([]*storev1.Resource, 0, len(rs))
	for _, r := range rs {
		out = append(out, resourcepb.ToProto(r))
	}
	return out
}
