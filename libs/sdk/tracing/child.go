package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of the spans StartChild starts.
const Scope = "github.com/no8s/no8s"

// StartChild starts a span named name as a child of ctx's span, with the
// tracer provider that made that span, so that code deep in a call (an
// outgoing webhook call, say) traces without being handed a *Tracing. It
// records nothing outside a recording span: the span returned is then
// ctx's own non-recording one, and ending it does nothing.
func StartChild(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}
