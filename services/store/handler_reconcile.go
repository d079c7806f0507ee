package store

import (
	"context"
	"time"

	"github.com/no8s/no8s/proto/enumpb"

	"google.golang.org/protobuf/types/known/timestamppb"

	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/store/storage"
)

// reconcileHandler is the gRPC edge of ReconcileService (the scheduler's and
// the gateway's calls): it maps the protobuf contract
// (proto/no8s/reconcile/v1) onto the store's reconcile operations. The
// workers' calls are workerHandler's (handler_worker.go).
type reconcileHandler struct {
	reconcilev1.UnimplementedReconcileServiceServer
	store storage.Store
}

func seconds(n int32) time.Duration { return time.Duration(n) * time.Second }

func (h *reconcileHandler) BecomeScheduler(ctx context.Context, req *reconcilev1.BecomeSchedulerRequest) (*reconcilev1.BecomeSchedulerResponse, error) {
	if req.GetRelease() {
		if err := h.store.ReleaseScheduler(ctx, req.GetHolder(), req.GetEpoch()); err != nil {
			return nil, toStatus(err)
		}
		return &reconcilev1.BecomeSchedulerResponse{Epoch: req.GetEpoch()}, nil
	}
	l, err := h.store.BecomeScheduler(ctx, req.GetHolder(), seconds(req.GetLeaseSeconds()), req.GetEpoch())
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.BecomeSchedulerResponse{Leader: l.Leader, Epoch: l.Epoch, ExpiresAt: timestamppb.New(l.ExpiresAt), CurrentHolder: l.Holder}, nil
}

func (h *reconcileHandler) RecordDispatch(ctx context.Context, req *reconcilev1.RecordDispatchRequest) (*reconcilev1.RecordDispatchResponse, error) {
	if err := storage.RecordDispatch(ctx, h.store, req.GetSchedulerEpoch(), req.GetResourceId(), req.GetDispatchId()); err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.RecordDispatchResponse{}, nil
}

func (h *reconcileHandler) RecordDispatches(ctx context.Context, req *reconcilev1.RecordDispatchesRequest) (*reconcilev1.RecordDispatchesResponse, error) {
	ds := make([]storage.Dispatch, len(req.GetDispatches()))
	for i, d := range req.GetDispatches() {
		ds[i] = storage.Dispatch{ResourceID: d.GetResourceId(), DispatchID: d.GetDispatchId()}
	}
	missing, err := h.store.RecordDispatches(ctx, req.GetSchedulerEpoch(), ds)
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.RecordDispatchesResponse{Missing: missing}, nil
}

func (h *reconcileHandler) ListReconcileState(ctx context.Context, req *reconcilev1.ListReconcileStateRequest) (*reconcilev1.ListReconcileStateResponse, error) {
	in := storage.ListReconcileStateRequest{AfterID: req.GetAfterId(), Limit: int(req.GetLimit()), IDs: req.GetResourceIds()}
	if id := req.GetResourceId(); id != 0 {
		in.IDs = append(in.IDs, id)
	}
	res, err := h.store.ListReconcileState(ctx, in)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &reconcilev1.ListReconcileStateResponse{ResourceVersion: res.ResourceVersion, States: make([]*reconcilev1.ReconcileState, 0, len(res.States))}
	for _, st := range res.States {
		out.States = append(out.States, &reconcilev1.ReconcileState{
			ResourceId:            st.ResourceID,
			ResourceUid:           st.UID,
			ResourceTypeName:      st.ResourceTypeName,
			ResourceTypeVersion:   st.ResourceTypeVersion,
			Generation:            st.Generation,
			ObservedGeneration:    st.ObservedGeneration,
			Status:                st.Status,
			Deleting:              st.Deleting,
			CleanupDone:           st.CleanupDone,
			ControllerUid:         st.ControllerUID,
			Failures:              st.Failures,
			TerminalGeneration:    st.TerminalGeneration,
			LastReconcileTime:     tsPtr(st.LastReconcileTime),
			ReconcileRequestedAt:  tsPtr(st.ReconcileRequestedAt),
			AnnotationReconcile:   st.AnnotationReconcile,
			AnnotationIgnore:      st.AnnotationIgnore,
			LeaseExpiresAt:        tsPtr(st.LeaseExpiresAt),
			DispatchedAt:          tsPtr(st.DispatchedAt),
			Policy:                policyToProto(st.Policy),
			ResourceVersion:       st.ResourceVersion,
			RequeueAt:             tsPtr(st.RequeueAt),
			LeaseEpoch:            st.LeaseEpoch,
			LeaseHolder:           st.LeaseHolder,
			DispatchId:            st.DispatchID,
			ReconcilerUnavailable: st.ReconcilerUnavailable,
			Name:                  st.Name,
			Namespace:             st.Namespace,
			Dependencies:          dependenciesToProto(st.Dependencies),
			LeaseRevision:         st.LeaseRevision,
		})
	}
	return out, nil
}

