package tracing

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
)

// insideTrace passes to its server stats.Handler only the calls whose
// metadata carries a traceparent: calls that belong to a trace already.
// The services' background calls (the scheduler's relist, a worker's
// lease renewals, registry renewals) then start no trace of their own: a
// change is one trace from its request, not thousands of one-span traces
// around it.
type insideTrace struct {
	stats.Handler
}

type skipRPC struct{}

// TagRPC tags a traced call for the handler, and marks an untraced one to
// be skipped.
func (h insideTrace) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(HeaderTraceparent)) == 0 {
		return context.WithValue(ctx, skipRPC{}, true)
	}
	return h.Handler.TagRPC(ctx, info)
}

// HandleRPC passes the call's events to the handler unless it is skipped.
func (h insideTrace) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if ctx.Value(skipRPC{}) != nil {
		return
	}
	h.Handler.HandleRPC(ctx, s)
}

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
