package store

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/no8s/no8s/proto/enumpb"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/sdk"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/store/storage"
)

// workerHandler is the gRPC edge of WorkerService, the reconciler workers'
// door (proto/no8s/reconcile/v1/worker.proto). It is the only service on
// the worker listener, so a worker cannot write a spec, a type or a
// webhook. Of the metadata, a worker changes only the finalizers it owns
// (its own, and those its registration declares) and the operation
// annotation it consumes: the handler checks that before the store writes,
// against the holder of the lease epoch presented.
type workerHandler struct {
	reconcilev1.UnimplementedWorkerServiceServer
	store storage.Store
	// claims reads the registry's type claims, for finalizers that are not
	// the holder's own (nil: only its own are accepted).
	claims claimReader
}

// claimReader reads the reconciler registry's claim on a type
// (registry.Claim): the reconciler serving it and the finalizers it
// declared beyond its own; ok is false when no live reconciler serves it.
type claimReader func(ctx context.Context, t sdk.TypeRef) (c subjects.TypeClaim, ok bool, err error)

// holderName is the reconciler a lease holder belongs to: the holder up to
// its first "/" (the SDK's holders are <name>/<replica>).
func holderName(holder string) string {
	name, _, _ := strings.Cut(holder, "/")
	return name
}

// checkOwned refuses, with Forbidden/not_owned, finalizers the holder does
// not own and annotations other than no8s.io/operation. A holder owns its
// own finalizer reconciler.no8s.io/<name>, and the finalizers its
// reconciler declared in the registry's claim on the resource's type
// (subjects.TypeClaim.Owns: an action plugin's, such as github_actions), read
// only when asked for one. The holder is the one of the lease at epoch on
// resource id: an epoch names one holder for ever. CompleteReconcile, which
// follows the check, is fenced by the same epoch, so a lease taken over in
// between makes it fail with stale_epoch; UpdateFinalizers is not fenced,
// but what it may change is the holder's own finalizers whoever holds the
// lease by then.
func (h *workerHandler) checkOwned(ctx context.Context, id, epoch int64, finalizers, annotations []string, actor *storage.Actor) error {
	if len(finalizers) == 0 && len(annotations) == 0 {
		return nil
	}
	for _, a := range annotations {
		if a != resource.AnnotationOperation {
			return problem.New(problem.Forbidden, problem.CodeNotOwned,
				"a worker removes no annotation but %s (asked to remove %q)", resource.AnnotationOperation, a)
		}
	}
	if len(finalizers) == 0 {
		return nil
	}
	res, err := h.store.ListReconcileState(ctx, storage.ListReconcileStateRequest{IDs: []int64{id}})
	if err != nil {
		return err
	}
	if len(res.States) == 0 {
		return problem.NotFoundf("resource %d not found", id)
	}
	st := res.States[0]
	if err := actor.Permits(id, sdk.Type(st.ResourceTypeName, st.ResourceTypeVersion).String(), st.LeaseHolder); err != nil {
		return err
	}
	if epoch == 0 {
		return problem.New(problem.Forbidden, problem.CodeNotOwned,
			"a worker changes finalizers only under the reconcile lease of resource %d (no lease epoch given)", id)
	}
	if st.LeaseEpoch != epoch || st.LeaseHolder == "" {
		return problem.New(problem.Conflict, problem.CodeStaleEpoch,
			"lease epoch %d of resource %d is not held (the current epoch is %d)", epoch, id, st.LeaseEpoch)
	}
	name := holderName(st.LeaseHolder)
	typ := sdk.Type(st.ResourceTypeName, st.ResourceTypeVersion)
	var claim subjects.TypeClaim // without a claim, a holder owns its own finalizer only
	read := false
	for _, f := range finalizers {
		if claim.Owns(name, f) {
			continue
		}
		if !read && h.claims != nil {
			c, ok, err := h.claims(ctx, typ)
			if err != nil {
				return problem.New(problem.Unavailable, problem.CodeUnavailable, "cannot read the reconciler registry's claim on %s: %v", typ, err)
			}
			if ok {
				claim = c
			}
			read = true
			if claim.Owns(name, f) {
				continue
			}
		}
		return problem.New(problem.Forbidden, problem.CodeNotOwned,
			"lease holder %q may change only its own finalizer %s and those its registration declares for %s (%s), not %q",
			st.LeaseHolder, names.ReconcilerFinalizer(name), typ, declared(claim, name), f)
	}
	return nil
}

