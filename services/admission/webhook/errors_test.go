package webhook

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// secret is what a probed service answers; none of it may reach the client.
const secret = "SECRET-7f3a internal-admin-token=hunter2 <html>private dashboard</html>"

// rawServer answers every connection with raw bytes (another protocol) and
// closes it.
func rawServer(t *testing.T, answer string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(answer))
			c.Close()
		}
	}()
	return "http://" + lis.Addr().String() + "/"
}

// TestWebhookFailureReportsOnlyAClass shows that a failing webhook's error
// names a class of failure and never the remote service's bytes, which go
// to admission's log instead: otherwise registering webhooks would let a
// user scan ports and read internal services through admission.
func TestWebhookFailureReportsOnlyAClass(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + closed.Addr().String() + "/"
	closed.Close()
	status := func(code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Error(w, secret, code)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	ok200 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(secret))
	}))
	t.Cleanup(ok200.Close)
	tlsToPlain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(secret)) }))
	t.Cleanup(tlsToPlain.Close)

	for _, tc := range []struct {
		name, url, class string
	}{
		{"refused", refusedURL, "connection refused"},
		{"status 500", status(500), "HTTP status 500"},
		{"status 404", status(404), "HTTP status 404"},
		{"not a review", ok200.URL, "invalid response"},
		{"ssh banner", rawServer(t, "SSH-2.0-OpenSSH_9.6 "+secret+"\r\n"), "invalid response"},
		{"redis", rawServer(t, "-ERR "+secret+"\r\n"), "invalid response"},
		{"tls to a plain server", strings.Replace(tlsToPlain.URL, "http://", "https://", 1), "TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			c := &Chain{Log: slog.New(slog.NewTextHandler(&logs, nil))}
			h := testHook("probe", tc.url, webhookconf.PolicyFail, 2)
			_, err := c.Run(t.Context(), Matched{Validating: []*Hook{h}}, Admission{Operation: webhookconf.OpCreate, Resource: &resource.Resource{Name: "x"}}, nil)
			pe := problem.As(err)
			if pe == nil || pe.Code != problem.CodeWebhookFailed {
				t.Fatalf("error %v, want webhook_failed", err)
			}
			if !strings.Contains(pe.Detail, tc.class) {
				t.Errorf("detail %q does not name the class %q", pe.Detail, tc.class)
			}
			for _, leak := range []string{"SECRET", "hunter2", "html", "SSH-2.0", "ERR", "malformed", "\\x"} {
				if strings.Contains(pe.Error(), leak) {
					t.Errorf("the client sees %q of the remote answer: %q", leak, pe.Error())
				}
			}
			if !strings.Contains(logs.String(), "probe") {
				t.Errorf("admission's log does not record the failure: %q", logs.String())
			}
		})
	}
}
