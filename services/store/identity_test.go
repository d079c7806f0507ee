package store_test

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/platform/identity"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/authz/authztest"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// TestIdentitiesOnTheStoresDoors: with identities on, the store's main
// listener answers its methods only to the services whose job they are, and
// the workers' door holds a reconciler to the types its certificate claims
// and to its own name: reconciler a (A/v1) cannot lease a B/v1 resource,
// lease as b, or renew, complete or change finalizers under b's lease, nor
// campaign for b's leader lease; nothing it was refused is written.
func TestIdentitiesOnTheStoresDoors(t *testing.T) {
	ctx := t.Context()
	now := time.Now()
	ca, err := identityca.New(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(id identity.ID) *identity.Credentials { return authztest.Credentials(t, ca, id, now) }
	storeCreds := creds(identity.ServiceID(identity.Store))
	addr, workerAddr, _ := serveStore(t, authz.ServerOptions(storeCreds, authz.Enforce, slog.New(slog.NewTextHandler(io.Discard, nil))))
	dial := func(addr string, c *identity.Credentials) *grpc.ClientConn { return dialStore(t, addr, c) }
	a := creds(identity.ID{Kind: identity.Reconciler, Name: "a", Types: []string{"A/v1"}})
	b := creds(identity.ID{Kind: identity.Reconciler, Name: "b", Types: []string{"B/v1"}})
	gw := storev1.NewStoreServiceClient(dial(addr, creds(identity.ServiceID(identity.Gateway))))
	wa := reconcilev1.NewWorkerServiceClient(dial(workerAddr, a))
	wb := reconcilev1.NewWorkerServiceClient(dial(workerAddr, b))

	create := func(typ string) *storev1.Resource {
		t.Helper()
		rt, err := gw.CreateResourceType(ctx, &storev1.CreateResourceTypeRequest{ResourceType: &storev1.ResourceType{
			Name: typ, Version: "v1", Schema: []byte(`{"type":"object"}`)}})
		if err != nil {
			t.Fatalf("the gateway creates type %s: %v", typ, err)
		}
		r, err := gw.CreateResource(ctx, &storev1.CreateResourceRequest{SchemaRevision: rt.GetResourceType().GetResourceVersion(),
			Resource: &storev1.Resource{Name: strings.ToLower(typ), ResourceTypeName: typ, ResourceTypeVersion: "v1", Spec: []byte(`{}`)}})
		if err != nil {
			t.Fatalf("the gateway creates a %s: %v", typ, err)
		}
		return r.GetResource()
	}
	ra, rb := create("A"), create("B")
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", what, err)
		}
	}

	// The main listener: the store's methods are the services'.
	mainA := dial(addr, a)
	_, err = storev1.NewStoreServiceClient(mainA).CreateResource(ctx, &storev1.CreateResourceRequest{Resource: &storev1.Resource{Name: "x", ResourceTypeName: "A", ResourceTypeVersion: "v1", Spec: []byte(`{}`)}})
	refused("a reconciler creates through the main listener", err)
	_, err = reconcilev1.NewReconcileServiceClient(mainA).BecomeScheduler(ctx, &reconcilev1.BecomeSchedulerRequest{Holder: "evil", LeaseSeconds: 3600})
	refused("a reconciler becomes the scheduler", err)
	_, err = reconcilev1.NewReconcileServiceClient(dial(addr, creds(identity.ServiceID(identity.Gateway)))).BecomeScheduler(ctx, &reconcilev1.BecomeSchedulerRequest{Holder: "evil", LeaseSeconds: 3600})
	refused("the gateway becomes the scheduler", err)

	// The workers' door: types and names.
	_, err = wa.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: rb.GetId(), Holder: "a/r1", LeaseSeconds: 30})
	refused("a leases a B/v1 resource", err)
	_, err = wa.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: ra.GetId(), Holder: "b/r1", LeaseSeconds: 30})
	refused("a leases as b", err)
	lb, err := wb.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: rb.GetId(), Holder: "b/r1", LeaseSeconds: 30})
	if err != nil {
		t.Fatalf("b leases its own: %v", err)
	}
	_, err = wa.RenewLease(ctx, &reconcilev1.RenewLeaseRequest{ResourceId: rb.GetId(), LeaseEpoch: lb.GetLeaseEpoch(), LeaseSeconds: 30})
	refused("a renews b's lease", err)
	_, err = wa.UpdateFinalizers(ctx, &reconcilev1.UpdateFinalizersRequest{ResourceId: rb.GetId(), LeaseEpoch: lb.GetLeaseEpoch(), Remove: []string{"reconciler.no8s.io/b"}})
	refused("a changes finalizers under b's lease", err)
	_, err = wa.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: rb.GetId(), LeaseEpoch: lb.GetLeaseEpoch(),
		Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS, StatusMessage: "PWNED", History: &reconcilev1.HistoryEntry{}})
	refused("a completes b's resource", err)
	_, err = wa.CampaignLeader(ctx, &reconcilev1.CampaignLeaderRequest{Name: "b", Holder: "b/x", LeaseSeconds: 30})
	refused("a campaigns for b's leader lease", err)

	got, err := gw.GetResource(ctx, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Id{Id: rb.GetId()}})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetResource().GetStatusMessage() == "PWNED" || got.GetResource().GetStatus() == "ready" {
		t.Fatalf("a refused completion was written: %v", got.GetResource())
	}

	// Each acts within its own rights.
	la, err := wa.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: ra.GetId(), Holder: "a/r1", LeaseSeconds: 30})
	if err != nil {
		t.Fatalf("a leases its own: %v", err)
	}
	if _, err := wa.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: ra.GetId(), LeaseEpoch: la.GetLeaseEpoch(),
		Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS, History: &reconcilev1.HistoryEntry{}}); err != nil {
		t.Fatalf("a completes its own: %v", err)
	}
	if _, err := wa.CampaignLeader(ctx, &reconcilev1.CampaignLeaderRequest{Name: "a", Holder: "a/x", LeaseSeconds: 30}); err != nil {
		t.Fatalf("a campaigns for its own leader lease: %v", err)
	}

	// registry-sync's service identity runs its worker as the reconciler
	// registry-sync, on its built-in types only.
	sync := reconcilev1.NewWorkerServiceClient(dial(workerAddr, creds(identity.ServiceID(identity.RegistrySync))))
	regType, err := gw.GetResourceType(ctx, &storev1.GetResourceTypeRequest{Name: tenancy.RegistryType, Version: tenancy.Version})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := gw.CreateResource(ctx, &storev1.CreateResourceRequest{SchemaRevision: regType.GetResourceType().GetResourceVersion(),
		Resource: &storev1.Resource{Name: "reg", ResourceTypeName: tenancy.RegistryType, ResourceTypeVersion: tenancy.Version, Spec: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sync.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: rb.GetId(), Holder: tenancy.SyncLease + "/r1", LeaseSeconds: 30})
	refused("registry-sync leases a B/v1 resource", err)
	_, err = sync.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: reg.GetResource().GetId(), Holder: "b/r1", LeaseSeconds: 30})
	refused("registry-sync leases as b", err)
	ls, err := sync.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: reg.GetResource().GetId(), Holder: tenancy.SyncLease + "/r1", LeaseSeconds: 30})
	if err != nil {
		t.Fatalf("registry-sync leases a registry: %v", err)
	}
	if _, err := sync.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: reg.GetResource().GetId(), LeaseEpoch: ls.GetLeaseEpoch(),
		Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS, History: &reconcilev1.HistoryEntry{}}); err != nil {
		t.Fatalf("registry-sync completes a registry: %v", err)
	}
}

