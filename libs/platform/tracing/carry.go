package tracing

import (
	"context"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context headers.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// w3c is the propagation every carrier below uses: W3C trace context.
var w3c propagation.TraceContext

// Encode returns the trace context of ctx's span as one string, to keep
// beside a record (the outbox row's trace_context): its traceparent, and
// its tracestate after a newline when it has one. "" when ctx holds no
// span (tracing off, or an untraced caller).
func Encode(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	if ts := c[HeaderTracestate]; ts != "" {
		return c[HeaderTraceparent] + "\n" + ts
	}
	return c[HeaderTraceparent]
}

// Decode returns ctx carrying the remote span context that s (Encode's)
// holds: the parent of the spans started from it. ctx unchanged when s is
// "" or not a valid traceparent.
func Decode(ctx context.Context, s string) context.Context {
	if s == "" {
		return ctx
	}
	parent, state, _ := strings.Cut(s, "\n")
	return w3c.Extract(ctx, propagation.MapCarrier{HeaderTraceparent: parent, HeaderTracestate: state})
}

// SetHeaders writes s (Encode's) into a NATS message's headers as
// traceparent and tracestate; nothing when s is "".
func SetHeaders(h nats.Header, s string) {
	if s == "" {
		return
	}
	parent, state, _ := strings.Cut(s, "\n")
	h.Set(HeaderTraceparent, parent)
	if state != "" {
		h.Set(HeaderTracestate, state)
	}
}

// FromHeaders returns ctx carrying the span context of a NATS message's
// traceparent and tracestate headers; ctx unchanged when it has none.
func FromHeaders(ctx context.Context, h nats.Header) context.Context {
	if h.Get(HeaderTraceparent) == "" {
		return ctx
	}
	return w3c.Extract(ctx, natsCarrier(h))
}

// natsCarrier carries trace context in a NATS message's headers. NATS
// keeps header names as they are written (traceparent), where
// propagation.HeaderCarrier, an HTTP one, would look for the canonical
// Traceparent.
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string { return nats.Header(c).Get(key) }
func (c natsCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }
func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// InjectHeaders writes the trace context of ctx's span into a NATS
// message's headers; nothing when ctx holds no span.
func InjectHeaders(ctx context.Context, h nats.Header) { SetHeaders(h, Encode(ctx)) }

// InjectHTTP writes the trace context of ctx's span into an outgoing HTTP
// request's headers as traceparent and tracestate; nothing when ctx holds
// no span.
func InjectHTTP(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		w3c.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// HeadersContext returns the trace context of a NATS message's traceparent
// and tracestate headers in Encode's form, to keep beside a request until
// it runs: "" when the message carries none (or an invalid one).
func HeadersContext(h nats.Header) string {
	if h.Get(HeaderTraceparent) == "" {
		return ""
	}
	// A conversion between two carriers: no operation, no deadline.
	return Encode(w3c.Extract(context.Background(), natsCarrier(h)))
}