// asCaller holds a reconciler identity on the workers' door (doorCaller:
// registry-sync's included) to what its certificate gives it: it acts only as itself (a lease holder
// "<its name>/<replica>") and only on resources of the types it claims. A
// call without an identity (identities off) or from a service (the policy
// already decided) is not checked here.
func asCaller(ctx context.Context, method, holder string, typ sdk.TypeRef) error {
	id, ok := doorCaller(ctx)
	if !ok {
		return nil
	}
	if holder != "" && holderName(holder) != id.Name {
		return authz.Deny(ctx, method, "acts only as itself: the lease holder %q is not %s/<replica>", holder, id.Name)
	}
	if typ.Name != "" && !id.Serves(typ.String()) {
		return authz.Deny(ctx, method, "its certificate claims %s, not %s", claimed(id), typ)
	}
	return nil
}

// doorCaller is the reconciler the call's identity acts as
// (authz.AtTheDoor); false without an identity or for a service that acts
// as no reconciler.
func doorCaller(ctx context.Context) (identity.ID, bool) {
	c, ok := authz.Caller(ctx)
	if !ok {
		return identity.ID{}, false
	}
	return authz.AtTheDoor(c)
}

// claimed lists the types a reconciler identity claims, for errors.
func claimed(id identity.ID) string {
	if len(id.Types) == 0 {
		return "no type"
	}
	return strings.Join(id.Types, ", ")
}

// asLeaseHolder holds a reconciler identity calling about resource id's
// lease (renew, complete, finalizers) to the resource's type and to the
// lease's current holder: the state is read only for such a caller.
func (h *workerHandler) asLeaseHolder(ctx context.Context, method string, id int64) error {
	if _, ok := doorCaller(ctx); !ok {
		return nil
	}
	res, err := h.store.ListReconcileState(ctx, storage.ListReconcileStateRequest{IDs: []int64{id}})
	if err != nil {
		return err
	}
	if len(res.States) == 0 {
		return problem.NotFoundf("resource %d not found", id)
	}
	st := res.States[0]
	return asCaller(ctx, method, st.LeaseHolder, sdk.Type(st.ResourceTypeName, st.ResourceTypeVersion))
}

// declared lists what claim lets reconciler name own beyond its own
// finalizer, for error messages.
func declared(claim subjects.TypeClaim, name string) string {
	if claim.Reconciler != name || len(claim.Finalizers) == 0 {
		return "none"
	}
	return strings.Join(claim.Finalizers, ", ")
}

func (h *workerHandler) UpdateFinalizers(ctx context.Context, req *reconcilev1.UpdateFinalizersRequest) (*reconcilev1.UpdateFinalizersResponse, error) {
	if err := h.asLeaseHolder(ctx, reconcilev1.WorkerService_UpdateFinalizers_FullMethodName, req.GetResourceId()); err != nil {
		return nil, toStatus(err)
	}
	if err := h.checkOwned(ctx, req.GetResourceId(), req.GetLeaseEpoch(), slices.Concat(req.GetAdd(), req.GetRemove()), nil, nil); err != nil {
		return nil, toStatus(err)
	}
	res, err := h.store.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: req.GetResourceId(), Add: req.GetAdd(), Remove: req.GetRemove()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.UpdateFinalizersResponse{Resource: resourcepb.ToProto(res.Resource), Purged: res.Purged}, nil
}

