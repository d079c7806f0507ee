package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/platform/tracing/otlp"
	"github.com/no8s/no8s/libs/platform/tracing/otlp/tracingtest"
	"github.com/no8s/no8s/services/internal/eventstream"
)

// TestTraceOfACreate: with the OTEL_* environment pointing at an OTLP
// receiver (the official OTLP types, in this test process), one create
// sent with a traceparent is one trace across the real processes, with
// the noop reconciler running: the gateway's request span is the sender's
// span's child; admission's and the store's server spans of the gateway's
// gRPC calls are its children (a caller records no span of a gRPC call,
// it sends its own span's context); the webhook
// server (a process of its own) continues the traceparent admission sent
// it; the store's outbox publish span (the relay) is the child of the span
// in which the store committed, and the event's traceparent names it; the
// scheduler's dispatch span is the publish span's child (across NATS); the
// worker's attempt span the dispatch span's (across NATS again), with a
// span per step and the completion call (the store's server span) inside
// it.
func TestTraceOfACreate(t *testing.T) {
	rcv := tracingtest.Start(t)
	t.Setenv(tracing.EnvEndpoint, rcv.GRPCEndpoint)
	t.Setenv(tracing.EnvProtocol, tracing.ProtocolGRPC)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	c := newCluster(t)
	base := c.startAll()
	sched := c.startScheduler(c.storeAddrs[0], "s1", 0)
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Traced", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	worker := c.startReconciler(c.storeAddrs[0], "Traced/v1")
	// A validating webhook, a process of its own that traces like a
	// service: its request span continues the traceparent it was sent.
	hook := startTraceWebhook(t)
	if r := do(t, "POST", base+"/api/v1/admission-webhooks", map[string]any{
		"name": "traced-check", "resource_type_name": "Traced", "webhook_url": hook,
		"webhook_type": "validating", "operations": []string{"CREATE"},
	}); r.status != 201 {
		t.Fatalf("register webhook: %d %s", r.status, r.body)
	}
	body, _ := json.Marshal(map[string]any{"resource_type_name": "Traced", "resource_type_version": "v1", "name": "one", "spec": map[string]any{}})
	// Admission picks the webhook up within a second: dry runs until the
	// webhook has served one.
	waitFor(t, 20*time.Second, "admission calling the new webhook", func() error {
		r := do(t, "POST", base+"/api/v1/resources?dry_run=true", body)
		if slices.ContainsFunc(rcv.Spans(), func(s tracingtest.Span) bool { return s.Service == traceWebhookService }) {
			return nil
		}
		return fmt.Errorf("not called yet (dry run answered %d)", r.status)
	})

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
	server := func(svc string) func(tracingtest.Span) bool {
		return func(s tracingtest.Span) bool { return s.Service == svc && s.Kind == tracepb.Span_SPAN_KIND_SERVER }
	}
	named := func(name string) func(tracingtest.Span) bool {
		return func(s tracingtest.Span) bool { return s.Name == name }
	}
	isStep := func(s tracingtest.Span) bool {
		return s.Service == reconcilerService && strings.HasPrefix(s.Name, "step ")
	}
	complete := func(s tracingtest.Span) bool {
		return s.Service == "no8s-store" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && strings.HasSuffix(s.Name, "/CompleteReconcile")
	}
	spans := rcv.WaitFor(t, 60*time.Second, "the create's spans from every process", func(all []tracingtest.Span) bool {
		has := func(ok func(tracingtest.Span) bool) bool {
			return slices.ContainsFunc(all, func(s tracingtest.Span) bool { return s.TraceID == traceID && ok(s) })
		}
		return has(named("outbox publish")) && has(named("dispatch")) && has(named("attempt")) && has(isStep) && has(complete) &&
			has(server("no8s-gateway")) && has(server("no8s-admission")) && has(server("no8s-store")) && has(server(traceWebhookService))
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
	gw := findSpan(tr, server("no8s-gateway"))
	if gw == nil || gw.ParentID != parent {
		t.Fatalf("no gateway request span whose parent is the sender's %s:\n%s", parent, describe)
	}
	// Each server span of admission and the store is the child of the
	// span of the same trace, in another process, that made the call (the
	// gateway's request, admission's, the worker's attempt or step): the
	// caller sends its context in the call's metadata and records no span
	// of its own.
	for _, svc := range []string{"no8s-admission", "no8s-store"} {
		servers := filterSpans(tr, server(svc))
		if len(servers) == 0 {
			t.Fatalf("no server span from %s in the trace:\n%s", svc, describe)
		}
		for _, s := range servers {
			p, ok := byID[s.ParentID]
			if !ok || p.Service == svc || p.Kind == tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("%s's span %s: parent %s is not the calling span of another process in the trace:\n%s", svc, s.Name, s.ParentID, describe)
			}
		}
	}
	if c := findSpan(tr, func(s tracingtest.Span) bool {
		return s.Kind == tracepb.Span_SPAN_KIND_CLIENT && strings.HasPrefix(s.Name, "no8s.")
	}); c != nil {
		t.Errorf("a gRPC client span %s from %s: a caller records none:\n%s", c.Name, c.Service, describe)
	}
	// The webhook process continued the traceparent admission sent it,
	// which names admission's client span of that call.
	if wh := findSpan(tr, server(traceWebhookService)); byID[wh.ParentID].Service != "no8s-admission" || byID[wh.ParentID].Name != "webhook traced-check" ||
		byID[wh.ParentID].Kind != tracepb.Span_SPAN_KIND_CLIENT || byID[wh.ParentID].Attrs["http.response.status_code"] != "200" {
		t.Fatalf("the webhook's span %+v: want admission's client span 'webhook traced-check' (status 200) as its parent:\n%s", *wh, describe)
	}
	create := findSpan(tr, func(s tracingtest.Span) bool {
		return server("no8s-store")(s) && strings.HasSuffix(s.Name, "/CreateResource")
	})
	if create == nil || byID[create.ParentID].Service != "no8s-gateway" {
		t.Fatalf("no store CreateResource span called by the gateway:\n%s", describe)
	}
	pub := findSpan(tr, func(s tracingtest.Span) bool { return s.Name == "outbox publish" && s.ParentID == create.SpanID })
	if pub == nil || pub.Service != "no8s-store" || pub.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
		t.Fatalf("no store outbox publish span, child of CreateResource %s:\n%s", create.SpanID, describe)
	}
	// Across NATS: the event to the scheduler's dispatch, the work item to
	// the worker's attempt.
	disp := findSpan(tr, named("dispatch"))
	if disp.Service != "no8s-scheduler" || disp.ParentID != pub.SpanID || disp.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
		t.Fatalf("dispatch span %+v: want the scheduler's, child of the publish span %s:\n%s", *disp, pub.SpanID, describe)
	}
	att := findSpan(tr, named("attempt"))
	if att.Service != reconcilerService || att.ParentID != disp.SpanID || att.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
		t.Fatalf("attempt span %+v: want the worker's, child of the dispatch span %s:\n%s", *att, disp.SpanID, describe)
	}
	if st := findSpan(tr, isStep); st.ParentID != att.SpanID {
		t.Fatalf("step span %+v: want the attempt's child:\n%s", *st, describe)
	}
	if done := findSpan(tr, complete); done.ParentID != att.SpanID {
		t.Fatalf("CompleteReconcile served under %+v: want the worker's attempt %s:\n%s", byID[done.ParentID], att.SpanID, describe)
	}
	// The scheduler's and the worker's log lines inside those spans carry
	// the trace (both log at debug here).
	for _, l := range []struct {
		p    *proc
		msg  string
		span string
	}{{sched, "work item published", disp.SpanID}, {worker, "msg=reconciled", att.SpanID}} {
		waitFor(t, 10*time.Second, l.p.name+"'s log line with the trace", func() error {
			b, _ := os.ReadFile(l.p.log.Name())
			for line := range strings.SplitSeq(string(b), "\n") {
				if strings.Contains(line, l.msg) && strings.Contains(line, "trace_id="+traceID) && strings.Contains(line, "span_id="+l.span) {
					return nil
				}
			}
			return fmt.Errorf("no %q line with trace_id=%s span_id=%s", l.msg, traceID, l.span)
		})
	}

	// The event in the stream carries the publish span as its parent.
	js, _ := c.jetstream()
	st, err := js.Stream(t.Context(), eventstream.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(t.Context(), mustUint(t, pub.Attrs["messaging.nats.stream.sequence"]))
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

// TestTraceOfAQueueInputMessage: a queue-input message published with a
// traceparent continues the sender's trace: the gateway's "queue input"
// span is the sender's span's child, the store's commit is in the trace,
// and so is the relay's publish of the change (the outbox row kept it).
func TestTraceOfAQueueInputMessage(t *testing.T) {
	rcv := tracingtest.Start(t)
	t.Setenv(tracing.EnvEndpoint, rcv.HTTPEndpoint)
	t.Setenv(tracing.EnvProtocol, tracing.ProtocolHTTP)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	c := newCluster(t)
	base := c.startAll()
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "TracedQ", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "TracedQ/v1")
	js, _ := c.jetstream()
	waitFor(t, 20*time.Second, "queue input consumer", func() error {
		_, err := js.Consumer(t.Context(), subjects.InputStream, subjects.InputConsumer)
		return err
	})
	pubJS := js
	if c.natsConf != "" { // a NATS publisher's user, as a producer has
		nc, err := nats.Connect(c.natsURL, nats.UserCredentials(c.natsUserFile("--nats-publisher", "orders")))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if pubJS, err = jetstream.New(nc); err != nil {
			t.Fatal(err)
		}
	}
	const traceID, parent = "7bf92f3577b34da6a3ce929d0e0e4738", "20f067aa0ba902b7"
	msg := nats.NewMsg(subjects.InputQueueApply)
	msg.Header.Set(subjects.InputKeyHeader, "traced-1")
	msg.Header.Set("Authorization", "Bearer "+adminToken)
	msg.Header.Set(tracing.HeaderTraceparent, "00-"+traceID+"-"+parent+"-01")
	msg.Data = []byte("kind: Resource\ntype: TracedQ/v1\nmetadata:\n  name: queued\nspec: {}\n")
	if _, err := pubJS.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	spans := rcv.WaitFor(t, 30*time.Second, "the message's spans: queue input, the store's commit, the publish", func(all []tracingtest.Span) bool {
		has := func(ok func(tracingtest.Span) bool) bool {
			return slices.ContainsFunc(all, func(s tracingtest.Span) bool { return s.TraceID == traceID && ok(s) })
		}
		return has(func(s tracingtest.Span) bool { return s.Name == "queue input" }) &&
			has(func(s tracingtest.Span) bool { return s.Name == "outbox publish" })
	})
	tr := filterSpans(spans, func(s tracingtest.Span) bool { return s.TraceID == traceID })
	describe := tracingtest.Describe(tr)
	in := findSpan(tr, func(s tracingtest.Span) bool { return s.Name == "queue input" })
	if in.Service != "no8s-gateway" || in.ParentID != parent || in.Kind != tracepb.Span_SPAN_KIND_CONSUMER || in.Attrs["no8s.input.status"] != "201" {
		t.Fatalf("queue input span %+v: want the gateway's, child of the sender's %s, status 201:\n%s", *in, parent, describe)
	}
	byID := map[string]tracingtest.Span{}
	for _, s := range tr {
		byID[s.SpanID] = s
	}
	pub := findSpan(tr, func(s tracingtest.Span) bool { return s.Name == "outbox publish" })
	commit := byID[pub.ParentID]
	if commit.Service != "no8s-store" || commit.Kind != tracepb.Span_SPAN_KIND_SERVER || commit.ParentID != in.SpanID {
		t.Fatalf("the publish's parent %+v: want the store's commit, called from the queue input span %s:\n%s", commit, in.SpanID, describe)
	}
}

