package tracing_test

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/no8s/no8s/libs/platform/tracing"
)

func TestStartChild(t *testing.T) {
	// Outside a span: nothing is started.
	ctx := context.Background()
	got, span := tracing.StartChild(ctx, "webhook x", trace.SpanKindClient)
	if got != ctx || span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatalf("outside a span: ctx changed or span %v recording", span.SpanContext())
	}
	span.End()

	// Inside one: a child of it, from the provider that made the parent.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	pctx, parent := tp.Tracer("test").Start(ctx, "parent")
	cctx, child := tracing.StartChild(pctx, "webhook x", trace.SpanKindClient)
	if trace.SpanFromContext(cctx) != child {
		t.Fatal("the returned context does not carry the child")
	}
	child.End()
	parent.End()
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "webhook x" || ended[0].SpanKind() != trace.SpanKindClient ||
		ended[0].Parent().SpanID() != parent.SpanContext().SpanID() || ended[0].SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("spans %+v: want the client child of parent", ended)
	}
}

func TestPropagating(t *testing.T) {
	var got []string
	rt := tracing.Propagating(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		got = append(got, req.Header.Get(tracing.HeaderTraceparent))
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
	}))
	// Outside a span: nothing added.
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	// Inside one: its traceparent, on a copy of the request.
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "sync")
	defer span.End()
	req = req.WithContext(ctx)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if len(got) != 2 || got[0] != "" || got[1] != want {
		t.Fatalf("traceparents sent %q, want [\"\" %q]", got, want)
	}
	if req.Header.Get(tracing.HeaderTraceparent) != "" {
		t.Fatal("the caller's request was changed")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
