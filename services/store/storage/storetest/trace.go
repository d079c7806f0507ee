package storetest

// The trace context of a change through the outbox: written with the row
// by the commit path, read by the relay, published in the event's headers
// and continued by the relay's publish span.

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/storage"
)

// TracedContext returns ctx inside a sampled remote span with fixed ids,
// as a traced request reaches the store, and that span's traceparent.
func TracedContext(ctx context.Context, traceID, spanID byte) (context.Context, string) {
	var tid trace.TraceID
	var sid trace.SpanID
	for i := range tid {
		tid[i] = traceID
	}
	for i := range sid {
		sid[i] = spanID
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc), "00-" + tid.String() + "-" + sid.String() + "-01"
}

// testOutboxKeepsTraceContext: a change committed inside a span keeps the
// span's traceparent on its outbox row, one committed without a span none;
// the relay publishes each event with the row's context in its headers,
// and with a tracer, a publish span that is the change's span's child and
// the event's new parent.
func testOutboxKeepsTraceContext(t *testing.T, open Opener) {
	e := newRelayEnv(t, open, storage.Options{})
	ctx := t.Context()
	traced, parent := TracedContext(ctx, 0xab, 0xcd)
	ids := map[int64]string{}
	for _, c := range []struct {
		ctx  context.Context
		name string
	}{{traced, "traced"}, {ctx, "plain"}} {
		r, err := e.db.Store.CreateResource(c.ctx, storage.CreateResourceRequest{Resource: resource.Resource{
			ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: c.name, Spec: []byte(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		ids[r.ID] = c.name
	}
	st, err := e.db.Log.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := e.db.Log.ReadOutbox(ctx, 0, st.Revision, 100)
	if err != nil {
		t.Fatal(err)
	}
	byName, revOf := map[string]string{}, map[string]int64{}
	for _, r := range rows {
		byName[ids[r.ResourceID]] = r.TraceContext
		revOf[ids[r.ResourceID]] = r.Revision
	}
	if byName["traced"] != parent || byName["plain"] != "" {
		t.Fatalf("outbox trace contexts %q, want traced=%s and plain empty", byName, parent)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	runCtx, cancel := context.WithCancel(ctx)
	r := outbox.New(e.db.Log, e.nc, e.js, eventstream.DefaultStreamConfig(),
		outbox.Config{PollInterval: 10 * time.Millisecond, LeaderRetry: 20 * time.Millisecond, Tracer: tp.Tracer("relay")}, e.log)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	e.waitPublished(20 * time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("relay: %v", err)
	}

	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d publish spans, want 1 (the traced change's)", len(spans))
	}
	pub := spans[0]
	if pub.Parent().TraceID().String() != traceIDOf(parent) || "00-"+pub.Parent().TraceID().String()+"-"+pub.Parent().SpanID().String()+"-01" != parent {
		t.Fatalf("publish span's parent %s/%s, want the change's %s", pub.Parent().TraceID(), pub.Parent().SpanID(), parent)
	}
	for name, want := range map[string]string{
		"traced": "00-" + pub.SpanContext().TraceID().String() + "-" + pub.SpanContext().SpanID().String() + "-01",
		"plain":  "",
	} {
		m := publishedRevision(t, e.stream(), revOf[name])
		if got := m.Header.Get(tracing.HeaderTraceparent); got != want {
			t.Errorf("event of %s: traceparent %q, want %q", name, got, want)
		}
	}
}

// publishedRevision returns the message that published revision rev.
func publishedRevision(t *testing.T, s jetstream.Stream, rev int64) *jetstream.RawStreamMsg {
	t.Helper()
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			continue
		}
		if m.Header.Get(jetstream.MsgIDHeader) == eventstream.MsgID(rev) {
			return m
		}
	}
	t.Fatalf("revision %d is not in the stream", rev)
	return nil
}

func traceIDOf(traceparent string) string {
	if len(traceparent) < 35 {
		return ""
	}
	return traceparent[3:35]
}
