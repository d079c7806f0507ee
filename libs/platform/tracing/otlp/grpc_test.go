package otlp_test

import (
	"context"
	"log/slog"
	"net"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/platform/tracing/otlp"
	"github.com/no8s/no8s/libs/platform/tracing/otlp/tracingtest"
)

// A gRPC call made inside a span is, on the server, a server span that is
// that span's child (the caller records none of its own); a call made
// outside any span records nothing on either side (background calls start
// no trace).
func TestGRPCTracesOnlyCallsInsideATrace(t *testing.T) {
	rcv := tracingtest.Start(t)
	t.Setenv(tracing.EnvEndpoint, rcv.GRPCEndpoint)
	t.Setenv(tracing.EnvProtocol, tracing.ProtocolGRPC)
	t.Setenv("OTEL_SERVICE_NAME", "")
	tr, err := otlp.Start(context.Background(), "no8s-test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(tr.GRPCServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), append(tr.GRPCDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)

	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	ctx, span := tr.Tracer("test").Start(context.Background(), "operation")
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	span.End()
	// The server's span ends after its answer was sent: stop the server
	// (which waits for its handlers) before the last spans are flushed.
	srv.GracefulStop()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Shutdown returns once the exporter's last batch is answered: the
	// receiver holds every span recorded, none can come later.
	spans := rcv.Spans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2 (the operation and its call's server span; none for the untraced call):\n%s", len(spans), tracingtest.Describe(spans))
	}
	byKind := map[tracepb.Span_SpanKind]tracingtest.Span{}
	for _, s := range spans {
		byKind[s.Kind] = s
	}
	op, server := byKind[tracepb.Span_SPAN_KIND_INTERNAL], byKind[tracepb.Span_SPAN_KIND_SERVER]
	if server.ParentID != op.SpanID || server.TraceID != op.TraceID || op.TraceID == "" {
		t.Fatalf("parent links wrong:\n%s", tracingtest.Describe(spans))
	}
}