// TestTokenServiceIsTheGatewaysOnly: with identities on, TokenService on
// the store's main listener answers the gateway only: every other service
// and a reconciler are refused LookupToken (which answers a secret's hash)
// and CreateToken, and nothing they tried was written.
func TestTokenServiceIsTheGatewaysOnly(t *testing.T) {
	ctx := t.Context()
	now := time.Now()
	ca, err := identityca.New(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(id identity.ID) *identity.Credentials { return authztest.Credentials(t, ca, id, now) }
	addr, _, _ := serveStore(t, authz.ServerOptions(creds(identity.ServiceID(identity.Store)), authz.Enforce, slog.New(slog.NewTextHandler(io.Discard, nil))))
	tokens := func(id identity.ID) storev1.TokenServiceClient {
		return storev1.NewTokenServiceClient(dialStore(t, addr, creds(id)))
	}
	gw := tokens(identity.ServiceID(identity.Gateway))
	hash := secretHash("s")
	if _, err := gw.CreateToken(ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{Id: "id1", Name: "laptop", Owner: "alice", SecretHash: hash}}); err != nil {
		t.Fatalf("the gateway creates a token: %v", err)
	}
	for _, id := range []identity.ID{
		identity.ServiceID(identity.Scheduler), identity.ServiceID(identity.Admission), identity.ServiceID(identity.RegistrySync),
		{Kind: identity.Reconciler, Name: "a", Types: []string{"A/v1"}},
	} {
		c := tokens(id)
		_, err := c.LookupToken(ctx, &storev1.LookupTokenRequest{Id: "id1"})
		if !authztest.RefusedByPolicy(status.Convert(err)) || status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s looks up a token: %v, want the policy's PermissionDenied", id, err)
		}
		_, err = c.CreateToken(ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{Id: "evil", Name: "evil", Owner: "admin", SecretHash: hash}})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s creates a token: %v, want PermissionDenied", id, err)
		}
	}
	got, err := gw.LookupToken(ctx, &storev1.LookupTokenRequest{Id: "id1"})
	if err != nil || got.GetToken().GetOwner() != "alice" || len(got.GetToken().GetSecretHash()) != len(hash) {
		t.Fatalf("the gateway looks up a token: %v %v", got.GetToken(), err)
	}
	if _, err := gw.LookupToken(ctx, &storev1.LookupTokenRequest{Id: "evil"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a refused create was written: %v", err)
	}
}

