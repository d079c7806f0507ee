package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/nats-io/nats.go"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/githubfake"
)

// scrape is one /metrics answer, parsed.
type scrape map[string]*dto.MetricFamily

// scrapeURL GETs url, parses it with the Prometheus text parser and lints
// it with promlint: a problem fails the test.
func scrapeURL(t *testing.T, name, url string) scrape {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("%s: GET %s: %v", name, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: GET %s: %d", name, url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %s does not parse: %v", name, url, err)
	}
	list := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		list = append(list, f)
	}
	problems, err := promlint.NewWithMetricFamilies(list).Lint()
	if err != nil {
		t.Fatalf("%s: promlint: %v", name, err)
	}
	for _, pr := range problems {
		t.Errorf("%s: promlint: %s: %s", name, pr.Metric, pr.Text)
	}
	return fams
}

// value sums the samples of family name whose labels include want (a
// histogram counts its observations); ok is false when there is none.
func (s scrape) value(name string, want map[string]string) (v float64, ok bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, w := range want {
			if labels[k] != w {
				match = false
			}
		}
		if !match {
			continue
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v, ok
}

// series lists every series as name{labels}, sorted.
func (s scrape) series() []string {
	var out []string
	for name, f := range s {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out = append(out, name+"{"+strings.Join(ls, ",")+"}")
		}
	}
	sort.Strings(out)
	return out
}

// metricsURL is the /metrics URL beside a /readyz probe URL.
func metricsURL(readyz string) string { return strings.TrimSuffix(readyz, "/readyz") + "/metrics" }

// expected are the families each kind of process serves.
var expectedFamilies = map[string][]string{
	"common": {"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"},
	"store": {"no8s_store_commits_total", "no8s_store_committed_writes_total", "no8s_store_commit_duration_seconds", "no8s_store_commit_batch_writes",
		"no8s_store_relay_published_total", "no8s_store_relay_late_total", "no8s_store_relay_foreign_total", "no8s_store_relay_degraded",
		"no8s_store_relay_leader", "no8s_store_relay_cursor_revision", "no8s_store_stream_identity_checks_total", "no8s_store_outbox_pending_rows", "no8s_store_outbox_oldest_pending_age_seconds",
		"no8s_grpc_server_started_total", "no8s_grpc_server_handled_total", "no8s_grpc_server_handling_seconds"},
	"admission": {"no8s_grpc_server_handled_total", "no8s_grpc_server_handling_seconds", "no8s_grpc_client_handled_total", "no8s_grpc_client_handling_seconds",
		"no8s_admission_schema_cache_lookups_total", "no8s_admission_webhook_calls_total", "no8s_admission_webhook_call_duration_seconds"},
	"gateway": {"no8s_http_requests_total", "no8s_http_request_duration_seconds", "no8s_http_requests_in_flight",
		"no8s_grpc_client_started_total", "no8s_grpc_client_handled_total", "no8s_grpc_client_handling_seconds",
		"no8s_watch_streams_open", "no8s_watch_streams_live", "no8s_watch_events_fanned_out_total", "no8s_watch_slow_consumers_total",
		"no8s_watch_slow_consumers_dropped_total", "no8s_watch_catchups_total", "no8s_watch_gone_total", "no8s_watch_foreign_messages_total",
		"no8s_queue_input_messages_total"},
	"scheduler": {"no8s_scheduler_leader", "no8s_scheduler_dispatches_total", "no8s_scheduler_backoff_delay_seconds", "no8s_scheduler_tracked_resources",
		"no8s_scheduler_foreign_messages_total", "no8s_grpc_client_handled_total"},
	"scheduler-leader": {"no8s_scheduler_queue_depth", "no8s_scheduler_queue_oldest_age_seconds", "no8s_resources"},
	"reconciler": {"no8s_reconcile_total", "no8s_reconcile_duration_seconds", "no8s_reconcile_step_duration_seconds", "no8s_reconcile_in_flight",
		"no8s_reconcile_lease_renewals_total", "no8s_reconcile_lease_lost_total", "no8s_worker_items_total", "no8s_worker_ready",
		"no8s_grpc_client_handled_total"},
	"registry-sync": {"no8s_registry_sync_duration_seconds", "no8s_registry_sync_rows_read_total", "no8s_registry_desired", "no8s_registry_ready",
		"no8s_registry_failed", "no8s_registry_sync_leader", "no8s_httpsource_polls_total", "no8s_httpsource_poll_duration_seconds"},
}