// TestTraceOfAResync: a reconcile that a resync triggers is a trace of its
// own, whose dispatch span links to the trace of the change that set the
// generation; the worker's attempt continues that new trace.
func TestTraceOfAResync(t *testing.T) {
	rcv := tracingtest.Start(t)
	t.Setenv(tracing.EnvEndpoint, rcv.GRPCEndpoint)
	t.Setenv(tracing.EnvProtocol, tracing.ProtocolGRPC)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "s1", 0)
	// The shortest resync a type may ask for: a second.
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Resynced", "version": "v1", "schema": map[string]any{"type": "object"},
		"reconcile_policy": map[string]any{"resync_seconds": 1}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Resynced/v1")
	const traceID, parent = "8bf92f3577b34da6a3ce929d0e0e4739", "30f067aa0ba902b7"
	body, _ := json.Marshal(map[string]any{"resource_type_name": "Resynced", "resource_type_version": "v1", "name": "again", "spec": map[string]any{}})
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
	resync := func(s tracingtest.Span) bool {
		return s.Name == "dispatch" && s.Attrs["no8s.reason"] == "resync" && slices.Contains(s.Links, traceID)
	}
	spans := rcv.WaitFor(t, 60*time.Second, "a resync's dispatch linked to the create's trace, and its attempt", func(all []tracingtest.Span) bool {
		for _, d := range all {
			if resync(d) && slices.ContainsFunc(all, func(s tracingtest.Span) bool { return s.Name == "attempt" && s.ParentID == d.SpanID }) {
				return true
			}
		}
		return false
	})
	d := findSpan(spans, func(s tracingtest.Span) bool {
		return resync(s) && slices.ContainsFunc(spans, func(a tracingtest.Span) bool { return a.Name == "attempt" && a.ParentID == s.SpanID })
	})
	if d.TraceID == traceID || d.ParentID != "" || d.Service != "no8s-scheduler" {
		t.Fatalf("resync dispatch %+v: want a new root of the scheduler's, linked to %s", *d, traceID)
	}
	// The create's own dispatch continued the create's trace.
	if first := findSpan(spans, func(s tracingtest.Span) bool { return s.Name == "dispatch" && s.TraceID == traceID }); first == nil || len(first.Links) != 0 {
		t.Fatalf("no dispatch of the create in its trace, without links:\n%s", tracingtest.Describe(spans))
	}
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

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// reconcilerService is the noop reconciler's service name in traces.
const reconcilerService = "no8s-reconciler-noop"

