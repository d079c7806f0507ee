package testkit_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/testkit"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// TestControlPlaneRunsWithIdentities: the kit's control plane has
// identities on; a worker the kit runs reaches the store as its own
// reconciler with exactly its types, so that the store refuses it a
// resource of another type; a connection without a certificate is refused.
func TestControlPlaneRunsWithIdentities(t *testing.T) {
	env, p := start(t)
	if env.CADir == "" {
		t.Fatal("no CA directory: the control plane runs without identities")
	}
	env.RunReconciler(t, p.engine("widgets"), widget)
	dir := env.ReconcilerIdentity(t, "widgets", widget)
	creds, err := identity.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id := creds.ID(); id.String() != "reconciler/widgets" || len(id.Types) != 1 || !id.Serves(widget.String()) {
		t.Fatalf("the worker's identity: %s %v", id, id.Types)
	}
	w := env.CreateResource(t, widget, "w1", map[string]any{})

	gadget := sdk.Type("Gadget", "v1")
	gadgets := reconcilev1.NewWorkerServiceClient(env.DialWorkers(t, "gadgets", gadget))
	_, err = gadgets.AcquireLease(t.Context(), &reconcilev1.AcquireLeaseRequest{ResourceId: w.ID, Holder: "gadgets/r1", LeaseSeconds: 2})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a Widget's lease as reconciler/gadgets: %v, want PermissionDenied", err)
	}

	plain, err := testkit.Dial(env.WorkerConn.Target())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := reconcilev1.NewWorkerServiceClient(plain).GetResource(t.Context(), &reconcilev1.GetResourceRequest{Key: &reconcilev1.GetResourceRequest_Id{Id: w.ID}}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext at the workers' door: %v, want Unavailable", err)
	}
}
