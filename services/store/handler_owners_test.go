package store_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/grpcserver"
)

// The collector's reads over gRPC: the dependents of a uid, the sweep of
// dangling references, and the deleting owners with a propagation
// finalizer; a DELETE's propagation policy travels in the request.
func TestCollectorReadsOverGRPC(t *testing.T) {
	ctx := t.Context()
	addr, _, _ := serveStore(t, nil)
	conn, err := grpcserver.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	st, rc := storev1.NewStoreServiceClient(conn), reconcilev1.NewReconcileServiceClient(conn)
	typ, err := st.CreateResourceType(ctx, &storev1.CreateResourceTypeRequest{ResourceType: &storev1.ResourceType{
		Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string, owners ...*storev1.OwnerReference) *storev1.Resource {
		t.Helper()
		r, err := st.CreateResource(ctx, &storev1.CreateResourceRequest{SchemaRevision: typ.GetResourceType().GetResourceVersion(), Resource: &storev1.Resource{
			Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: []byte(`{}`), OwnerReferences: owners}})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetResource()
	}
	ref := func(r *storev1.Resource) *storev1.OwnerReference {
		return &storev1.OwnerReference{Uid: r.GetUid(), ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: r.GetName()}
	}
	owner := create("owner")
	child := create("child", ref(owner))
	never := &storev1.OwnerReference{Uid: uuid.NewString(), ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: "never"}
	lost := create("lost", never)

	deps, err := rc.ListDependents(ctx, &reconcilev1.ListDependentsRequest{OwnerUid: owner.GetUid()})
	if err != nil || len(deps.GetResources()) != 1 || deps.GetResources()[0].GetId() != child.GetId() {
		t.Fatalf("dependents: %v %v", deps, err)
	}
	dang, err := rc.ListDangling(ctx, &reconcilev1.ListDanglingRequest{})
	if err != nil || len(dang.GetItems()) != 1 || dang.GetItems()[0].GetResource().GetId() != lost.GetId() ||
		len(dang.GetItems()[0].GetRefs()) != 1 || dang.GetItems()[0].GetRefs()[0].GetUid() != never.GetUid() || dang.GetNext() != 0 {
		t.Fatalf("dangling: %v %v", dang, err)
	}
	if _, err := st.DeleteResource(ctx, &storev1.DeleteResourceRequest{Id: owner.GetId(), PropagationPolicy: "Sideways"}); err == nil {
		t.Fatal("a bad propagation policy was taken")
	}
	del, err := st.DeleteResource(ctx, &storev1.DeleteResourceRequest{Id: owner.GetId(), PropagationPolicy: "Foreground"})
	if err != nil || del.GetPurged() || !slices.Contains(del.GetResource().GetFinalizers(), "foregroundDeletion") {
		t.Fatalf("foreground delete: %v %v", del, err)
	}
	prop, err := rc.ListPropagating(ctx, &reconcilev1.ListPropagatingRequest{}, grpc.WaitForReady(true))
	if err != nil || len(prop.GetResources()) != 1 || prop.GetResources()[0].GetId() != owner.GetId() {
		t.Fatalf("propagating: %v %v", prop, err)
	}
	if _, err := rc.ListDependents(ctx, &reconcilev1.ListDependentsRequest{}); err == nil {
		t.Fatal("dependents of no uid answered")
	}
}