func requireFamilies(t *testing.T, name string, s scrape, kinds ...string) {
	t.Helper()
	for _, k := range append([]string{"common"}, kinds...) {
		for _, f := range expectedFamilies[k] {
			if s[f] == nil {
				t.Errorf("%s: no %s in /metrics", name, f)
			}
		}
	}
}

// found collects every family name any scrape of the test saw, for the
// dashboard and rule checks.
type found struct {
	mu    sync.Mutex
	names map[string]bool
}

func (f *found) add(s scrape) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.names == nil {
		f.names = map[string]bool{}
	}
	for n := range s {
		f.names[n] = true
	}
}

// TestMetricsOnEveryProcess scrapes /metrics of every process of a
// control plane run as separate services (a store, admission, a gateway,
// two schedulers, registry-sync and the noop reconciler), under a small
// load: every family is there, passes promlint, and moves; the outbox
// backlog returns to 0; exactly one scheduler reports itself leader. Then
// 1,000 resources with distinct names in 10 namespaces add no series but
// their type's, and the dashboard and the alert rules name only families
// found here.
func TestMetricsOnEveryProcess(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched-a", 2*time.Second)
	c.startScheduler(c.storeAddrs[0], "sched-b", 2*time.Second)
	tc := &tenantCluster{cluster: c, base: base, ns: "default"}
	tc.startSync("sync-a")
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Metered", "version": "v1", "schema": map[string]any{
		"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer", "default": 1}}}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Metered/v1")
	var hookCalls atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hookCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}))
	defer hook.Close()
	if r := do(t, "POST", base+"/api/v1/admission-webhooks", map[string]any{
		"name": "metered-check", "resource_type_name": "Metered", "webhook_url": hook.URL,
		"webhook_type": "validating", "operations": []string{"CREATE", "UPDATE"},
	}); r.status != 201 {
		t.Fatalf("register webhook: %d %s", r.status, r.body)
	}

	urls := map[string]string{"gateway": base + "/metrics"}
	for name, readyz := range c.probes {
		if strings.HasPrefix(name, "gateway-") {
			continue
		}
		urls[name] = metricsURL(readyz)
	}
	kinds := func(name string) []string {
		switch {
		case strings.HasPrefix(name, "store"):
			return []string{"store"}
		case strings.HasPrefix(name, "admission"):
			return []string{"admission"}
		case name == "gateway":
			return []string{"gateway"}
		case strings.HasPrefix(name, "scheduler"):
			return []string{"scheduler"}
		case strings.HasPrefix(name, "reconciler"):
			return []string{"reconciler"}
		case strings.HasPrefix(name, "registry-sync"):
			return []string{"registry-sync"}
		}
		t.Fatalf("unknown process %s", name)
		return nil
	}
	scrapeAll := func() map[string]scrape {
		out := map[string]scrape{}
		for name, u := range urls {
			out[name] = scrapeURL(t, name, u)
		}
		return out
	}
	// A process may log that its probes serve a moment before its listener
	// takes connections: wait for every /metrics to answer once.
	for name, u := range urls {
		waitFor(t, 30*time.Second, name+" /metrics", func() error {
			resp, err := httpClient.Get(u)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %d", u, resp.StatusCode)
			}
			return nil
		})
	}
	var seen found
	before := scrapeAll()

	// A small load: resources created until ready, one updated, one
	// watched, one deleted.
	waitWebhook := func() {
		waitFor(t, 10*time.Second, "the webhook registered in admission", func() error {
			r := do(t, "POST", base+"/api/v1/resources?dry_run=true", map[string]any{"resource_type_name": "Metered", "resource_type_version": "v1", "name": "probe", "spec": map[string]any{}})
			if hookCalls.Load() == 0 {
				return fmt.Errorf("webhook not called yet (%d)", r.status)
			}
			return nil
		})
	}
	waitWebhook()
	watchReq, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/api/v1/events", nil)
	watchResp, err := http.DefaultClient.Do(watchReq)
	if err != nil {
		t.Fatal(err)
	}
	defer watchResp.Body.Close()
	var ids []string
	for i := range 10 {
		r := do(t, "POST", base+"/api/v1/resources", map[string]any{"resource_type_name": "Metered", "resource_type_version": "v1",
			"name": fmt.Sprintf("load-%d", i), "spec": map[string]any{"size": i}})
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		ids = append(ids, fmt.Sprint(r.json(t)["id"]))
	}
	waitAllReady(t, base, ids)
	if r := do(t, "GET", base+"/api/v1/resources/"+ids[0], nil); r.status != 200 {
		t.Fatalf("get: %d", r.status)
	}
	if r := do(t, "GET", base+"/api/v1/no-such-route/"+ids[0], nil); r.status != 404 {
		t.Fatalf("unknown route: %d", r.status)
	}
	// One request through the NATS queue input.
	_, nc := c.jetstream()
	waitFor(t, 20*time.Second, "a queue input request answered", func() error {
		m := nats.NewMsg(subjects.InputRequestApply)
		m.Header.Set("Authorization", "Bearer "+adminToken)
		m.Data = []byte("kind: Resource\ntype: Metered/v1\nmetadata:\n  name: queued-1\nspec: {}\n")
		reply, err := nc.RequestMsg(m, 5*time.Second)
		if err != nil {
			return err
		}
		if st := reply.Header.Get(subjects.InputStatusHeader); st != "200" && st != "201" {
			return fmt.Errorf("status %s: %s", st, reply.Data)
		}
		return nil
	})

	// The outbox drains: pending returns to 0 and the oldest age with it.
	store := urls["store-0"]
	waitFor(t, 20*time.Second, "the outbox backlog back to 0", func() error {
		s := scrapeURL(t, "store-0", store)
		p, _ := s.value("no8s_store_outbox_pending_rows", nil)
		a, _ := s.value("no8s_store_outbox_oldest_pending_age_seconds", nil)
		if p != 0 || a != 0 {
			return fmt.Errorf("pending %v, oldest %v s", p, a)
		}
		return nil
	})
	// Exactly one scheduler leads, and it has walked its state.
	var leader string
	waitFor(t, 20*time.Second, "one scheduler leader with its gauges", func() error {
		sum := 0.0
		for _, n := range []string{"scheduler-sched-a", "scheduler-sched-b"} {
			s := scrapeURL(t, n, urls[n])
			v, _ := s.value("no8s_scheduler_leader", nil)
			sum += v
			if v == 1 {
				if r, _ := s.value("no8s_resources", map[string]string{"type": "Metered/v1", "status": "ready"}); r < 10 {
					return fmt.Errorf("%s reports %v ready Metered/v1", n, r)
				}
			}
		}
		if sum != 1 {
			return fmt.Errorf("leader gauges sum to %v", sum)
		}
		return nil
	})
	for _, n := range []string{"scheduler-sched-a", "scheduler-sched-b"} {
		if v, _ := scrapeURL(t, n, urls[n]).value("no8s_scheduler_leader", nil); v == 1 {
			leader = n
		}
	}
	var after map[string]scrape
	waitFor(t, 20*time.Second, "the registry-sync leader", func() error {
		after = scrapeAll()
		if v, _ := after["registry-sync-sync-a"].value("no8s_registry_sync_leader", nil); v != 1 {
			return fmt.Errorf("registry-sync does not lead yet")
		}
		return nil
	})
	for name, s := range after {
		seen.add(s)
		k := kinds(name)
		if name == leader {
			k = append(k, "scheduler-leader")
		}
		requireFamilies(t, name, s, k...)
	}

	// Counters moved under the load.
	moved := func(proc, family string, labels map[string]string) {
		t.Helper()
		b, _ := before[proc].value(family, labels)
		a, ok := after[proc].value(family, labels)
		if !ok || a <= b {
			t.Errorf("%s: %s%v did not rise under load: %v → %v", proc, family, labels, b, a)
		}
	}
	moved("gateway", "no8s_http_requests_total", map[string]string{"route": "/api/v1/resources", "method": "POST", "code": "201"})
	moved("gateway", "no8s_http_requests_total", map[string]string{"route": "unmatched", "code": "404"})
	moved("gateway", "no8s_http_request_duration_seconds", map[string]string{"route": "/api/v1/resources/:id", "method": "GET"})
	moved("gateway", "no8s_grpc_client_handled_total", map[string]string{"grpc_service": "no8s.admission.v1.AdmissionService"})
	moved("gateway", "no8s_watch_events_fanned_out_total", nil)
	moved("gateway", "no8s_queue_input_messages_total", map[string]string{"outcome": "answered"})
	moved("store-0", "no8s_store_commits_total", nil)
	moved("store-0", "no8s_store_commit_duration_seconds", nil)
	moved("store-0", "no8s_store_relay_published_total", nil)
	moved("store-0", "no8s_grpc_server_handled_total", map[string]string{"grpc_code": "OK"})
	moved("admission-0", "no8s_admission_webhook_calls_total", map[string]string{"webhook": "metered-check", "outcome": "allowed"})
	moved("admission-0", "no8s_admission_schema_cache_lookups_total", nil)
	moved(leader, "no8s_scheduler_dispatches_total", nil)
	moved("reconciler-noop", "no8s_reconcile_total", map[string]string{"reconciler": "noop", "type": "Metered/v1", "result": "success"})
	moved("reconciler-noop", "no8s_reconcile_duration_seconds", map[string]string{"type": "Metered/v1"})
	moved("reconciler-noop", "no8s_reconcile_step_duration_seconds", nil)
	moved("reconciler-noop", "no8s_worker_items_total", map[string]string{"action": "ack"})
	if v, _ := after["gateway"].value("no8s_watch_streams_open", nil); v < 1 {
		t.Errorf("gateway: %v watches open with one open", v)
	}
	if v, _ := after["store-0"].value("no8s_store_stream_identity_checks_total", map[string]string{"result": "ok"}); v < 1 {
		t.Errorf("store: %v identity checks passed with the relay leading", v)
	}
	if v, _ := after["store-0"].value("no8s_store_relay_late_total", nil); v != 0 {
		t.Errorf("store: relay late %v in a healthy run", v)
	}

	// Cardinality: 1,000 resources with distinct names in 10 namespaces
	// add no series whose labels name any of them.
	t.Run("Cardinality", func(t *testing.T) {
		for ns := range 10 {
			if r := do(t, "POST", base+"/api/v1/namespaces", map[string]any{"name": fmt.Sprintf("tenant-ns-%d", ns)}); r.status != 201 {
				t.Fatalf("namespace: %d %s", r.status, r.body)
			}
		}
		beforeSeries := map[string][]string{}
		for name, u := range urls {
			beforeSeries[name] = scrapeURL(t, name, u).series()
		}
		var names sync.Map
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		var created []string
		var mu sync.Mutex
		for w := range 16 {
			wg.Go(func() {
				for i := w; i < 1000; i += 16 {
					name := fmt.Sprintf("card-%04d-%x", i, time.Now().UnixNano()%0xfffff)
					ns := fmt.Sprintf("tenant-ns-%d", i%10)
					names.Store(name, true)
					r := do(t, "POST", base+"/api/v1/resources", map[string]any{"resource_type_name": "Metered", "resource_type_version": "v1",
						"namespace": ns, "name": name, "spec": map[string]any{"size": i}})
					if r.status != 201 {
						errs <- fmt.Errorf("create %s/%s: %d %s", ns, name, r.status, r.body)
						return
					}
					var doc map[string]any
					_ = json.Unmarshal(r.body, &doc)
					mu.Lock()
					created = append(created, fmt.Sprint(doc["id"]))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		waitAllReady(t, base, created)
		ids := map[string]bool{}
		for _, id := range created {
			ids[id] = true
		}
		for name, u := range urls {
			s := scrapeURL(t, name, u)
			seen.add(s)
			var added []string
			for _, x := range s.series() {
				if !slices.Contains(beforeSeries[name], x) {
					added = append(added, x)
				}
			}
			for _, x := range added {
				labels := x[strings.Index(x, "{")+1 : len(x)-1]
				for _, kv := range strings.Split(labels, ",") {
					k, v, _ := strings.Cut(kv, "=")
					if _, isName := names.Load(v); isName || (ids[v] && k != "code" && k != "grpc_code") || strings.HasPrefix(v, "tenant-ns-") || strings.Contains(v, "card-") {
						t.Errorf("%s: series %s names a resource, an id or a namespace", name, x)
					}
				}
			}
			if len(added) > 20 {
				t.Errorf("%s: %d series added by 1,000 resources of one type (want a handful at most): %v", name, len(added), added)
			}
			t.Logf("%s: %d series before, %d added by 1,000 resources in 10 namespaces: %v", name, len(beforeSeries[name]), len(added), added)
		}
	})

	t.Run("DashboardAndRulesNameFoundMetrics", func(t *testing.T) {
		checkObservabilityFiles(t, seen.names)
	})
}

// waitAllReady waits until every resource of ids is ready.
func waitAllReady(t *testing.T, base string, ids []string) {
	t.Helper()
	pending := slices.Clone(ids)
	waitFor(t, 120*time.Second, fmt.Sprintf("%d resources ready", len(ids)), func() error {
		var left []string
		for _, id := range pending {
			r := do(t, "GET", base+"/api/v1/resources/"+id, nil)
			var doc map[string]any
			if r.status != 200 || json.Unmarshal(r.body, &doc) != nil || doc["status"] != "ready" {
				left = append(left, id)
			}
		}
		pending = left
		if len(left) > 0 {
			return fmt.Errorf("%d not ready yet", len(left))
		}
		return nil
	})
}

// metricRef matches a metric family named in a PromQL expression.
var metricRef = regexp.MustCompile(`\b(no8s_[a-z0-9_]+|go_[a-z0-9_]+|process_[a-z0-9_]+)\b`)

// family strips the suffixes of a histogram's series.
func family(name string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok {
			return b
		}
	}
	return name
}

// checkObservabilityFiles: every metric the dashboard and the alert rules
// of deploy/observability name is among names (found by a scrape).
func checkObservabilityFiles(t *testing.T, names map[string]bool) {
	t.Helper()
	dir := filepath.Join("..", "..", "deploy", "observability")
	dash, err := os.ReadFile(filepath.Join(dir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &doc); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var exprs []string
	for _, p := range doc.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	rules, err := os.ReadFile(filepath.Join(dir, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(rules, &rf); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	n := 0
	for _, e := range exprs {
		for _, m := range metricRef.FindAllString(e, -1) {
			n++
			if !names[family(m)] && !names[m] {
				t.Errorf("%s is named in deploy/observability (%q) but no process served it", m, e)
			}
		}
	}
	t.Logf("%d queries name %d metrics, every one served", len(exprs), n)
}

// TestMetricsNo8sDev scrapes no8s dev's metrics listener: every service of
// the stack records on one registry, served on its own address, which
// passes promlint and moves under a small load.
func TestMetricsNo8sDev(t *testing.T) {
	addrs, _ := startDevServing(t, noPostgreSQL(), "DevMetered", map[string]any{"type": "object"})
	if addrs.MetricsURL == "" {
		t.Fatal("no8s dev's ready file names no metrics URL")
	}
	base := addrs.APIURL
	before := scrapeURL(t, "no8s-dev", addrs.MetricsURL)
	var ids []string
	for i := range 5 {
		r := do(t, "POST", base+"/api/v1/resources", map[string]any{"resource_type_name": "DevMetered", "resource_type_version": "v1",
			"name": fmt.Sprintf("dev-%d", i), "spec": map[string]any{}})
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		ids = append(ids, fmt.Sprint(r.json(t)["id"]))
	}
	waitAllReady(t, base, ids)
	var after scrape
	waitFor(t, 20*time.Second, "the stack's gauges", func() error {
		after = scrapeURL(t, "no8s-dev", addrs.MetricsURL)
		if v, _ := after.value("no8s_resources", map[string]string{"type": "DevMetered/v1", "status": "ready"}); v < 5 {
			return fmt.Errorf("%v DevMetered/v1 ready", v)
		}
		if p, _ := after.value("no8s_store_outbox_pending_rows", nil); p != 0 {
			return fmt.Errorf("outbox pending %v", p)
		}
		return nil
	})
	var want []string
	for _, k := range []string{"common", "store", "gateway", "scheduler", "scheduler-leader", "registry-sync"} {
		want = append(want, expectedFamilies[k]...)
	}
	want = append(want, "no8s_admission_schema_cache_lookups_total", "no8s_reconcile_in_flight", "no8s_worker_ready", "no8s_worker_items_total")
	for _, f := range want {
		if after[f] == nil {
			t.Errorf("no8s dev: no %s in /metrics", f)
		}
	}
	for _, c := range []struct {
		family string
		labels map[string]string
	}{
		{"no8s_http_requests_total", map[string]string{"route": "/api/v1/resources", "method": "POST"}},
		{"no8s_store_commits_total", nil},
		{"no8s_store_relay_published_total", nil},
		{"no8s_scheduler_dispatches_total", nil},
		{"no8s_grpc_server_handled_total", map[string]string{"grpc_service": "no8s.admission.v1.AdmissionService"}},
		{"no8s_grpc_server_handled_total", map[string]string{"grpc_service": "no8s.store.v1.StoreService"}},
	} {
		b, _ := before.value(c.family, c.labels)
		if a, _ := after.value(c.family, c.labels); a <= b {
			t.Errorf("no8s dev: %s%v did not rise: %v → %v", c.family, c.labels, b, a)
		}
	}
	if v, _ := after.value("no8s_scheduler_leader", nil); v != 1 {
		t.Errorf("no8s dev: scheduler leader %v", v)
	}
}

// TestGitHubWorkflowMetrics: the github-workflow reconciler counts its
// plugin calls by outcome and shows the token's rate limit as the fake
// GitHub reported it, on its probe port's /metrics.
func TestGitHubWorkflowMetrics(t *testing.T) {
	deploy := &githubfake.Workflow{Repository: ghRepo, File: "deploy.yml", Name: "deploy", Inputs: []string{"environment"}, RunFor: time.Second}
	e := newGHEnv(t, deploy)
	e.startWorker("gh", e.token)
	id := idOf(e.create("metered", "deploy.yml", map[string]any{"environment": "prod"}, ""))
	waitResource(t, e.base, id, "ready", ready)
	s := scrapeURL(t, "reconciler-gh", metricsURL(e.c.probes["reconciler-gh"]))
	if v, _ := s.value("no8s_action_calls_total", map[string]string{"plugin": "github_actions", "operation": "apply", "outcome": "done"}); v < 1 {
		t.Errorf("no8s_action_calls_total{apply,done} = %v after a run succeeded", v)
	}
	if v, _ := s.value("no8s_action_calls_total", map[string]string{"plugin": "github_actions", "operation": "apply", "outcome": "in_progress"}); v < 1 {
		t.Errorf("no8s_action_calls_total{apply,in_progress} = %v while a run went on", v)
	}
	if v, ok := s.value("no8s_github_rate_limit_remaining", nil); !ok || v < 0 {
		t.Errorf("no8s_github_rate_limit_remaining = %v (present %v) after GitHub answered", v, ok)
	}
	if v, _ := s.value("no8s_reconcile_total", map[string]string{"reconciler": "github-workflow", "result": "success"}); v < 1 {
		t.Errorf("no8s_reconcile_total{github-workflow,success} = %v", v)
	}
}