// The trace webhook is this test binary run again as a separate process
// (TestMain hands it over to runTraceWebhook when traceWebhookEnv is set):
// an admission webhook that allows everything, tracing as the services do
// (otlp.Start from the OTEL_* environment), so that its request span
// continues the traceparent admission sends.
const (
	traceWebhookEnv     = "NO8S_E2E_TRACE_WEBHOOK" // its listen address
	traceWebhookService = "no8s-e2e-webhook"
)

// startTraceWebhook starts the trace webhook and returns its URL once it
// answers.
func startTraceWebhook(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	p := start(t, "trace-webhook", os.Args[0], []string{"-test.run=^$"}, traceWebhookEnv+"="+addr)
	url := "http://" + addr + "/validate"
	waitFor(t, 20*time.Second, "the trace webhook listening", func() error {
		if err := p.exited(); err != nil {
			return err
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
	return url
}

// runTraceWebhook serves the trace webhook on addr until SIGTERM, then
// sends its last spans.
func runTraceWebhook(addr string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	tr, err := otlp.Start(ctx, traceWebhookService, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = tr.Shutdown(ctx) }()
	h := tr.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("webhook called, traceparent", r.Header.Get(tracing.HeaderTraceparent))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}), traceWebhookService)
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestTraceOfAnHttpSourceSync: each sync registry-sync makes is a trace of
// its own (a root span 'sync HttpSource' naming the source), and the writes
// it makes through the gateway are in that trace: the gateway's request
// span of the item's create is the sync span's child, and the store's
// server span of that create is below it.
func TestTraceOfAnHttpSourceSync(t *testing.T) {
	rcv := tracingtest.Start(t)
	t.Setenv(tracing.EnvEndpoint, rcv.GRPCEndpoint)
	t.Setenv(tracing.EnvProtocol, tracing.ProtocolGRPC)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	f := newFeed(t)
	grantTestSecrets(t, f.srv.URL)
	c := newTenantCluster(t)
	// WebApps need a reconciler to be created.
	c.startReconcilerArgs("noop-webapp", c.storeAddrs[0], nil, "noop", "--name", "webapp", "--types", "WebApp/v1")
	c.startSync("a", "--writes", "1")
	c.waitSyncLeads()
	f.set("", feedItems("x1")...)
	if r := do(t, "POST", c.base+"/api/v1/resources", httpSourceBody("traced-source", f.srv.URL)); r.status != 201 {
		t.Fatalf("create HttpSource: %d %s", r.status, r.body)
	}
	waitWebApps(c.cluster, "default", 60*time.Second, "x1")

	// The sync that created x1: its trace holds a gateway request span
	// whose child chain reaches the store's CreateResource.
	var syncSpan *tracingtest.Span
	rcv.WaitFor(t, 30*time.Second, "the sync's trace with the create of x1", func(all []tracingtest.Span) bool {
		for _, s := range all {
			if s.Service != "no8s-registry-sync" || s.Name != "sync HttpSource" || s.Attrs["no8s.resource.name"] != "traced-source" {
				continue
			}
			if s.ParentID != "" || s.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
				t.Fatalf("the sync span %+v: want a root span of its own", s)
			}
			tr := rcv.Trace(s.TraceID)
			byID := map[string]tracingtest.Span{}
			for _, x := range tr {
				byID[x.SpanID] = x
			}
			for _, x := range tr {
				if x.Service != "no8s-store" || !strings.HasSuffix(x.Name, "/CreateResource") {
					continue
				}
				// Up the chain: store ← admission or gateway client ←
				// gateway request ← the sync.
				for p, ok := byID[x.ParentID]; ok; p, ok = byID[p.ParentID] {
					if p.Service == "no8s-gateway" && p.Kind == tracepb.Span_SPAN_KIND_SERVER && p.ParentID == s.SpanID {
						syncSpan = &s
						return true
					}
				}
			}
		}
		return false
	})
	if syncSpan.Attrs["no8s.resource.type"] != "HttpSource/v1" || syncSpan.Attrs["no8s.sync.reason"] == "" {
		t.Fatalf("the sync span's attributes %v: want the source's type and the Synced reason", syncSpan.Attrs)
	}
}

