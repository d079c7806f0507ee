package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
)

// insideTrace passes to its stats.Handler only the calls that belong to a
// trace already: on a client, calls made inside a span; on a server, calls
// whose metadata carries a traceparent. The services' background calls
// (the scheduler's relist, a worker's leases and completions, registry
// renewals) then start no trace of their own: a change is one trace from
// its request, not thousands of one-span traces around it.
type insideTrace struct {
	stats.Handler
	server bool
}

type skipRPC struct{}

// TagRPC tags a traced call for the handler, and marks an untraced one to
// be skipped.
func (h insideTrace) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if !h.traced(ctx) {
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

func (h insideTrace) traced(ctx context.Context) bool {
	if !h.server {
		return trace.SpanContextFromContext(ctx).IsValid()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(HeaderTraceparent)) > 0
}
