package authz_test

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/platform/identity"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/authz/authztest"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite docs/security.md's generated table")

// servedMethods is authztest.Served, checked against the descriptors of
// the services the processes register.
func servedMethods(t *testing.T) map[string]protoreflect.MethodDescriptor {
	t.Helper()
	out := authztest.Served()
	for _, d := range []*grpc.ServiceDesc{&storev1.StoreService_ServiceDesc, &storev1.TokenService_ServiceDesc, &reconcilev1.ReconcileService_ServiceDesc,
		&reconcilev1.WorkerService_ServiceDesc, &admissionv1.AdmissionService_ServiceDesc, &healthpb.Health_ServiceDesc,
		&reflectionv1.ServerReflection_ServiceDesc, &reflectionv1alpha.ServerReflection_ServiceDesc} {
		for _, m := range slices.Concat(methodNames(d.Methods), streamNames(d.Streams)) {
			if _, ok := out["/"+d.ServiceName+"/"+m]; !ok {
				t.Fatalf("method %s/%s of a served descriptor is not found", d.ServiceName, m)
			}
		}
	}
	return out
}

func methodNames(ms []grpc.MethodDesc) (out []string) {
	for _, m := range ms {
		out = append(out, m.MethodName)
	}
	return out
}

func streamNames(ss []grpc.StreamDesc) (out []string) {
	for _, s := range ss {
		out = append(out, s.StreamName)
	}
	return out
}

func TestPolicyNamesEveryServedMethodAndNothingElse(t *testing.T) {
	p := authz.Policy()
	served := servedMethods(t)
	if len(served) < 40 {
		t.Fatalf("found only %d served methods: the registry walk misses services", len(served))
	}
	for m := range served {
		r, ok := p[m]
		if !ok {
			t.Errorf("method %s is in no rule of the policy: add it to authz.Policy", m)
			continue
		}
		if r.Why == "" {
			t.Errorf("the rule of %s says not what it is for", m)
		}
		if !r.Anyone && !r.Reconcilers && len(r.Services) == 0 {
			t.Errorf("the rule of %s allows nobody", m)
		}
	}
	for m := range p {
		if _, ok := served[m]; !ok {
			t.Errorf("the policy names %s, which no service serves", m)
		}
	}
	for m, r := range p {
		for _, s := range r.Services {
			if !slices.Contains(identity.Services(), s) {
				t.Errorf("the rule of %s names %q, not a service", m, s)
			}
		}
	}
}

func TestSecurityGuideTableIsThePolicy(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "security.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := authz.ReplaceTable(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != string(doc) {
		t.Fatal("docs/security.md's table of who may call each gRPC method is not the policy: run make generate")
	}
}

