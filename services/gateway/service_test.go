package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/platform/health"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/grpcserver"
)

func TestHealth(t *testing.T) {
	for _, path := range []string{"/health", "/readyz", "/healthz"} {
		r := do(t, http.MethodGet, path, nil).expect(t, http.StatusOK)
		if got := decode[map[string]any](t, r); got["status"] != "ok" {
			t.Fatalf("%s %s", path, r.Body)
		}
	}

	cfg := testConfig()
	cfg.Health.Ready = []health.Check{
		{Name: "store", Func: func(context.Context) error { return errors.New("connection refused") }},
		{Name: "admission", Func: func(context.Context) error { return nil }},
	}
	srv := httptest.NewServer(New(cfg, env.store, env.admission, nil).Handler())
	defer srv.Close()
	for _, path := range []string{"/health", "/readyz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Status string            `json:"status"`
			Failed []string          `json:"failed"`
			Errors map[string]string `json:"errors"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || body.Status != "unavailable" || !slices.Equal(body.Failed, []string{"store"}) ||
			!strings.Contains(body.Errors["store"], "refused") {
			t.Fatalf("%s: status %d body %+v", path, resp.StatusCode, body)
		}
	}
	// Alive all the same.
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz %d", resp.StatusCode)
	}
}

// With the backends down, the gateway answers 503 without leaking details.
func TestBackendUnavailable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	conn, err := grpcserver.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cfg := testConfig()
	cfg.RequestTimeout = 2 * time.Second
	gw := New(cfg, storev1.NewStoreServiceClient(conn), admissionv1.NewAdmissionServiceClient(conn), nil)
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/resources/1", ""},
		{http.MethodGet, "/api/v1/resources", ""},
		{http.MethodPost, "/api/v1/resources", `{"name":"a","resource_type_name":"X","resource_type_version":"v1","spec":{}}`},
		{http.MethodPost, "/api/v1/resource-types", `{"name":"X","version":"v1","schema":{"type":"object"}}`},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e errorDoc
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || e.Code != "unavailable" || strings.Contains(e.Detail, addr) || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: %d %+v", tc.method, tc.path, resp.StatusCode, e)
		}
	}
}

func TestRequestIDAndAccessLog(t *testing.T) {
	r := do(t, http.MethodGet, "/health", nil, "X-Request-Id", "abc-123")
	if got := r.Header.Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("X-Request-Id %q, want abc-123", got)
	}
	r = do(t, http.MethodGet, "/api/v1/resources/0", nil)
	id := r.Header.Get("X-Request-Id")
	if len(id) != 32 {
		t.Errorf("generated X-Request-Id %q", id)
	}
	if e := decode[errorDoc](t, r); e.RequestID != id {
		t.Errorf("error request_id %q, header %q", e.RequestID, id)
	}
	r = do(t, http.MethodGet, "/health", nil, "X-Request-Id", strings.Repeat("x", 500))
	if got := r.Header.Get("X-Request-Id"); len(got) != 32 {
		t.Errorf("oversized X-Request-Id echoed: %q", got)
	}
}

// logLines collects log output.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSpace(string(p)))
	return len(p), nil
}

func (l *logLines) count(re *regexp.Regexp) (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if re.MatchString(line) {
			n++
		}
	}
	return n, strings.Join(l.lines, "\n")
}

func TestPanicRecoveryAndLog(t *testing.T) {
	var out logLines
	log := slog.New(slog.NewTextHandler(&out, nil))
	gw := New(testConfig(), env.store, env.admission, log)
	gw.echo.GET("/boom", func(*echo.Context) error { panic("kaboom: secret detail") })
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/boom")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || strings.Contains(string(body), "kaboom") || !strings.Contains(string(body), `"code":"internal"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// The server still serves.
	resp, err = http.Get(srv.URL + "/api/v1/resources/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The access line is written after the answer: wait for it.
	re := regexp.MustCompile(`msg="http request" method=GET path=/\S+ status=(500|400) duration=\S+`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, all := out.count(re)
		if n == 2 {
			break
		}
		if n > 2 || time.Now().After(deadline) {
			t.Fatalf("%d access log lines, want 2:\n%s", n, all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The OpenAPI document is valid JSON, OpenAPI 3.0, and describes every route.
func TestOpenAPI(t *testing.T) {
	r := do(t, http.MethodGet, "/api/v1/openapi.json", nil).expect(t, http.StatusOK)
	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components map[string]map[string]json.RawMessage `json:"components"`
		Info       map[string]any                        `json:"info"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") || doc.Info["title"] == nil {
		t.Fatalf("openapi %q info %v", doc.OpenAPI, doc.Info)
	}
	param := regexp.MustCompile(`:(\w+)`)
	for _, route := range env.gateway.echo.Router().Routes() {
		path := param.ReplaceAllString(route.Path, "{$1}")
		if strings.HasPrefix(path, "/api/v1/resource-types/{id}/{version}") {
			path = "/api/v1/resource-types/{name}/{version}"
		}
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("route %s %s is not documented", route.Method, path)
			continue
		}
		if _, ok := ops[strings.ToLower(route.Method)]; !ok {
			t.Errorf("operation %s %s is not documented", route.Method, path)
		}
	}
	for _, schema := range []string{"Error", "Resource", "ResourceType"} {
		if _, ok := doc.Components["schemas"][schema]; !ok {
			t.Errorf("components.schemas.%s missing", schema)
		}
	}
	// Every $ref points at a defined component.
	refs := regexp.MustCompile(`"\$ref":\s*"#/components/(\w+)/(\w+)"`).FindAllStringSubmatch(string(r.Body), -1)
	if len(refs) == 0 {
		t.Fatal("no $ref in the document")
	}
	for _, m := range refs {
		if _, ok := doc.Components[m[1]][m[2]]; !ok {
			t.Errorf("dangling $ref #/components/%s/%s", m[1], m[2])
		}
	}
	var ids []string
	for _, ops := range doc.Paths {
		for _, raw := range ops {
			var op struct {
				OperationID string `json:"operationId"`
			}
			if json.Unmarshal(raw, &op) == nil && op.OperationID != "" {
				if slices.Contains(ids, op.OperationID) {
					t.Errorf("duplicate operationId %s", op.OperationID)
				}
				ids = append(ids, op.OperationID)
			}
		}
	}
}

// Serve drains in-flight requests when its context ends.
func TestServeGracefulShutdown(t *testing.T) {
	cfg := testConfig()
	cfg.ShutdownGrace = 5 * time.Second
	gw := New(cfg, env.store, env.admission, nil)
	release := make(chan struct{})
	entered := make(chan struct{})
	gw.echo.GET("/slow", func(c *echo.Context) error {
		close(entered)
		<-release
		return c.String(http.StatusOK, "done")
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, lis) }()

	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + lis.Addr().String() + "/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-entered
	cancel()
	time.Sleep(100 * time.Millisecond)
	if _, err := net.DialTimeout("tcp", lis.Addr().String(), time.Second); err == nil {
		t.Error("still accepting connections after shutdown began")
	}
	close(release)
	if body := <-got; body != "done" {
		t.Errorf("in-flight request got %q", body)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}
