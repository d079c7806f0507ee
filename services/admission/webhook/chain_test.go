package webhook

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

func testHook(name, url, policy string, timeout int) *Hook {
	return &Hook{
		Webhook: webhookconf.Webhook{
			Name: name, URL: url, Type: webhookconf.TypeValidating, Operations: []string{webhookconf.OpCreate},
			TimeoutSeconds: timeout, FailurePolicy: policy,
		},
		client: newTransportClient(nil, &outbound.Dialer{Policy: outbound.DevPolicy()}),
	}
}

// TestChainDeadline shows that the chain's deadline bounds the whole chain
// whatever the number of webhooks and their own timeouts.
func TestChainDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// With the body read, the server notices the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	var hooks Matched
	for _, n := range []string{"a", "b", "c", "d"} {
		hooks.Validating = append(hooks.Validating, testHook(n, srv.URL, webhookconf.PolicyIgnore, 30))
	}
	hooks.Validating = append(hooks.Validating, testHook("last", srv.URL, webhookconf.PolicyFail, 30))
	c := &Chain{Timeout: 300 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	start := time.Now()
	_, err := c.Run(t.Context(), hooks, Admission{Operation: webhookconf.OpCreate, Resource: &resource.Resource{Name: "x"}}, nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the chain took %s", took)
	}
	pe := problem.As(err)
	if pe == nil || pe.Code != problem.CodeWebhookFailed || !strings.Contains(pe.Detail, `"last"`) || !strings.Contains(pe.Detail, "deadline") {
		t.Fatalf("error %v", err)
	}
}

// TestChainReusesConnections shows that consecutive calls to a webhook go
// over one kept-alive connection.
func TestChainReusesConnections(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	h := testHook("keepalive", srv.URL, webhookconf.PolicyFail, 5)
	c := &Chain{}
	for range 20 {
		if _, err := c.Run(t.Context(), Matched{Validating: []*Hook{h}}, Admission{Operation: webhookconf.OpCreate, Resource: &resource.Resource{Name: "x"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 sequential calls", n)
	}
}

// TestChainRetriesAClosedKeptAliveConnection shows that a call on a
// kept-alive connection the webhook closed without answering (as a server
// whose idle timeout passed as the call arrived does) is sent again on a
// new connection and succeeds, instead of failing the write.
func TestChainRetriesAClosedKeptAliveConnection(t *testing.T) {
	var calls, dropped atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if calls.Add(1)%2 == 0 {
			// Every second request (the first one on a kept-alive
			// connection): close the connection, no answer.
			dropped.Add(1)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_ = conn.Close()
			return
		}
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}))
	srv.Start()
	defer srv.Close()
	h := testHook("closing", srv.URL, webhookconf.PolicyFail, 5)
	c := &Chain{}
	for i := range 6 {
		if _, err := c.Run(t.Context(), Matched{Validating: []*Hook{h}}, Admission{Operation: webhookconf.OpCreate, Resource: &resource.Resource{Name: "x"}}, nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if dropped.Load() == 0 {
		t.Fatal("the server closed no connection: the test shows nothing")
	}
	if n := calls.Load(); n != 6+dropped.Load() {
		t.Fatalf("%d requests reached the server for 6 calls with %d dropped", n, dropped.Load())
	}
}
