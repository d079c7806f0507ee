package httppoll

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/httpsource"
)

// newPoller is a poller under rule p whose namespace "default" is granted
// the test's header secrets for origin.
func newPoller(t *testing.T, p outbound.Policy, origin string) *Poller {
	t.Helper()
	var gs []grants.Grant
	for _, name := range []string{"TOKEN", "OTHER", "CRLF"} {
		gs = append(gs, grants.Grant{Secret: secret.Env(name), Use: grants.UseHTTPHeader, Namespaces: []string{"default"}, Destinations: []string{origin}})
	}
	g, err := grants.New(gs...)
	if err != nil {
		t.Fatal(err)
	}
	return &Poller{
		Grants: g,
		Client: outbound.NewClient(outbound.NewTransport(&outbound.Dialer{Policy: p}, nil)),
		Secrets: secret.ResolverFunc(func(_ context.Context, ref secret.Ref) (secret.Value, error) {
			switch ref.Value {
			case "TOKEN":
				return secret.NewValue([]byte("Bearer s3cret\n")), nil
			case "CRLF":
				return secret.NewValue([]byte("a\r\nX-Injected: 1")), nil
			}
			return secret.Value{}, fmt.Errorf("%s: %w", ref, secret.ErrForbidden)
		}),
		BodyLimit: 64,
	}
}

func reason(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return ""
}

// TestPoll: headers from secrets, ETag and 304, an HTTP error, a body past
// the limit, a server slower than the timeout, a refused address and a
// redirect not followed, each with its reason.
func TestPoll(t *testing.T) {
	var notModified, requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/list":
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			if r.Header.Get("If-None-Match") == `"v1"` {
				notModified.Add(1)
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("ETag", `"v1"`)
			_, _ = w.Write([]byte(`[{"id":"a"}]`))
		case "/echo": // a careless server quoting the credential back
			http.Error(w, "you sent "+r.Header.Get("Authorization"), http.StatusUnauthorized)
		case "/internal":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"secret":"internal-0a1b2c3d4e5f6"}`))
		case "/fail":
			http.Error(w, "database down\n  and more", http.StatusInternalServerError)
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 65)))
		case "/bigchunked":
			for range 10 {
				_, _ = w.Write([]byte(strings.Repeat("x", 10)))
				w.(http.Flusher).Flush()
			}
		case "/slow":
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
		case "/redirect":
			http.Redirect(w, r, "/list", http.StatusFound)
		}
	}))
	defer srv.Close()
	p := newPoller(t, outbound.Policy{AllowLoopback: true}, srv.URL)
	spec := func(path string, headers map[string]secret.Ref) httpsource.Spec {
		return httpsource.Spec{URL: srv.URL + path, Headers: headers, TimeoutSeconds: 1}
	}
	auth := map[string]secret.Ref{"Authorization": secret.Env("TOKEN")}
	ctx := t.Context()

	r, err := p.Poll(ctx, "default", spec("/list", auth), "")
	if err != nil || r.Status != 200 || r.ETag != `"v1"` || string(r.Body) != `[{"id":"a"}]` {
		t.Fatalf("poll: %+v %v", r, err)
	}
	r, err = p.Poll(ctx, "default", spec("/list", auth), `"v1"`)
	if err != nil || !r.NotModified || r.ETag != `"v1"` || notModified.Load() != 1 {
		t.Fatalf("poll with the ETag: %+v %v (304s: %d)", r, err, notModified.Load())
	}
	for _, c := range []struct {
		spec   httpsource.Spec
		reason string
		msg    string
	}{
		{spec("/list", nil), ReasonHTTP, "401 Unauthorized (text/plain, 9 bytes): no token"},
		{spec("/fail", nil), ReasonHTTP, "500 Internal Server Error (text/plain, 25 bytes): database down and more"},
		{spec("/echo", auth), ReasonHTTP, "401 Unauthorized (text/plain, 23 bytes): you sent Bearer [redacted]"},
		{spec("/internal", nil), ReasonHTTP, "500 Internal Server Error (application/json, 35 bytes)"},
		{spec("/big", nil), ReasonTooLarge, "65 bytes, more than the limit of 64"},
		{spec("/bigchunked", nil), ReasonTooLarge, "more than the limit of 64 bytes"},
		{spec("/slow", nil), ReasonTimeout, "no complete answer within 1s"},
		{spec("/redirect", auth), ReasonHTTP, "302 Found"},
		{spec("/list", map[string]secret.Ref{"Authorization": secret.Env("OTHER")}), ReasonSecret, "header Authorization"},
		{spec("/list", map[string]secret.Ref{"X-A": secret.Env("CRLF")}), ReasonSecret, "control character"},
	} {
		start := time.Now()
		_, err := p.Poll(ctx, "default", c.spec, "")
		if reason(err) != c.reason || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "internal-") {
			t.Errorf("%s: %v, want %s %q", c.spec.URL, err, c.reason, c.msg)
		}
		if strings.Contains(err.Error(), c.reason) { // shown beside the message, never in it
			t.Errorf("%s: the message %q repeats the reason", c.spec.URL, err)
		}
		if time.Since(start) > 2500*time.Millisecond {
			t.Errorf("%s took %s", c.spec.URL, time.Since(start))
		}
	}
	// A header not granted (another namespace, or no grants file) is
	// refused before anything is sent.
	before := requests.Load()
	for name, p := range map[string]*Poller{"another namespace": p, "no grants file": {Client: p.Client, Secrets: p.Secrets}} {
		ns := "default"
		if name == "another namespace" {
			ns = "team-b"
		}
		if _, err := p.Poll(ctx, ns, spec("/list", auth), ""); reason(err) != ReasonNotGranted || !errors.Is(err, grants.ErrNotGranted) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("%d requests sent with a header not granted", n)
	}
	// The public-only rule refuses the loopback server.
	_, err = newPoller(t, outbound.Policy{}, srv.URL).Poll(ctx, "default", spec("/list", auth), "")
	if reason(err) != ReasonAddress || !errors.Is(err, outbound.ErrRefused) {
		t.Fatalf("loopback under the public-only rule: %v", err)
	}
	// Nothing listens: unreachable.
	_, err = p.Poll(ctx, "default", httpsource.Spec{URL: "http://127.0.0.1:1/", TimeoutSeconds: 1}, "")
	if reason(err) != ReasonUnreachable {
		t.Fatalf("nothing listening: %v", err)
	}
}
