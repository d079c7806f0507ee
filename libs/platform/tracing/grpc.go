package tracing

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// withTraceMetadata returns ctx whose outgoing gRPC metadata carries the
// trace context of ctx's span (traceparent, and tracestate when it has
// one); ctx itself outside any span.
func withTraceMetadata(ctx context.Context) context.Context {
	s := Encode(ctx)
	if s == "" {
		return ctx
	}
	parent, state, _ := strings.Cut(s, "\n")
	if state == "" {
		return metadata.AppendToOutgoingContext(ctx, HeaderTraceparent, parent)
	}
	return metadata.AppendToOutgoingContext(ctx, HeaderTraceparent, parent, HeaderTracestate, state)
}

// propagateUnary and propagateStream send the trace context of the span a
// call is made in, with the call.
func propagateUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(withTraceMetadata(ctx), method, req, reply, cc, opts...)
}

func propagateStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(withTraceMetadata(ctx), desc, cc, method, opts...)
}
