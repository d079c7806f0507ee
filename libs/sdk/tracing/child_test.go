package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/no8s/no8s/libs/sdk/tracing"
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
