package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/worker"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsembed"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/reconcilerworker/noop"
	"github.com/no8s/no8s/services/scheduler"
	"github.com/no8s/no8s/services/store"
)

// tcpProxy forwards connections to target. Cut closes every connection it
// carries and refuses new ones (nothing listens), as a database server that
// went away would; Restore listens on the same address again.
type tcpProxy struct {
	addr   string
	target string
	mu     sync.Mutex
	lis    net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{lis: lis, addr: lis.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept(lis)
	t.Cleanup(p.Cut)
	return p
}

func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tcpProxy) accept(lis net.Listener) {
	defer p.wg.Done()
	for {
		in, err := lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in) || !p.track(out) {
			in.Close()
			out.Close()
			continue
		}
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
	}
}

// Cut cuts every connection and refuses new ones.
func (p *tcpProxy) Cut() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.lis.Close()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
	p.wg.Wait()
}

// Restore accepts connections on the same address again.
func (p *tcpProxy) Restore(t *testing.T) {
	t.Helper()
	lis, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy listens again on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.lis, p.closed = lis, false
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(lis)
}

// outageStack is the control plane of TestDatabaseOutageAnswers503: the
// store (its PostgreSQL connections through a proxy), admission, the
// gateway, the scheduler and the noop reconciler, all in-process.
type outageStack struct {
	srv *httptest.Server
	// admissionProbes serves the probes as no8s-admission composes them
	// (its store's gRPC health, NATS).
	admissionProbes *httptest.Server
	proxy           *tcpProxy
	// admin reaches the test's database directly (not through the proxy)
	// to terminate its sessions and to make it read-only.
	admin  *pgx.Conn
	dbName string
	logs   *testenv.LogBuffer
}

