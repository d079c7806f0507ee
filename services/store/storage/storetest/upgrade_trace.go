package storetest

// The in-place upgrade to the outbox's trace context column. Each
// backend's test builds a database with the migrations of the release
// before it (PostgreSQL up to 00011, SQLite up to 00007), writes into it,
// with that release's SQL, the unpublished outbox rows OldOutboxRows
// returns, migrates it up and hands it to CheckTraceContextUpgraded.

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/storage"
)

// OldOutboxRows returns outbox rows as the release before trace contexts
// wrote them, one per revision of revs: the creation of a Widget/v1 in the
// default namespace each, without a trace context.
func OldOutboxRows(revs []int64, now time.Time) ([]storage.OutboxRow, error) {
	rows := make([]storage.OutboxRow, 0, len(revs))
	for i, rev := range revs {
		r := &resource.Resource{ID: int64(i + 1), UID: uuid.NewString(), Namespace: names.DefaultNamespace, Name: "old-" + string(rune('a'+i)),
			ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: []byte(`{}`), Status: resource.StatusPending, Generation: 1,
			Phase: resource.PhaseProgressing, ResourceVersion: rev, CreatedAt: now, UpdatedAt: now}
		r.Normalize()
		doc, err := resource.Marshal(r)
		if err != nil {
			return nil, err
		}
		payload, err := envelope.Encode(envelope.Event{Revision: rev, Type: envelope.Created, Resource: r, ResourceJSON: doc, Timestamp: now})
		if err != nil {
			return nil, err
		}
		rows = append(rows, storage.OutboxRow{Revision: rev, ResourceID: r.ID, EventType: envelope.Created,
			Subject: envelope.Subject(r.ResourceTypeName, r.ResourceTypeVersion), Payload: payload, CreatedAt: now})
	}
	return rows, nil
}

// CheckTraceContextUpgraded checks a database the release before trace
// contexts left holding the unpublished outbox rows old (in revision
// order), once migrated: the rows read back unchanged and without a trace
// context; changes made now, each inside a span, keep their trace
// contexts; a relay (with a tracer) publishes the old rows first, in
// order, each exactly as before (its payload, the same headers, no
// traceparent or tracestate, no publish span), then the new ones, each
// with a traceparent in the trace of its change, naming its publish span.
func CheckTraceContextUpgraded(t *testing.T, b storage.Backend, old []storage.OutboxRow) {
	t.Helper()
	rows := readAllOutbox(t, b)
	if len(rows) != len(old) {
		t.Fatalf("outbox after the upgrade: %d rows, want %d", len(rows), len(old))
	}
	for i, r := range rows {
		o := old[i]
		if r.Revision != o.Revision || r.ResourceID != o.ResourceID || r.EventType != o.EventType || r.Subject != o.Subject ||
			string(r.Payload) != string(o.Payload) || r.TraceContext != "" {
			t.Fatalf("old row %d after the upgrade: %+v, want %+v without a trace context", i, r, o)
		}
	}
	writeTraced(t, b)
	rows = readAllOutbox(t, b)
	if len(rows) <= len(old) {
		t.Fatalf("outbox after new writes: %d rows (%d old)", len(rows), len(old))
	}
	for _, r := range rows[len(old):] {
		if r.TraceContext == "" || r.Revision <= old[len(old)-1].Revision {
			t.Fatalf("new row %+v: want a trace context, after the old rows", r)
		}
	}
	msgs, spans := publishAll(t, b)
	if len(msgs) != len(rows) {
		t.Fatalf("%d messages in the stream, want %d (every row once)", len(msgs), len(rows))
	}
	if len(spans) != len(rows)-len(old) {
		t.Errorf("%d publish spans, want %d (one per new row, none for the old ones)", len(spans), len(rows)-len(old))
	}
	for i, m := range msgs {
		row := rows[i]
		if m.Header.Get(jetstream.MsgIDHeader) != eventstream.MsgID(row.Revision) || string(m.Data) != string(row.Payload) || m.Subject != row.Subject {
			t.Fatalf("message %d is not revision %d's row (out of order, or changed)", i, row.Revision)
		}
		if i < len(old) {
			checkHeadersAsBefore(t, m, old[i])
			continue
		}
		tp := m.Header.Get(tracing.HeaderTraceparent)
		sp, ok := spans[spanIDOf(tp)]
		if !ok || traceIDOf(tp) != traceIDOf(row.TraceContext) || sp.Parent().SpanID().String() != spanIDOf(row.TraceContext) {
			t.Errorf("new revision %d published with traceparent %q: want the trace of %q, under its publish span", row.Revision, tp, row.TraceContext)
		}
	}
}