func TestReplaceTableNeedsMarkers(t *testing.T) {
	if _, err := authz.ReplaceTable("# no table here\n"); err == nil {
		t.Fatal("a document without markers was accepted")
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]authz.Mode{"": authz.Enforce, "enforce": authz.Enforce, "audit-only": authz.AuditOnly} {
		if got, err := authz.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := authz.ParseMode("permissive"); err == nil || !strings.Contains(err.Error(), "audit-only") {
		t.Errorf("ParseMode(permissive): %v", err)
	}
}

// installation is a CA and the credentials of every identity the matrix
// calls from.
type installation struct {
	ca    *identityca.CA
	creds map[string]*identity.Credentials // by identity.ID.String()
	ids   []identity.ID
}

func newInstallation(t *testing.T) *installation {
	t.Helper()
	now := time.Now()
	ca, err := identityca.New(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	in := &installation{ca: ca, creds: map[string]*identity.Credentials{}}
	for _, s := range identity.Services() {
		in.ids = append(in.ids, identity.ServiceID(s))
	}
	in.ids = append(in.ids,
		identity.ID{Kind: identity.Reconciler, Name: "noop", Types: []string{"Noop/v1"}},
		identity.ID{Kind: identity.Client, Name: "ci"})
	for _, id := range in.ids {
		in.creds[id.String()] = authztest.Credentials(t, ca, id, now)
	}
	return in
}

// workers is a WorkerService whose GetResource refuses resource 2 through
// Deny.
type workers struct {
	reconcilev1.UnimplementedWorkerServiceServer
}

func (workers) GetResource(ctx context.Context, req *reconcilev1.GetResourceRequest) (*reconcilev1.GetResourceResponse, error) {
	if id, ok := authz.Caller(ctx); ok && req.GetId() == 2 {
		if err := authz.Deny(ctx, reconcilev1.WorkerService_GetResource_FullMethodName, "resource %d is not %s's", req.GetId(), id.Name); err != nil {
			return nil, err
		}
	}
	return &reconcilev1.GetResourceResponse{}, nil
}

// serve starts a gRPC server over TLS with the store's identity, every
// no8s service registered (unimplemented but for workers.GetResource), the
// health service and reflection, authorised in mode; it returns the
// address and the log.
func (in *installation) serve(t *testing.T, mode authz.Mode) (string, *testenv.LogBuffer) {
	t.Helper()
	logs := &testenv.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	store := in.creds[identity.ServiceID(identity.Store).String()]
	opts := append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(store.ServerTLS()))}, authz.New(mode, log).ServerOptions()...)
	srv, hs := grpcserver.New(log, opts...)
	storev1.RegisterStoreServiceServer(srv, storev1.UnimplementedStoreServiceServer{})
	storev1.RegisterTokenServiceServer(srv, storev1.UnimplementedTokenServiceServer{})
	reconcilev1.RegisterReconcileServiceServer(srv, reconcilev1.UnimplementedReconcileServiceServer{})
	reconcilev1.RegisterWorkerServiceServer(srv, workers{})
	admissionv1.RegisterAdmissionServiceServer(srv, admissionv1.UnimplementedAdmissionServiceServer{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- grpcserver.Serve(ctx, srv, hs, lis, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return lis.Addr().String(), logs
}

// dialAs connects to addr presenting id's certificate (nil: none).
func (in *installation) dialAs(t *testing.T, addr string, c *identity.Credentials) *grpc.ClientConn {
	t.Helper()
	var tc credentials.TransportCredentials
	if c != nil {
		tc = credentials.NewTLS(c.ClientTLS(identity.ServiceID(identity.Store)))
	} else {
		// A client with the CA but no certificate of its own.
		anon := in.creds[identity.ServiceID(identity.Gateway).String()].ClientTLS(identity.ServiceID(identity.Store))
		anon.GetClientCertificate = nil
		tc = credentials.NewTLS(anon)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestMatrixEveryMethodFromEveryIdentity calls every served method from
// every identity over real TLS: a cell the policy refuses answers
// PermissionDenied and reaches no handler; a cell it allows reaches the
// handler (Unimplemented from the bare services here, an answer from the
// health service and reflection).
func TestMatrixEveryMethodFromEveryIdentity(t *testing.T) {
	in := newInstallation(t)
	addr, logs := in.serve(t, authz.Enforce)
	p := authz.Policy()
	served := servedMethods(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range in.ids {
		conn := in.dialAs(t, addr, in.creds[id.String()])
		for _, m := range authztest.Sorted(served) {
			got := authztest.Call(ctx, conn, m, served[m])
			allowed := p[m].Allows(id)
			switch {
			case allowed && (got.Code() == codes.PermissionDenied || got.Code() == codes.Unauthenticated):
				t.Errorf("%s → %s: %v, want the call to reach the handler", id, m, got.Err())
			case !allowed && !authztest.RefusedByPolicy(got):
				t.Errorf("%s → %s: %v, want the policy's PermissionDenied", id, m, got.Err())
			}
		}
	}
	if !strings.Contains(logs.String(), "refused") {
		t.Error("no refusal was logged")
	}
}

func TestCallerWithoutCertificateRefusedAtTheDoor(t *testing.T) {
	in := newInstallation(t)
	addr, _ := in.serve(t, authz.Enforce)
	conn := in.dialAs(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := storev1.NewStoreServiceClient(conn).CreateResource(ctx, &storev1.CreateResourceRequest{})
	if code := status.Code(err); code != codes.Unavailable {
		t.Fatalf("a call without a client certificate: %v, want the handshake refused (Unavailable)", err)
	}
}

func TestDenyRefusesWhatAnAllowedMethodReaches(t *testing.T) {
	in := newInstallation(t)
	addr, _ := in.serve(t, authz.Enforce)
	conn := in.dialAs(t, addr, in.creds["reconciler/noop"])
	wc := reconcilev1.NewWorkerServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := wc.GetResource(ctx, &reconcilev1.GetResourceRequest{Key: &reconcilev1.GetResourceRequest_Id{Id: 1}}); err != nil {
		t.Fatalf("its own: %v", err)
	}
	_, err := wc.GetResource(ctx, &reconcilev1.GetResourceRequest{Key: &reconcilev1.GetResourceRequest_Id{Id: 2}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "reconciler/noop: resource 2 is not noop's") {
		t.Fatalf("another's: %v, want PermissionDenied naming the caller and why", err)
	}
}

func TestAuditOnlyLetsThroughAndLogsWhatItWouldRefuse(t *testing.T) {
	in := newInstallation(t)
	addr, logs := in.serve(t, authz.AuditOnly)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := in.dialAs(t, addr, in.creds["reconciler/noop"])
	_, err := reconcilev1.NewReconcileServiceClient(conn).BecomeScheduler(ctx, &reconcilev1.BecomeSchedulerRequest{Holder: "evil"})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("BecomeScheduler from a reconciler in audit-only mode: %v, want it through to the (bare) handler", err)
	}
	if _, err := reconcilev1.NewWorkerServiceClient(conn).GetResource(ctx, &reconcilev1.GetResourceRequest{Key: &reconcilev1.GetResourceRequest_Id{Id: 2}}); err != nil {
		t.Fatalf("a Deny in audit-only mode: %v, want the call to go on", err)
	}
	for _, want := range []string{
		`authz audit: would refuse" identity=reconciler/noop method=/no8s.reconcile.v1.ReconcileService/BecomeScheduler`,
		`authz audit: would refuse" identity=reconciler/noop method=/no8s.reconcile.v1.WorkerService/GetResource reason="resource 2 is not noop's"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}

// The users service identities' writes reach webhooks as: the garbage
// collector's only under its own lease.
func TestSystemUser(t *testing.T) {
	for _, c := range []struct {
		id    identity.ID
		lease string
		want  string
	}{
		{identity.ServiceID(identity.Scheduler), fence.GarbageCollectorLease, "system:no8s:garbage-collector"},
		{identity.ServiceID(identity.Scheduler), "", "system:no8s:scheduler"},
		{identity.ServiceID(identity.RegistrySync), "registry-sync", "system:no8s:registry-sync"},
		{identity.ServiceID(identity.RegistrySync), fence.GarbageCollectorLease, "system:no8s:registry-sync"},
		{identity.ID{Kind: identity.Reconciler, Name: "noop"}, "", "system:no8s:reconciler:noop"},
		{identity.ID{Kind: identity.Client, Name: "ci"}, fence.GarbageCollectorLease, "system:no8s:client:ci"},
	} {
		if got := authz.SystemUser(c.id, c.lease); got != c.want {
			t.Errorf("SystemUser(%s, %q) = %q, want %q", c.id, c.lease, got, c.want)
		}
	}
}
