package store_test

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store"
)

// startStore serves a store on a fresh database and returns a StoreService
// client on its main listener.
func startStore(t *testing.T) storev1.StoreServiceClient {
	t.Helper()
	st, _, _ := startStoreWithWorkers(t)
	return st
}

// startStoreWithWorkers is startStore that also serves the worker listener:
// it returns a WorkerService client there and the NATS connection the
// store uses.
func startStoreWithWorkers(t *testing.T) (storev1.StoreServiceClient, reconcilev1.WorkerServiceClient, *nats.Conn) {
	t.Helper()
	addr, workerAddr, nc := serveStore(t, nil)
	dial := func(addr string) *grpc.ClientConn {
		conn, err := grpcserver.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	return storev1.NewStoreServiceClient(dial(addr)), reconcilev1.NewWorkerServiceClient(dial(workerAddr)), nc
}

// serveStore serves a store on a fresh database with opts first on its
// gRPC servers, and returns the addresses of its main listener and of the
// worker listener, and the NATS connection the store uses.
func serveStore(t *testing.T, opts []grpc.ServerOption) (addr, workerAddr string, nc *nats.Conn) {
	t.Helper()
	ctx := t.Context()
	nc = testenv.Connect(t, testenv.NATS(t))
	cfg := store.DefaultConfig()
	cfg.DatabaseURL, cfg.MaxConns, cfg.ShutdownGrace, cfg.Stream.Memory = testenv.Database(t), 4, time.Second, true
	cfg.GRPCServerOptions = opts
	svc, err := store.New(ctx, cfg, nc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return lis
	}
	lis, wlis := listen(), listen()
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Serve(ctx, lis, wlis) }()
	t.Cleanup(func() { <-done })
	return lis.Addr().String(), wlis.Addr().String(), nc
}

// TestSpecWritesNeedTheSchemaRevision: a spec reaches the store only with
// the type revision admission validated it against; there is no "0 skips
// the check".
func TestSpecWritesNeedTheSchemaRevision(t *testing.T) {
	ctx := t.Context()
	st := startStore(t)
	typ, err := st.CreateResourceType(ctx, &storev1.CreateResourceTypeRequest{ResourceType: &storev1.ResourceType{
		Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	rev := typ.GetResourceType().GetResourceVersion()
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s without a schema revision: %v, want InvalidArgument", what, err)
		}
		pe := problem.As(grpcstatus.FromStatus(err))
		if pe == nil || len(pe.Fields) != 1 || pe.Fields[0].Path != "/schema_revision" {
			t.Fatalf("%s: %v, want the field /schema_revision", what, pe)
		}
	}
	widget := &storev1.Resource{Name: "w", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: []byte(`{"a":1}`)}
	_, err = st.CreateResource(ctx, &storev1.CreateResourceRequest{Resource: widget})
	refused("create", err)
	_, err = st.CreateResource(ctx, &storev1.CreateResourceRequest{Resource: widget, DryRun: true})
	refused("create (dry run)", err)

	created, err := st.CreateResource(ctx, &storev1.CreateResourceRequest{Resource: widget, SchemaRevision: rev})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetResource().GetId()
	_, err = st.UpdateResource(ctx, &storev1.UpdateResourceRequest{Id: id, Spec: []byte(`{"a":2}`)})
	refused("update of the spec", err)
	// Labels and annotations alone are no spec write.
	if _, err := st.UpdateResource(ctx, &storev1.UpdateResourceRequest{Id: id,
		Labels: &storev1.StringMap{Entries: map[string]string{"tier": "db"}}}); err != nil {
		t.Fatalf("label update: %v", err)
	}
	got, err := st.UpdateResource(ctx, &storev1.UpdateResourceRequest{Id: id, Spec: []byte(`{"a":2}`), SchemaRevision: rev})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetResource().GetGeneration() != 2 {
		t.Fatalf("generation %d, want 2 (one spec change)", got.GetResource().GetGeneration())
	}
}
