package gateway

import (
	"context"
	"encoding/json"
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

	"github.com/nats-io/nats.go"

	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsembed"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store"
)

// tcpProxy forwards connections to target until closed; closing it closes
// every connection it carries and refuses new ones, as a database server
// that went away would.
type tcpProxy struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
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
	p := &tcpProxy{lis: lis, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
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

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.lis.Accept()
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

// Close cuts every connection and refuses new ones.
func (p *tcpProxy) Close() {
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
	p.mu.Unlock()
	p.wg.Wait()
}

// TestDatabaseOutageAnswers503 runs a store whose PostgreSQL connection goes
// through a proxy, cuts it, and shows that every kind of request is then
// answered 503 unavailable with Retry-After (never 500), and that any 500
// would be logged with its cause and request id.
func TestDatabaseOutageAnswers503(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dbURL, drop, err := testenv.CreateDatabase(ctx, "gateway_outage")
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.lis.Addr().String()

	dir := t.TempDir()
	ns, err := natsembed.Start(dir, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	var logs testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testLogSink()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	serve := func(fn func(context.Context, net.Listener) error) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = fn(ctx, lis) }()
		return lis.Addr().String()
	}
	scfg := store.DefaultConfig()
	scfg.DatabaseURL = u.String()
	scfg.MaxConns = 4
	scfg.ShutdownGrace = time.Second
	storeSvc, err := store.New(ctx, scfg, nc, log.With("service", "store"))
	if err != nil {
		t.Fatal(err)
	}
	storeConn, err := grpcserver.Dial(serve(func(ctx context.Context, lis net.Listener) error { return storeSvc.Serve(ctx, lis, nil) }))
	if err != nil {
		t.Fatal(err)
	}
	defer storeConn.Close()
	storeClient := storev1.NewStoreServiceClient(storeConn)
	acfg := admission.DefaultConfig()
	acfg.ShutdownGrace = time.Second
	admissionConn, err := grpcserver.Dial(serve(admission.New(acfg, storeClient, log.With("service", "admission")).Serve))
	if err != nil {
		t.Fatal(err)
	}
	defer admissionConn.Close()
	cfg := DefaultConfig()
	cfg.RequestTimeout = 5 * time.Second
	srv := httptest.NewServer(New(cfg, storeClient, admissionv1.NewAdmissionServiceClient(admissionConn), log.With("service", "gateway")).Handler())
	defer srv.Close()

	send := func(method, path, ct, body string) (*http.Response, []byte) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, srv.URL+path, rd)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp, data
	}
	// Before the outage: a type and a resource (admission runs without
	// the live-reconciler rule here).
	if resp, data := send(http.MethodPost, "/api/v1/resource-types", "application/json",
		`{"name":"Outage","version":"v1","schema":{"type":"object","properties":{"size":{"type":"integer"}}}}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create type: %d %s", resp.StatusCode, data)
	}
	resp, data := send(http.MethodPost, "/api/v1/resources", "application/json",
		`{"name":"one","resource_type_name":"Outage","resource_type_version":"v1","spec":{"size":1}}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create resource: %d %s", resp.StatusCode, data)
	}
	var r struct {
		ID int64 `json:"id"`
	}
	_ = json.Unmarshal(data, &r)
	id := "/api/v1/resources/" + strconv.FormatInt(r.ID, 10)

	proxy.Close()

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
	for round := range 3 {
		for _, rq := range requests {
			resp, data := send(rq.method, rq.path, rq.ct, rq.body)
			var e errorDoc
			_ = json.Unmarshal(data, &e)
			if resp.StatusCode == http.StatusInternalServerError {
				logged := false
				for _, line := range strings.Split(logs.String(), "\n") {
					if strings.Contains(line, e.RequestID) && strings.Contains(line, "level=ERROR") && !strings.Contains(line, `error="internal error"`) {
						logged = true
					}
				}
				t.Errorf("round %d: %s %s: 500 %s (cause logged with the request id: %v)", round, rq.method, rq.path, data, logged)
				continue
			}
			if resp.StatusCode != http.StatusServiceUnavailable || e.Code != "unavailable" || resp.Header.Get("Retry-After") == "" {
				t.Errorf("round %d: %s %s: %d Retry-After %q %s, want 503 unavailable with Retry-After", round, rq.method, rq.path, resp.StatusCode, resp.Header.Get("Retry-After"), data)
			}
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