// TestTraceOfNo8sDev: no8s dev, every service in one process, traces a
// change as the separate services do: one trace from the request through
// admission, the store's commit, the relay's publish and the scheduler's
// dispatch (spans of service no8s-dev), continued by a reconciler run
// beside it, whose attempt is the dispatch span's child.
func TestTraceOfNo8sDev(t *testing.T) {
	rcv := tracingtest.Start(t)
	env := []string{tracing.EnvEndpoint + "=" + rcv.GRPCEndpoint, tracing.EnvProtocol + "=" + tracing.ProtocolGRPC, "OTEL_BSP_SCHEDULE_DELAY=100"}
	addrs, _ := startDevServing(t, env, "Traced", map[string]any{"type": "object"})

	const traceID, parent = "6cf92f3577b34da6a3ce929d0e0e4737", "20f067aa0ba902b8"
	body, _ := json.Marshal(map[string]any{"name": "dev-traced", "resource_type_name": "Traced", "resource_type_version": "v1", "spec": map[string]any{}})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", addrs.APIURL+"/api/v1/resources", bytes.NewReader(body))
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
	in := func(all []tracingtest.Span, svc, name string) *tracingtest.Span {
		return findSpan(all, func(s tracingtest.Span) bool { return s.TraceID == traceID && s.Service == svc && s.Name == name })
	}
	spans := rcv.WaitFor(t, 60*time.Second, "the create's spans from no8s dev and the reconciler", func(all []tracingtest.Span) bool {
		return in(all, "no8s-dev", "outbox publish") != nil && in(all, "no8s-dev", "dispatch") != nil && in(all, reconcilerService, "attempt") != nil
	})
	tr := filterSpans(spans, func(s tracingtest.Span) bool { return s.TraceID == traceID })
	describe := tracingtest.Describe(tr)
	byID := map[string]tracingtest.Span{}
	for _, s := range tr {
		byID[s.SpanID] = s
	}
	// The request continues the caller's traceparent; the store's commit
	// (a served gRPC call inside the same process) is in the trace.
	if !slices.ContainsFunc(tr, func(s tracingtest.Span) bool {
		return s.Service == "no8s-dev" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.ParentID == parent
	}) {
		t.Fatalf("no request span of no8s dev continues the caller's traceparent:\n%s", describe)
	}
	if !slices.ContainsFunc(tr, func(s tracingtest.Span) bool {
		return s.Service == "no8s-dev" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && strings.HasSuffix(s.Name, "/CreateResource")
	}) {
		t.Fatalf("no store commit span in the trace:\n%s", describe)
	}
	pub, dispatch, attempt := in(tr, "no8s-dev", "outbox publish"), in(tr, "no8s-dev", "dispatch"), in(tr, reconcilerService, "attempt")
	if dispatch.ParentID != pub.SpanID || attempt.ParentID != dispatch.SpanID {
		t.Fatalf("want publish → dispatch → attempt, parent by parent:\n%s", describe)
	}
	if _, ok := byID[pub.ParentID]; !ok {
		t.Fatalf("the publish span's parent %s (the commit) is not in the trace:\n%s", pub.ParentID, describe)
	}
}