func (h *reconcileHandler) SetCondition(ctx context.Context, req *reconcilev1.SetConditionRequest) (*reconcilev1.SetConditionResponse, error) {
	cs := conditionsFromProto([]*storev1.Condition{req.GetCondition()})
	if _, err := h.store.SetCondition(ctx, req.GetSchedulerEpoch(), req.GetResourceId(), cs[0], eventsFromProto(req.GetEvents())...); err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.SetConditionResponse{}, nil
}

func (h *reconcileHandler) RequestReconcile(ctx context.Context, req *reconcilev1.RequestReconcileRequest) (*reconcilev1.RequestReconcileResponse, error) {
	r, err := h.store.RequestReconcile(ctx, req.GetResourceId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.RequestReconcileResponse{Resource: resourcepb.ToProto(r)}, nil
}

func (h *reconcileHandler) ListHistory(ctx context.Context, req *reconcilev1.ListHistoryRequest) (*reconcilev1.ListHistoryResponse, error) {
	entries, err := h.store.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: req.GetResourceId(), Limit: int(req.GetLimit()), BeforeID: req.GetBeforeId()})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &reconcilev1.ListHistoryResponse{Entries: make([]*reconcilev1.HistoryEntry, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, &reconcilev1.HistoryEntry{
			Id: e.ID, ResourceId: e.ResourceID, Generation: e.Generation, Success: e.Success, Phase: e.Phase,
			ErrorMessage: e.ErrorMessage, ResourcesCreated: e.ResourcesCreated, ResourcesUpdated: e.ResourcesUpdated,
			ResourcesDeleted: e.ResourcesDeleted, StartedAt: tsPtr(e.StartedAt), DurationMs: e.DurationMS,
			ReconcileTime: timestamppb.New(e.ReconcileTime), LeaseEpoch: e.LeaseEpoch, Holder: e.Holder, Reason: enumpb.ReasonFromName(e.Reason),
		})
	}
	return out, nil
}

func policyToProto(p resource.ReconcilePolicy) *reconcilev1.ReconcilePolicy {
	return &reconcilev1.ReconcilePolicy{
		ResyncSeconds: p.ResyncSeconds, BackoffBaseSeconds: p.BackoffBaseSeconds,
		BackoffMaxSeconds: p.BackoffMaxSeconds, TimeoutSeconds: p.TimeoutSeconds,
	}
}

func conditionsFromProto(in []*storev1.Condition) []resource.Condition {
	out := make([]resource.Condition, 0, len(in))
	for _, c := range in {
		out = append(out, resource.Condition{
			Type: c.GetType(), Status: c.GetStatus(), Reason: c.GetReason(), Message: c.GetMessage(),
			ObservedGeneration: c.GetObservedGeneration(),
		})
	}
	return out
}

func tsPtr(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// dependenciesToProto converts a resource's dependencies.
func dependenciesToProto(in []storage.Dependency) []*reconcilev1.Dependency {
	if len(in) == 0 {
		return nil
	}
	out := make([]*reconcilev1.Dependency, 0, len(in))
	for _, d := range in {
		out = append(out, &reconcilev1.Dependency{TypeName: d.TypeName, TypeVersion: d.TypeVersion,
			Namespace: d.Namespace, Name: d.Name, Wait: d.Wait})
	}
	return out
}
