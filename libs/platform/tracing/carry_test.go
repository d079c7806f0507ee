package tracing_test

import (
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/no8s/no8s/libs/platform/tracing"
)

// A trace context written into NATS headers (as the relay and the
// scheduler write it) is read back whole, by FromHeaders and by
// HeadersContext; headers without one give none.
func TestNATSHeadersRoundTrip(t *testing.T) {
	const tc = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nvendor=x"
	h := nats.Header{}
	tracing.SetHeaders(h, tc)
	if got := h.Get(tracing.HeaderTraceparent); got == "" {
		t.Fatalf("no traceparent header written: %v", h)
	}
	if got := tracing.HeadersContext(h); got != tc {
		t.Fatalf("HeadersContext = %q, want %q", got, tc)
	}
	sc := trace.SpanContextFromContext(tracing.FromHeaders(t.Context(), h))
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsRemote() {
		t.Fatalf("FromHeaders: span context %v", sc)
	}
	if got := tracing.Encode(tracing.Decode(t.Context(), tc)); got != tc {
		t.Fatalf("Decode then Encode = %q, want %q", got, tc)
	}
	if got := tracing.HeadersContext(nats.Header{}); got != "" {
		t.Fatalf("no headers: %q", got)
	}
}