func readAllOutbox(t *testing.T, b storage.Backend) []storage.OutboxRow {
	t.Helper()
	rows, err := b.Log.ReadOutbox(t.Context(), 0, math.MaxInt64, math.MaxInt32)
	if err != nil {
		t.Fatalf("read the outbox: %v", err)
	}
	return rows
}

// writeTraced makes changes each inside a span of its own trace: the
// Widget type and two resources.
func writeTraced(t *testing.T, b storage.Backend) {
	t.Helper()
	ctx, _ := TracedContext(t.Context(), 0x31, 0x41)
	if _, err := b.Store.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"new-a", "new-b"} {
		ctx, _ := TracedContext(t.Context(), byte(0x51+i), byte(0x61+i))
		if _, err := b.Store.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
			ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: name, Spec: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// publishAll runs a relay with a tracer on an embedded JetStream until it
// has published everything, and returns the stream's messages in order
// and the relay's publish spans by span id.
func publishAll(t *testing.T, b storage.Backend) ([]*jetstream.RawStreamMsg, map[string]sdktrace.ReadOnlySpan) {
	t.Helper()
	ctx := t.Context()
	nc := testenv.Connect(t, testenv.NATS(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	runCtx, cancel := context.WithCancel(ctx)
	relay := outbox.New(b.Log, nc, js, eventstream.DefaultStreamConfig(),
		outbox.Config{PollInterval: 10 * time.Millisecond, LeaderRetry: 20 * time.Millisecond, Tracer: tp.Tracer("relay")}, slog.New(slog.DiscardHandler))
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()
	eventually(t, 20*time.Second, "the relay publishes the old and the new rows", func(ctx context.Context) bool {
		st, err := b.Log.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Cursor >= st.Revision
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("relay: %v", err)
	}
	s, err := js.Stream(ctx, eventstream.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		msgs = append(msgs, m)
	}
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		spans[sp.SpanContext().SpanID().String()] = sp
	}
	return msgs, spans
}

// checkHeadersAsBefore checks that m, which published the old row o,
// carries exactly the headers the relay gave such a row before trace
// contexts (and JetStream's publish expectations, Nats-Expected-*): no
// traceparent, no tracestate.
func checkHeadersAsBefore(t *testing.T, m *jetstream.RawStreamMsg, o storage.OutboxRow) {
	t.Helper()
	before := outbox.Message(o, m.Header.Get(eventstream.StoreIDHeader), m.Header.Get(eventstream.BaseHeader)).Header
	n := 0
	for k := range m.Header {
		if !strings.HasPrefix(k, "Nats-Expected-") {
			n++
		}
	}
	if m.Header.Get(tracing.HeaderTraceparent) != "" || m.Header.Get("tracestate") != "" || n != len(before) {
		t.Errorf("old revision %d published with headers %v, want %v", o.Revision, m.Header, before)
	}
	for k, v := range before {
		if !slices.Equal(m.Header.Values(k), v) {
			t.Errorf("old revision %d: header %s = %v, want %v", o.Revision, k, m.Header.Values(k), v)
		}
	}
}

func spanIDOf(traceparent string) string {
	if len(traceparent) < 52 {
		return ""
	}
	return traceparent[36:52]
}
