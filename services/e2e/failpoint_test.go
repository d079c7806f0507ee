package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/platform/tracing/otlp/tracingtest"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/failpoint"
)

// failpointBinEnv names the directory of the store built with failpoints
// (make build-failpoint); without it the test builds one.
const failpointBinEnv = "NO8S_FAILPOINT_BIN"

// failpointStore returns a no8s-store built with the build tag failpoint:
// $NO8S_FAILPOINT_BIN/no8s-store, or one built here.
func failpointStore(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(failpointBinEnv); dir != "" {
		bin := filepath.Join(dir, "no8s-store")
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s: %v (make build-failpoint)", failpointBinEnv, err)
		}
		return bin
	}
	bin := filepath.Join(t.TempDir(), "no8s-store")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-tags", failpoint.Tag, "-o", bin, "./cmd/no8s-store")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the store with failpoints: %v: %s", err, out)
	}
	return bin
}

// stopLine finds the relay's line at relay-before-publish: the revisions
// of the batch it read and did not publish.
var stopLine = regexp.MustCompile(`failpoint ` + string(failpoint.RelayBeforePublish) + `:[^\n]* first=(\d+) last=(\d+)`)

// TestTraceSurvivesRelayFailover: two store replicas with tracing on; the
// relay's leader is a build with failpoints and NO8S_FAILPOINTS=
// relay-before-publish. A create sent with a traceparent commits on the
// other replica; the leader reads its outbox row and stops before
// publishing it, and is SIGKILLed there. The other replica takes the relay
// over and publishes the event once; its publish span joins the create's
// trace as the child of the store's commit span (the outbox row kept the
// trace context). The replica that takes over is a release build with
// NO8S_FAILPOINTS set too: there it changes nothing.
func TestTraceSurvivesRelayFailover(t *testing.T) {
	rcv := tracingtest.Start(t)
	t.Setenv(tracing.EnvEndpoint, rcv.GRPCEndpoint)
	t.Setenv(tracing.EnvProtocol, tracing.ProtocolGRPC)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	fpBin := failpointStore(t)
	c := newCluster(t)
	first := c.startStore("")
	addr := c.storeAddrs[0]
	base := c.startGateway(addr, c.startAdmission(addr))
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Failover", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(addr, "Failover/v1")
	pending := func() error {
		if n := c.count(`SELECT count(*) FROM outbox WHERE revision > (SELECT published_revision FROM relay_state)`); n > 0 {
			return fmt.Errorf("%d outbox rows not published", n)
		}
		return nil
	}
	waitFor(t, 30*time.Second, "the first store's relay publishing everything", pending)

	// The relay goes to the store with failpoints: the first store stops,
	// and comes back (a release build, NO8S_FAILPOINTS set) as the standby.
	fp := c.startStoreBin("", fpBin, failpoint.Env+"="+string(failpoint.RelayBeforePublish))
	first.stop(syscall.SIGTERM, 20*time.Second)
	waitFor(t, 30*time.Second, "the failpoint store leading the relay", func() error {
		if len(fp.logLines(t, "outbox relay is leader")) == 0 {
			return fmt.Errorf("not leader yet")
		}
		return fp.exited()
	})
	if l := fp.logLines(t, "built with failpoints", string(failpoint.RelayBeforePublish)); len(l) == 0 {
		t.Fatal("the failpoint store does not say it runs with relay-before-publish enabled")
	}
	standby := c.startStoreBin(addr, filepath.Join(binDir, "no8s-store"), failpoint.Env+"="+string(failpoint.RelayBeforePublish))
	waitFor(t, 30*time.Second, "nothing pending before the traced create", pending)

	const traceID, parent = "7bf92f3577b34da6a3ce929d0e0e4738", "20f067aa0ba902b8"
	body, _ := json.Marshal(map[string]any{"resource_type_name": "Failover", "resource_type_version": "v1", "name": "kept", "spec": map[string]any{}})
	var rv int64
	// The gateway reconnects to the restarted store: creates answered 503
	// meanwhile made nothing.
	waitFor(t, 30*time.Second, "the traced create", func() error {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/api/v1/resources", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 201 {
			return fmt.Errorf("create: %d", resp.StatusCode)
		}
		var out struct {
			ResourceVersion int64 `json:"resource_version"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		rv = out.ResourceVersion
		return nil
	})

	// The leader read the create's row and stopped before publishing it.
	waitFor(t, 30*time.Second, "the leader stopped at relay-before-publish with the create's revision", func() error {
		b, _ := os.ReadFile(fp.log.Name())
		m := stopLine.FindSubmatch(b)
		if m == nil {
			return fmt.Errorf("no line of the failpoint in the leader's log")
		}
		lo, _ := strconv.ParseInt(string(m[1]), 10, 64)
		hi, _ := strconv.ParseInt(string(m[2]), 10, 64)
		if rv < lo || rv > hi {
			t.Fatalf("the leader stopped with revisions %d-%d, not the create's %d", lo, hi, rv)
		}
		return nil
	})
	if err := pending(); err == nil {
		t.Fatal("the create's event is marked published while the leader is stopped before publishing")
	}
	fp.kill9()
	killed := time.Now()

	spans := rcv.WaitFor(t, 60*time.Second, "the create's publish span, from the replica that took the relay over", func(all []tracingtest.Span) bool {
		return findSpan(all, func(s tracingtest.Span) bool { return s.TraceID == traceID && s.Name == "outbox publish" }) != nil
	})
	tr := filterSpans(spans, func(s tracingtest.Span) bool { return s.TraceID == traceID })
	describe := tracingtest.Describe(tr)
	create := findSpan(tr, func(s tracingtest.Span) bool {
		return s.Service == "no8s-store" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && strings.HasSuffix(s.Name, "/CreateResource")
	})
	if create == nil {
		t.Fatalf("no store CreateResource span in the trace:\n%s", describe)
	}
	pubs := filterSpans(tr, func(s tracingtest.Span) bool { return s.Name == "outbox publish" })
	if len(pubs) != 1 {
		t.Fatalf("%d publish spans in the trace, want 1:\n%s", len(pubs), describe)
	}
	pub := pubs[0]
	if pub.Service != "no8s-store" || pub.Kind != tracepb.Span_SPAN_KIND_PRODUCER || pub.ParentID != create.SpanID {
		t.Fatalf("publish span %+v: want the store's, child of the commit's CreateResource %s:\n%s", pub, create.SpanID, describe)
	}
	if !pub.Start.After(killed) {
		t.Fatalf("the publish span started at %v, before the leader was killed (%v): not the other replica's", pub.Start, killed)
	}
	if pub.Attrs["no8s.revision"] != strconv.FormatInt(rv, 10) {
		t.Fatalf("publish span of revision %s, want %d", pub.Attrs["no8s.revision"], rv)
	}
	if l := standby.logLines(t, "outbox relay is leader"); len(l) == 0 {
		t.Fatal("the standby does not log that it leads the relay")
	}
	if l := standby.logLines(t, "failpoint"); len(l) != 0 {
		t.Fatalf("the release build said something of failpoints: %q", l)
	}

	// The event is in the stream once, with the publish span as parent.
	waitFor(t, 30*time.Second, "the relay's cursor past the create", pending)
	js, _ := c.jetstream()
	st, err := js.Stream(t.Context(), eventstream.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	var found []*jetstream.RawStreamMsg
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		if ev, err := eventstream.Decode(m.Data); err == nil && ev.Revision == rv {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("revision %d is %d times in the stream, want once", rv, len(found))
	}
	if got, want := found[0].Header.Get(tracing.HeaderTraceparent), "00-"+traceID+"-"+pub.SpanID+"-01"; got != want {
		t.Fatalf("event traceparent %q, want %q", got, want)
	}
}