// TestAuditOnlyLetsAReconcilerPastTheStoresLimits: with the policy in
// audit-only mode the store's own limits on a reconciler identity (the
// type it leases, the lease it completes) log what they would refuse and
// let the call through, as the interceptors do; enforced, the same calls
// are refused (TestIdentitiesOnTheStoresDoors).
func TestAuditOnlyLetsAReconcilerPastTheStoresLimits(t *testing.T) {
	ctx := t.Context()
	now := time.Now()
	ca, err := identityca.New(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(id identity.ID) *identity.Credentials { return authztest.Credentials(t, ca, id, now) }
	var logs strings.Builder
	var mu sync.Mutex
	addr, workerAddr, _ := serveStore(t, authz.ServerOptions(creds(identity.ServiceID(identity.Store)), authz.AuditOnly,
		slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))))
	dial := func(addr string, c *identity.Credentials) *grpc.ClientConn { return dialStore(t, addr, c) }
	gw := storev1.NewStoreServiceClient(dial(addr, creds(identity.ServiceID(identity.Gateway))))
	rt, err := gw.CreateResourceType(ctx, &storev1.CreateResourceTypeRequest{ResourceType: &storev1.ResourceType{Name: "B", Version: "v1", Schema: []byte(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := gw.CreateResource(ctx, &storev1.CreateResourceRequest{SchemaRevision: rt.GetResourceType().GetResourceVersion(),
		Resource: &storev1.Resource{Name: "b", ResourceTypeName: "B", ResourceTypeVersion: "v1", Spec: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	wa := reconcilev1.NewWorkerServiceClient(dial(workerAddr, creds(identity.ID{Kind: identity.Reconciler, Name: "a", Types: []string{"A/v1"}})))
	l, err := wa.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: r.GetResource().GetId(), Holder: "a/r1", LeaseSeconds: 30})
	if err != nil {
		t.Fatalf("audit-only: a's lease on a B/v1 resource: %v, want it through", err)
	}
	if _, err := wa.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: r.GetResource().GetId(), LeaseEpoch: l.GetLeaseEpoch(),
		Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS, History: &reconcilev1.HistoryEntry{}}); err != nil {
		t.Fatalf("audit-only: a's completion on a B/v1 resource: %v, want it through", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, method := range []string{reconcilev1.WorkerService_AcquireLease_FullMethodName, reconcilev1.WorkerService_CompleteReconcile_FullMethodName} {
		if !strings.Contains(logs.String(), "would refuse") || !strings.Contains(logs.String(), method) {
			t.Errorf("audit-only: no 'would refuse' logged for %s:\n%s", method, logs.String())
		}
	}
}

// lockedWriter serialises writes of the store's goroutines into w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// dialStore connects to the store at addr as c's identity, closed when the
// test ends.
func dialStore(t *testing.T, addr string, c *identity.Credentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpcserver.Dial(addr, authz.DialOptions(c, identity.Store)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