func startOutageStack(t *testing.T, ctx context.Context) *outageStack {
	t.Helper()
	dbURL, drop, err := testenv.CreateDatabase(ctx, "gateway_outage")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	st := &outageStack{dbName: strings.TrimPrefix(u.Path, "/"), logs: &testenv.LogBuffer{}}
	adminURL := *u
	adminURL.Path = "/postgres"
	if st.admin, err = pgx.Connect(ctx, adminURL.String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.admin.Close(context.WithoutCancel(ctx)) })
	st.proxy = startProxy(t, u.Host)
	u.Host = st.proxy.addr

	ns, err := natsembed.Start(t.TempDir(), -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.NewTextHandler(io.MultiWriter(st.logs, testLogSink()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	run := func(fn func(context.Context) error) {
		wg.Add(1)
		go func() { defer wg.Done(); _ = fn(sctx) }()
	}
	listen := func() net.Listener {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return lis
	}
	dial := func(lis net.Listener) *grpc.ClientConn {
		conn, err := grpcserver.Dial(lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	scfg := store.DefaultConfig()
	scfg.DatabaseURL = u.String()
	scfg.MaxConns = 8
	scfg.ShutdownGrace = time.Second
	storeSvc, err := store.New(ctx, scfg, nc, log.With("service", "store"))
	if err != nil {
		t.Fatal(err)
	}
	storeLis, workerLis := listen(), listen()
	run(func(ctx context.Context) error { return storeSvc.Serve(ctx, storeLis, workerLis) })
	storeConn, workerConn := dial(storeLis), dial(workerLis)
	storeClient := storev1.NewStoreServiceClient(storeConn)
	acfg := admission.DefaultConfig()
	acfg.ShutdownGrace = time.Second
	admissionLis := listen()
	run(func(ctx context.Context) error {
		return admission.New(acfg, storeClient, log.With("service", "admission")).Serve(ctx, admissionLis)
	})
	admissionConn := dial(admissionLis)
	cfg := testConfig()
	cfg.RequestTimeout = 5 * time.Second
	cfg.Health.Ready = []health.Check{health.GRPC("store", storeConn), health.GRPC("admission", admissionConn), health.NATS(nc)}
	st.srv = httptest.NewServer(New(cfg, storeClient, admissionv1.NewAdmissionServiceClient(admissionConn), log.With("service", "gateway")).Handler())
	t.Cleanup(st.srv.Close)
	st.admissionProbes = httptest.NewServer(health.Handler(health.Config{Ready: []health.Check{health.GRPC("store", storeConn), health.NATS(nc)}}))
	t.Cleanup(st.admissionProbes.Close)

	sched, err := scheduler.New(scheduler.DefaultConfig(), reconcilev1.NewReconcileServiceClient(storeConn), js, log.With("service", "scheduler"))
	if err != nil {
		t.Fatal(err)
	}
	run(sched.Run)
	w, err := worker.New(noop.New("noop-outage"), worker.Config{Types: []sdk.TypeRef{sdk.Type("Outage", "v1")}, NATS: nc, Store: workerConn},
		worker.WithReplicaID("outage-test"), worker.WithShutdownGrace(time.Second, time.Second), worker.WithFetchWait(time.Second),
		worker.WithLogger(log.With("reconciler", "noop-outage")))
	if err != nil {
		t.Fatal(err)
	}
	run(w.Run)
	return st
}

// terminate ends every session of the test's database (57P01 for them).
func (st *outageStack) terminate(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := st.admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", st.dbName); err != nil {
		t.Fatalf("terminate sessions: %v", err)
	}
}

// readOnly makes every new session of the test's database read-only (or
// writable again) and ends the current ones, so the store's next sessions
// are (25006 for every write).
func (st *outageStack) readOnly(t *testing.T, ctx context.Context, on bool) {
	t.Helper()
	db := pgx.Identifier{st.dbName}.Sanitize()
	q := "ALTER DATABASE " + db + " SET default_transaction_read_only = on"
	if !on {
		q = "ALTER DATABASE " + db + " RESET default_transaction_read_only"
	}
	if _, err := st.admin.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	st.terminate(t, ctx)
}

func (st *outageStack) send(t *testing.T, method, path, ct, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, st.srv.URL+path, rd)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := st.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// outageResource is what the test reads of a resource.
type outageResource struct {
	ID                 int64          `json:"id"`
	Name               string         `json:"name"`
	Status             string         `json:"status"`
	Generation         int64          `json:"generation"`
	ObservedGeneration int64          `json:"observed_generation"`
	Spec               map[string]int `json:"spec"`
}

func (r outageResource) ready() bool {
	return r.Status == "ready" && r.ObservedGeneration == r.Generation
}

// list reads every Outage resource, page by page; ok is false when any
// page failed.
func (st *outageStack) list(t *testing.T) (map[string]outageResource, bool) {
	t.Helper()
	out := map[string]outageResource{}
	q := url.Values{"resource_type": {"Outage"}, "resource_type_version": {"v1"}, "limit": {"1000"}}
	for {
		resp, data := st.send(t, http.MethodGet, "/api/v1/resources?"+q.Encode(), "", "")
		if resp.StatusCode != http.StatusOK {
			return nil, false
		}
		var page []outageResource
		if err := json.Unmarshal(data, &page); err != nil {
			t.Fatalf("list: %v: %s", err, data)
		}
		for _, r := range page {
			out[r.Name] = r
		}
		tok := resp.Header.Get("X-Continue-Token")
		if tok == "" {
			return out, true
		}
		q.Set("continue", tok)
	}
}

// readyNames is the names of the ready resources.
func readyNames(rs map[string]outageResource) map[string]bool {
	out := map[string]bool{}
	for n, r := range rs {
		if r.ready() {
			out[n] = true
		}
	}
	return out
}

// firstReadyAfter polls the resources from the database's return until one
// that was not ready before the outage (before) is ready, and returns how
// long that took.
func (st *outageStack) firstReadyAfter(t *testing.T, returned time.Time, before map[string]bool) time.Duration {
	t.Helper()
	for time.Since(returned) < time.Minute {
		if rs, ok := st.list(t); ok {
			for n, r := range rs {
				if r.ready() && !before[n] {
					return time.Since(returned)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no resource became ready within a minute of the database's return")
	return 0
}

// outageLoad sends creates and updates of Outage resources at a steady
// rate and records what was acknowledged and every failure.
type outageLoad struct {
	st *outageStack
	mu sync.Mutex
	// created holds the acknowledged creates; size the highest
	// acknowledged spec.size per resource (each resource is written by
	// one sender, in order).
	created  map[string]bool
	size     map[string]int
	sent     int
	statuses map[int]int
	bad      []string
}

func (l *outageLoad) record(what string, resp *http.Response, data []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	l.statuses[resp.StatusCode]++
	if resp.StatusCode < 300 {
		return true
	}
	var e errorDoc
	_ = json.Unmarshal(data, &e)
	if resp.StatusCode != http.StatusServiceUnavailable || e.Code != "unavailable" || resp.Header.Get("Retry-After") == "" {
		l.bad = append(l.bad, fmt.Sprintf("%s: %d %s Retry-After %q: %s", what, resp.StatusCode, e.Code, resp.Header.Get("Retry-After"), data))
	}
	return false
}

// run sends at rate requests per second from senders goroutines until ctx
// ends; a sender alternates a create and an update of one of its own
// acknowledged resources.
func (l *outageLoad) run(ctx context.Context, t *testing.T, rate, senders int) {
	tokens := make(chan struct{}, senders)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			var mine []outageResource
			n := 0
			for range tokens {
				n++
				if n%2 == 1 || len(mine) == 0 {
					name := fmt.Sprintf("s%d-%d", g, n)
					resp, data := l.st.send(t, http.MethodPost, "/api/v1/resources", "application/json",
						fmt.Sprintf(`{"name":%q,"resource_type_name":"Outage","resource_type_version":"v1","spec":{"size":0}}`, name))
					if l.record("create "+name, resp, data) {
						var r outageResource
						_ = json.Unmarshal(data, &r)
						mine = append(mine, r)
						l.mu.Lock()
						l.created[name] = true
						l.mu.Unlock()
					}
					continue
				}
				r := mine[n%len(mine)]
				resp, data := l.st.send(t, http.MethodPatch, "/api/v1/resources/"+strconv.FormatInt(r.ID, 10), "application/merge-patch+json",
					fmt.Sprintf(`{"spec":{"size":%d}}`, n))
				if l.record("update "+r.Name, resp, data) {
					l.mu.Lock()
					l.size[r.Name] = max(l.size[r.Name], n)
					l.mu.Unlock()
				}
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			close(tokens)
			wg.Wait()
			return
		case <-tick.C:
			select {
			case tokens <- struct{}{}:
			default: // every sender is busy: the rate drops, and the test says so
			}
		}
	}
}

// TestDatabaseOutageAnswers503 runs the control plane with the store's
// PostgreSQL connections through a proxy, under a load of creates and
// updates, through three faults: connections refused for 20 s (the proxy
// cut), every session terminated (57P01), and the database read-only
// (25006). Every failed request must be a 503 unavailable with Retry-After
// (never a 500); the gateway's /readyz is 503 while the store cannot use
// its database; afterwards every acknowledged write is present and every
// resource reaches Ready. The time from the database's return to the first
// Ready is logged. The shared PostgreSQL server is never stopped.
func TestDatabaseOutageAnswers503(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st := startOutageStack(t, ctx)

	if resp, data := st.send(t, http.MethodPost, "/api/v1/resource-types", "application/json",
		`{"name":"Outage","version":"v1","schema":{"type":"object","properties":{"size":{"type":"integer"}}}}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create type: %d %s", resp.StatusCode, data)
	}
	resp, data := st.send(t, http.MethodPost, "/api/v1/resources", "application/json",
		`{"name":"one","resource_type_name":"Outage","resource_type_version":"v1","spec":{"size":1}}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create resource: %d %s", resp.StatusCode, data)
	}
	var one outageResource
	_ = json.Unmarshal(data, &one)
	id := "/api/v1/resources/" + strconv.FormatInt(one.ID, 10)

	const rate = 60
	load := &outageLoad{st: st, created: map[string]bool{}, size: map[string]int{}, statuses: map[int]int{}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	began := time.Now()
	go func() { defer close(loadDone); load.run(loadCtx, t, rate, 16) }()
	time.Sleep(3 * time.Second)

	// 1. Connections refused for 20 s.
	before, ok := st.list(t)
	if !ok {
		t.Fatal("list before the outage failed")
	}
	st.proxy.Cut()
	cut := time.Now()
	notReady, readyPolls := 0, 0
	for time.Since(cut) < 20*time.Second {
		resp, data := st.send(t, http.MethodGet, "/readyz", "", "")
		if time.Since(cut) > 3*time.Second {
			readyPolls++
			if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(data), `"store"`) {
				notReady++
			} else {
				t.Errorf("/readyz %s into the cut: %d %s, want 503 naming the store", time.Since(cut).Round(time.Millisecond), resp.StatusCode, data)
			}
			if resp, err := http.Get(st.admissionProbes.URL + health.ReadyPath); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("admission's /readyz %s into the cut: %v %v, want 503", time.Since(cut).Round(time.Millisecond), resp, err)
			} else {
				resp.Body.Close()
			}
		}
		if time.Since(cut) > 5*time.Second && time.Since(cut) < 7*time.Second {
			st.everyKind(t, id)
		}
		time.Sleep(500 * time.Millisecond)
	}
	st.proxy.Restore(t)
	t.Logf("refused for %s: /readyz was 503 naming the store in %d of %d polls after the first 3 s", time.Since(cut).Round(time.Millisecond), notReady, readyPolls)
	t.Logf("refused connections: the first Ready %s after the database's return", st.firstReadyAfter(t, time.Now(), readyNames(before)).Round(time.Millisecond))

	// 2. Every session terminated (57P01), a few times over 3 s.
	time.Sleep(3 * time.Second)
	for range 6 {
		st.terminate(t, ctx)
		time.Sleep(500 * time.Millisecond)
	}

	// 3. The database read-only (25006) for 10 s.
	time.Sleep(3 * time.Second)
	before, ok = st.list(t)
	if !ok {
		t.Fatal("list before the read-only phase failed")
	}
	st.readOnly(t, ctx, true)
	ro := time.Now()
	for time.Since(ro) < 10*time.Second {
		time.Sleep(500 * time.Millisecond)
		if time.Since(ro) > 3*time.Second {
			if resp, data := st.send(t, http.MethodGet, "/readyz", "", ""); resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("/readyz %s into the read-only phase: %d %s, want 503", time.Since(ro).Round(time.Millisecond), resp.StatusCode, data)
			}
		}
	}
	st.readOnly(t, ctx, false)
	t.Logf("read-only: the first Ready %s after the database's return", st.firstReadyAfter(t, time.Now(), readyNames(before)).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	stopLoad()
	<-loadDone
	elapsed := time.Since(began)

	load.mu.Lock()
	defer load.mu.Unlock()
	perSecond := float64(load.sent) / elapsed.Seconds()
	t.Logf("load: %d creates and updates in %s (%.1f/s), statuses %v", load.sent, elapsed.Round(time.Millisecond), perSecond, load.statuses)
	// The load ran through every phase (its statuses are checked below);
	// how fast is the bench's business, not this test's.
	if load.sent == 0 {
		t.Error("the load sent no request")
	}
	for _, b := range load.bad {
		t.Errorf("a failed request that is not 503 unavailable with Retry-After: %s", b)
	}
	if load.statuses[http.StatusServiceUnavailable] == 0 {
		t.Errorf("no request failed during the outage: the faults did not reach the store")
	}
	for _, state := range []string{"sqlstate=none", "sqlstate=57P01", "sqlstate=25006"} {
		if !strings.Contains(st.logs.String(), state) {
			t.Errorf("the store logged no %q: want each fault logged as unavailable with its SQLSTATE", state)
		}
	}
	if strings.Contains(st.logs.String(), "internal error") {
		for _, line := range strings.Split(st.logs.String(), "\n") {
			if strings.Contains(line, "internal error") {
				t.Errorf("logged: %s", line)
			}
		}
	}

	// Afterwards: every acknowledged write is there, and everything is Ready.
	deadline := time.Now().Add(90 * time.Second)
	for {
		rs, ok := st.list(t)
		var missing, stale, pending []string
		if ok {
			for name := range load.created {
				r, found := rs[name]
				switch {
				case !found:
					missing = append(missing, name)
				case r.Spec["size"] < load.size[name]:
					stale = append(stale, fmt.Sprintf("%s size %d < %d", name, r.Spec["size"], load.size[name]))
				case !r.ready():
					pending = append(pending, name)
				}
			}
			if len(missing)+len(stale) > 0 {
				t.Fatalf("acknowledged writes lost: missing %v, stale %v", missing, stale)
			}
			if len(pending) == 0 {
				t.Logf("%d acknowledged creates present and Ready %s after the load stopped", len(load.created), time.Since(deadline.Add(-90*time.Second)).Round(time.Millisecond))
				if resp, data := st.send(t, http.MethodGet, "/readyz", "", ""); resp.StatusCode != http.StatusOK {
					t.Errorf("/readyz after the outage: %d %s", resp.StatusCode, data)
				}
				break
			}
		}
		if ok && os.Getenv("NO8S_TEST_LOG") != "" && len(pending) > 0 {
			r := rs[pending[0]]
			t.Logf("%d pending, e.g. %+v", len(pending), r)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not Ready 90 s after the load stopped: %d of %d, e.g. %v", len(pending), len(load.created), pending[:min(5, len(pending))])
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// everyKind sends one request of every kind and wants each answered 503
// unavailable with Retry-After, never 500; a 500 would be logged with its
// cause and request id.
func (st *outageStack) everyKind(t *testing.T, id string) {
	t.Helper()
	requests := []struct{ method, path, ct, body string }{
		{http.MethodPatch, id, "application/merge-patch+json", `{"spec":{"size":2}}`},
		{http.MethodPut, id, "application/json", `{"spec":{"size":3}}`},
		{http.MethodPost, "/api/v1/resources", "application/json", `{"name":"two","resource_type_name":"Outage","resource_type_version":"v1","spec":{}}`},
		{http.MethodGet, id, "", ""},
		{http.MethodGet, "/api/v1/resources", "", ""},
		{http.MethodGet, "/api/v1/resource-types", "", ""},
		{http.MethodDelete, id, "", ""},
		{http.MethodPut, id + "/finalizers", "application/json", `{"add":["example.com/x"]}`},
		{http.MethodGet, "/api/v1/admission-webhooks", "", ""},
	}
	for _, rq := range requests {
		resp, data := st.send(t, rq.method, rq.path, rq.ct, rq.body)
		var e errorDoc
		_ = json.Unmarshal(data, &e)
		if resp.StatusCode == http.StatusInternalServerError {
			logged := false
			for _, line := range strings.Split(st.logs.String(), "\n") {
				if strings.Contains(line, e.RequestID) && strings.Contains(line, "level=ERROR") && !strings.Contains(line, `error="internal error"`) {
					logged = true
				}
			}
			t.Errorf("%s %s: 500 %s (cause logged with the request id: %v)", rq.method, rq.path, data, logged)
			continue
		}
		if resp.StatusCode != http.StatusServiceUnavailable || e.Code != "unavailable" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: %d Retry-After %q %s, want 503 unavailable with Retry-After", rq.method, rq.path, resp.StatusCode, resp.Header.Get("Retry-After"), data)
		}
	}
}

// testLogSink shows the logs when NO8S_TEST_LOG is set.
func testLogSink() io.Writer {
	if os.Getenv("NO8S_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
