package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// BenchmarkServerUnaryTraced is what the server span of a traced gRPC
// call costs (the interceptor alone; the span recorded, then dropped by a
// provider without processors), with the metadata a server hands over
// for a call between the services. docs/design/performance.md ("Traces")
// quotes it.
func BenchmarkServerUnaryTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := New(tp)
	md := metadata.Pairs(":authority", "no8s-admission:7002", "content-type", "application/grpc", "user-agent", "grpc-go/1.79.0",
		"grpc-timeout", "29999m", HeaderTraceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx := metadata.NewIncomingContext(context.Background(), md)
	info := &grpc.UnaryServerInfo{FullMethod: "/no8s.admission.v1.AdmissionService/AdmitResource"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.serverUnary(ctx, nil, info, handler); err != nil {
			b.Fatal(err)
		}
	}
}
