package tracing

import (
	"context"
	"net/http"

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

// Propagating returns rt sending the trace context of each request's
// context (W3C traceparent and tracestate) without a span of its own: the
// server's span is the child of the span the request was made in. A
// request made outside a span goes out unchanged.
func Propagating(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return propagating{rt}
}

type propagating struct{ rt http.RoundTripper }

func (p propagating) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return p.rt.RoundTrip(req)
	}
	out := req.Clone(req.Context()) // a RoundTripper leaves its request as it found it
	InjectHTTP(req.Context(), out.Header)
	return p.rt.RoundTrip(out)
}

// CloseIdleConnections closes the idle connections of the transport
// beneath, as http.Client.CloseIdleConnections asks.
func (p propagating) CloseIdleConnections() {
	if c, ok := p.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
