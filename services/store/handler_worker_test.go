package store_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/sdk/registry"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// TestWorkerDoorDeclaredFinalizers: on the worker door, the reconciler
// whose registry claim on the type declares a finalizer (an action
// plugin's, github_actions) may add and remove it under its lease; another
// reconciler may not, nor may the declaring one once its claim is gone, and
// a finalizer nobody declared stays refused.
func TestWorkerDoorDeclaredFinalizers(t *testing.T) {
	ctx := t.Context()
	st, wc, nc := startStoreWithWorkers(t)
	typ, err := st.CreateResourceType(ctx, &storev1.CreateResourceTypeRequest{ResourceType: &storev1.ResourceType{
		Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	created, err := st.CreateResource(ctx, &storev1.CreateResourceRequest{SchemaRevision: typ.GetResourceType().GetResourceVersion(),
		Resource: &storev1.Resource{Name: "w", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: []byte(`{}`),
			Finalizers: []string{"github_actions", "example.com/hold"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetResource().GetId()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := registry.Ensure(ctx, js, subjects.RegistryTTL)
	if err != nil {
		t.Fatal(err)
	}
	claim := subjects.TypeClaim{Reconciler: "gh", Finalizers: []string{"github_actions"}}
	if _, err := kv.Put(ctx, subjects.TypeKey("Widget", "v1"), claim.Encode()); err != nil {
		t.Fatal(err)
	}

	lease := func(holder string) int64 {
		t.Helper()
		l, err := wc.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: id, Holder: holder, LeaseSeconds: 30})
		if err != nil {
			t.Fatalf("lease for %s: %v", holder, err)
		}
		return l.GetLeaseEpoch()
	}
	release := func(epoch int64) {
		t.Helper()
		if _, err := wc.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: id, LeaseEpoch: epoch,
			Outcome: reconcilev1.Outcome_OUTCOME_REQUEUE, RequeueAfterSeconds: 60, History: &reconcilev1.HistoryEntry{}}); err != nil {
			t.Fatal(err)
		}
	}
	change := func(epoch int64, add, remove []string) (codes.Code, []string) {
		t.Helper()
		res, err := wc.UpdateFinalizers(ctx, &reconcilev1.UpdateFinalizersRequest{ResourceId: id, LeaseEpoch: epoch, Add: add, Remove: remove})
		return status.Code(err), res.GetResource().GetFinalizers()
	}

	gh := lease("gh/replica-1")
	if code, fins := change(gh, nil, []string{"github_actions"}); code != codes.OK || slices.Contains(fins, "github_actions") {
		t.Fatalf("the declaring reconciler removes its declared finalizer: %v %v", code, fins)
	}
	if code, fins := change(gh, []string{"github_actions"}, nil); code != codes.OK || !slices.Contains(fins, "github_actions") {
		t.Fatalf("and adds it back: %v %v", code, fins)
	}
	if code, _ := change(gh, nil, []string{"example.com/hold"}); code != codes.PermissionDenied {
		t.Fatalf("a finalizer nobody declared: %v, want PermissionDenied", code)
	}
	// In the completion too.
	_, err = wc.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: id, LeaseEpoch: gh,
		Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS, RemoveFinalizers: []string{"example.com/hold"}, History: &reconcilev1.HistoryEntry{}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("completion removing a finalizer nobody declared: %v", err)
	}
	release(gh)

	other := lease("other/1")
	if code, _ := change(other, nil, []string{"github_actions"}); code != codes.PermissionDenied {
		t.Fatalf("another reconciler removes github_actions: %v, want PermissionDenied", code)
	}
	release(other)

	if err := kv.Delete(ctx, subjects.TypeKey("Widget", "v1")); err != nil {
		t.Fatal(err)
	}
	gh = lease("gh/replica-1")
	if code, _ := change(gh, nil, []string{"github_actions"}); code != codes.PermissionDenied {
		t.Fatalf("without its claim: %v, want PermissionDenied", code)
	}
	if _, err := kv.Put(ctx, subjects.TypeKey("Widget", "v1"), claim.Encode()); err != nil {
		t.Fatal(err)
	}
	_, err = wc.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: id, LeaseEpoch: gh,
		Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS, RemoveFinalizers: []string{"github_actions"}, History: &reconcilev1.HistoryEntry{}})
	if err != nil {
		t.Fatalf("completion removing the declared finalizer: %v", err)
	}
	got, err := st.GetResource(ctx, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Id{Id: id}})
	if err != nil || slices.Contains(got.GetResource().GetFinalizers(), "github_actions") {
		t.Fatalf("finalizers after the completion: %v %v", got.GetResource().GetFinalizers(), err)
	}
}