func (h *workerHandler) GetResource(ctx context.Context, req *reconcilev1.GetResourceRequest) (*reconcilev1.GetResourceResponse, error) {
	out, err := h.store.GetResource(ctx, resourceKey(req.GetId(), req.GetName()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.GetResourceResponse{Resource: resourcepb.ToProto(out)}, nil
}

func (h *workerHandler) ListResources(ctx context.Context, req *reconcilev1.ListResourcesRequest) (*reconcilev1.ListResourcesResponse, error) {
	res, err := h.store.ListResources(ctx, storage.ListResourcesRequest{
		ResourceTypeName: req.GetResourceTypeName(), ResourceTypeVersion: req.GetResourceTypeVersion(), Namespace: req.GetNamespace(),
		Status: req.GetStatus(), LabelSelector: req.GetLabelSelector(), Limit: int(req.GetLimit()), Continue: req.GetContinueToken(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &reconcilev1.ListResourcesResponse{
		Resources:       make([]*storev1.Resource, 0, len(res.Resources)),
		ContinueToken:   res.Continue,
		ResourceVersion: res.ResourceVersion,
	}
	for _, r := range res.Resources {
		out.Resources = append(out.Resources, resourcepb.ToProto(r))
	}
	return out, nil
}

func (h *workerHandler) AcquireLease(ctx context.Context, req *reconcilev1.AcquireLeaseRequest) (*reconcilev1.AcquireLeaseResponse, error) {
	const method = reconcilev1.WorkerService_AcquireLease_FullMethodName
	in := storage.AcquireLeaseRequest{
		ResourceID: req.GetResourceId(), Holder: req.GetHolder(), Lease: seconds(req.GetLeaseSeconds()),
		SchedulerEpoch: req.GetSchedulerEpoch(), DispatchID: req.GetDispatchId(),
	}
	// A reconciler identity: the holder it asks for is checked here, the
	// resource's type by the store on the row it locks to grant the lease
	// (no read of its own on the hot path).
	if err := asCaller(ctx, method, req.GetHolder(), sdk.TypeRef{}); err != nil {
		return nil, toStatus(err)
	}
	in.Actor = actorOf(ctx)
	l, err := h.store.AcquireLease(ctx, in)
	if retry, refused := refusedActor(ctx, method, err); retry {
		in.Actor = nil
		l, err = h.store.AcquireLease(ctx, in)
	} else if refused != nil {
		err = refused
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.AcquireLeaseResponse{
		LeaseEpoch: l.Epoch, ExpiresAt: timestamppb.New(l.ExpiresAt), Resource: resourcepb.ToProto(l.Resource), Policy: policyToProto(l.Policy),
	}, nil
}

func (h *workerHandler) RenewLease(ctx context.Context, req *reconcilev1.RenewLeaseRequest) (*reconcilev1.RenewLeaseResponse, error) {
	if err := h.asLeaseHolder(ctx, reconcilev1.WorkerService_RenewLease_FullMethodName, req.GetResourceId()); err != nil {
		return nil, toStatus(err)
	}
	exp, err := h.store.RenewLease(ctx, req.GetResourceId(), req.GetLeaseEpoch(), seconds(req.GetLeaseSeconds()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.RenewLeaseResponse{ExpiresAt: timestamppb.New(exp)}, nil
}

func (h *workerHandler) CompleteReconcile(ctx context.Context, req *reconcilev1.CompleteReconcileRequest) (*reconcilev1.CompleteReconcileResponse, error) {
	hist := req.GetHistory()
	in := storage.CompleteReconcileRequest{
		ResourceID:    req.GetResourceId(),
		LeaseEpoch:    req.GetLeaseEpoch(),
		Actor:         actorOf(ctx),
		Outcome:       enumpb.FromOutcome(req.GetOutcome()),
		StatusMessage: req.GetStatusMessage(),
		Conditions:    conditionsFromProto(req.GetConditions()),
		Generation:    req.GetGeneration(),
		History: storage.HistoryEntry{
			Phase:            hist.GetPhase(),
			ErrorMessage:     hist.GetErrorMessage(),
			ResourcesCreated: hist.GetResourcesCreated(),
			ResourcesUpdated: hist.GetResourcesUpdated(),
			ResourcesDeleted: hist.GetResourcesDeleted(),
			DurationMS:       hist.GetDurationMs(),
			Reason:           enumpb.ReasonName(hist.GetReason()),
		},
		AddFinalizers:     req.GetAddFinalizers(),
		RemoveFinalizers:  req.GetRemoveFinalizers(),
		RemoveAnnotations: req.GetRemoveAnnotations(),
		RequeueAfter:      seconds(req.GetRequeueAfterSeconds()),
		Degraded:          req.GetDegraded(),
		Observed:          req.GetObserved(),
		Events:            eventsFromProto(req.GetEvents()),
		Dependencies:      dependenciesFromProto(req.GetDependencies()),
	}
	if len(req.GetOutputs()) > 0 {
		in.Outputs = req.GetOutputs()
	}
	if t := hist.GetStartedAt(); t != nil {
		st := t.AsTime().UTC()
		in.History.StartedAt = &st
	}
	const method = reconcilev1.WorkerService_CompleteReconcile_FullMethodName
	res, err := h.complete(ctx, req, in)
	if retry, refused := refusedActor(ctx, method, err); retry {
		in.Actor = nil
		res, err = h.complete(ctx, req, in)
	} else if refused != nil {
		err = refused
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.CompleteReconcileResponse{Resource: resourcepb.ToProto(res.Resource), Purged: res.Purged}, nil
}

// complete checks the finalizers and annotations req changes (checkOwned,
// with in's Actor), then has the store apply in, which checks the Actor on
// the row it locks: a reconciler identity completes only a lease of its
// own on a type it is issued for, at no read of its own.
func (h *workerHandler) complete(ctx context.Context, req *reconcilev1.CompleteReconcileRequest, in storage.CompleteReconcileRequest) (*storage.CompleteResult, error) {
	owned := slices.Concat(req.GetAddFinalizers(), req.GetRemoveFinalizers())
	if err := h.checkOwned(ctx, req.GetResourceId(), req.GetLeaseEpoch(), owned, req.GetRemoveAnnotations(), in.Actor); err != nil {
		return nil, err
	}
	return h.store.CompleteReconcile(ctx, in)
}

// actorOf is the limit the store holds a reconciler identity's call to
// (storage.Actor), nil without one.
func actorOf(ctx context.Context) *storage.Actor {
	id, ok := doorCaller(ctx)
	if !ok {
		return nil
	}
	return &storage.Actor{Name: id.Name, Types: id.Types}
}

// refusedActor answers the store's ErrNotPermitted (an Actor's limit) as
// the authorizer does: refused is its PermissionDenied; in audit-only mode
// it logs what it would refuse and retry is true (the call goes on without
// the limit). Any other err comes back as refused, unchanged.
func refusedActor(ctx context.Context, method string, err error) (retry bool, refused error) {
	var se *storage.Error
	if !errors.As(err, &se) || !errors.Is(se.Err, storage.ErrNotPermitted) {
		return false, err
	}
	if denied := authz.Deny(ctx, method, "%s", se.Detail); denied != nil {
		return false, denied
	}
	return true, nil
}

// CampaignLeader takes, renews or releases the leader lease named after the
// holder's reconciler (a worker campaigns for no other).
func (h *workerHandler) CampaignLeader(ctx context.Context, req *reconcilev1.CampaignLeaderRequest) (*reconcilev1.CampaignLeaderResponse, error) {
	own, _, _ := strings.Cut(req.GetHolder(), "/")
	if c, ok := authz.Caller(ctx); ok && c.Name != own {
		if err := authz.Deny(ctx, reconcilev1.WorkerService_CampaignLeader_FullMethodName, "acts only as itself: the holder %q is not %s/<replica>", req.GetHolder(), c.Name); err != nil {
			return nil, toStatus(err)
		}
	}
	if req.GetName() != own {
		return nil, toStatus(problem.New(problem.Forbidden, problem.CodeNotOwned,
			"holder %q may campaign only for the leader lease %q, not %q", req.GetHolder(), own, req.GetName()))
	}
	if req.GetRelease() {
		if err := h.store.ReleaseLeader(ctx, req.GetName(), req.GetHolder(), req.GetEpoch()); err != nil {
			return nil, toStatus(err)
		}
		return &reconcilev1.CampaignLeaderResponse{Epoch: req.GetEpoch()}, nil
	}
	l, err := h.store.CampaignLeader(ctx, req.GetName(), req.GetHolder(), seconds(req.GetLeaseSeconds()), req.GetEpoch())
	if err != nil {
		return nil, toStatus(err)
	}
	return &reconcilev1.CampaignLeaderResponse{Leader: l.Leader, Epoch: l.Epoch, ExpiresAt: timestamppb.New(l.ExpiresAt), CurrentHolder: l.Holder}, nil
}

// dependenciesFromProto converts a completion's dependencies (the store
// validates them).
func dependenciesFromProto(in []*reconcilev1.Dependency) []storage.Dependency {
	out := make([]storage.Dependency, 0, len(in))
	for _, d := range in {
		out = append(out, storage.Dependency{TypeName: d.GetTypeName(), TypeVersion: d.GetTypeVersion(),
			Namespace: d.GetNamespace(), Name: d.GetName(), Wait: d.GetWait()})
	}
	return out
}
