package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/no8s/no8s/libs/sdk/tracing"
	"github.com/no8s/no8s/libs/sdk/tracing/otlp/tracingtest"
	"github.com/no8s/no8s/services/internal/eventstream"
)

// TestTraceOfACreate: with the OTEL_* environment pointing at an OTLP
// receiver (the official OTLP types, in this test process), one create
// sent with a traceparent is one trace across the real processes: the
// gateway's request span is the sender's span's child; the gateway's gRPC
// calls are its children; admission's and the store's server spans are
// the children of those calls; and the store's outbox publish span (the
// relay) is the child of the span in which the store committed, and the
// event's traceparent names that publish span.
func TestTraceOfACreate(t *testing.T) {
	rcv := tracingtest.Start(t)
	t.Setenv(tracing.EnvEndpoint, rcv.GRPCEndpoint)
	t.Setenv(tracing.EnvProtocol, tracing.ProtocolGRPC)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	c := newCluster(t)
	base := c.startAll()
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Traced", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Traced/v1")
	// A validating webhook (an HTTP server of its own) records the
	// traceparent admission sends it.
	sent := make(chan string, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sent <- r.Header.Get(tracing.HeaderTraceparent):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}))
	defer hook.Close()
	if r := do(t, "POST", base+"/api/v1/admission-webhooks", map[string]any{
		"name": "traced-check", "resource_type_name": "Traced", "webhook_url": hook.URL,
		"webhook_type": "validating", "operations": []string{"CREATE"},
	}); r.status != 201 {
		t.Fatalf("register webhook: %d %s", r.status, r.body)
	}
	body, _ := json.Marshal(map[string]any{"resource_type_name": "Traced", "resource_type_version": "v1", "name": "one", "spec": map[string]any{}})
	// Admission picks the webhook up within a second: dry runs until it
	// is called, then the calls they made are forgotten.
	waitFor(t, 20*time.Second, "admission calling the new webhook", func() error {
		r := do(t, "POST", base+"/api/v1/resources?dry_run=true", body)
		select {
		case <-sent:
			return nil
		default:
			return fmt.Errorf("not called yet (dry run answered %d)", r.status)
		}
	})
	for len(sent) > 0 {
		<-sent
	}

	const traceID, parent = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7"
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/api/v1/resources", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d", resp.StatusCode)
	}

	// Each process exports on its own schedule: wait until every one's
	// spans of the trace have come.
	spans := rcv.WaitFor(t, 30*time.Second, "the create's spans from the gateway, admission and the store (with its publish)", func(all []tracingtest.Span) bool {
		has := func(ok func(tracingtest.Span) bool) bool {
			return slices.ContainsFunc(all, func(s tracingtest.Span) bool { return s.TraceID == traceID && ok(s) })
		}
		server := func(svc string) func(tracingtest.Span) bool {
			return func(s tracingtest.Span) bool { return s.Service == svc && s.Kind == tracepb.Span_SPAN_KIND_SERVER }
		}
		return has(func(s tracingtest.Span) bool { return s.Name == "outbox publish" }) &&
			has(server("no8s-gateway")) && has(server("no8s-admission")) && has(server("no8s-store"))
	})
	var tr []tracingtest.Span
	for _, s := range spans {
		if s.TraceID == traceID {
			tr = append(tr, s)
		}
	}
	byID := map[string]tracingtest.Span{}
	for _, s := range tr {
		byID[s.SpanID] = s
	}
	describe := tracingtest.Describe(tr)

	// The gateway's request span continues the sender's.
	gw := findSpan(tr, func(s tracingtest.Span) bool {
		return s.Service == "no8s-gateway" && s.Kind == tracepb.Span_SPAN_KIND_SERVER
	})
	if gw == nil || gw.ParentID != parent {
		t.Fatalf("no gateway request span whose parent is the sender's %s:\n%s", parent, describe)
	}
	// Each server span of admission and the store is the child of a
	// client span of the same trace (the gateway's, or admission's when it
	// reads from the store).
	for _, svc := range []string{"no8s-admission", "no8s-store"} {
		servers := filterSpans(tr, func(s tracingtest.Span) bool { return s.Service == svc && s.Kind == tracepb.Span_SPAN_KIND_SERVER })
		if len(servers) == 0 {
			t.Fatalf("no server span from %s in the trace:\n%s", svc, describe)
		}
		for _, s := range servers {
			p, ok := byID[s.ParentID]
			if !ok || p.Service == svc || p.Kind != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("%s's span %s: parent %s is not another process's client span of the trace:\n%s", svc, s.Name, s.ParentID, describe)
			}
		}
	}
	create := findSpan(tr, func(s tracingtest.Span) bool {
		return s.Service == "no8s-store" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && strings.HasSuffix(s.Name, "/CreateResource")
	})
	if create == nil || byID[create.ParentID].Service != "no8s-gateway" {
		t.Fatalf("no store CreateResource span called by the gateway:\n%s", describe)
	}
	pub := findSpan(tr, func(s tracingtest.Span) bool { return s.Name == "outbox publish" })
	if pub.Service != "no8s-store" || pub.ParentID != create.SpanID || pub.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
		t.Fatalf("outbox publish span %+v: want the store's, child of CreateResource %s:\n%s", *pub, create.SpanID, describe)
	}

	// The webhook was sent the trace, under one of admission's spans.
	select {
	case tp := <-sent:
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[1] != traceID || byID[parts[2]].Service != "no8s-admission" {
			t.Fatalf("the webhook got traceparent %q: want trace %s under an admission span:\n%s", tp, traceID, describe)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the webhook was not called")
	}

	// The event in the stream carries the publish span as its parent.
	js, _ := c.jetstream()
	st, err := js.Stream(t.Context(), eventstream.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(t.Context(), pub.Attrs["messaging.destination.name"])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Header.Get(tracing.HeaderTraceparent), "00-"+traceID+"-"+pub.SpanID+"-01"; got != want {
		t.Fatalf("event traceparent %q, want %q", got, want)
	}

	// A log line written inside a traced request carries its trace id:
	// with admission gone, the gateway logs the unavailable backend.
	c.admissionProcs[0].stop(syscall.SIGKILL, 5*time.Second)
	const otherTrace = "6bf92f3577b34da6a3ce929d0e0e4737"
	req, _ = http.NewRequestWithContext(t.Context(), "POST", base+"/api/v1/resources", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+otherTrace+"-"+parent+"-01")
	if resp, err = httpClient.Do(req); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("create with admission down: %d, want 503", resp.StatusCode)
	}
	waitFor(t, 10*time.Second, "the gateway's log line with the request's trace id", func() error {
		b, _ := os.ReadFile(c.gatewayProcs[0].log.Name())
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(line, "backend unavailable") && strings.Contains(line, "trace_id="+otherTrace) && strings.Contains(line, "span_id=") {
				return nil
			}
		}
		return fmt.Errorf("no 'backend unavailable' line with trace_id=%s", otherTrace)
	})
}

func findSpan(spans []tracingtest.Span, ok func(tracingtest.Span) bool) *tracingtest.Span {
	for i := range spans {
		if ok(spans[i]) {
			return &spans[i]
		}
	}
	return nil
}

func filterSpans(spans []tracingtest.Span, ok func(tracingtest.Span) bool) []tracingtest.Span {
	var out []tracingtest.Span
	for _, s := range spans {
		if ok(s) {
			out = append(out, s)
		}
	}
	return out
}
