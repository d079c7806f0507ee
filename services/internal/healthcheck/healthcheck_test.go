package healthcheck

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		":8081":          "127.0.0.1:8081",
		"0.0.0.0:7101":   "127.0.0.1:7101",
		"[::]:7101":      "[::1]:7101",
		"10.0.0.5:8000":  "10.0.0.5:8000",
		"localhost:7102": "localhost:7102",
	} {
		got, err := DialAddr(in)
		if err != nil || got != want {
			t.Errorf("DialAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "off", "8000"} {
		if _, err := DialAddr(bad); err == nil {
			t.Errorf("DialAddr(%q) succeeded, want an error", bad)
		}
	}
}

// TestMain answers 0 while /readyz answers 200 and 1 with the body once it
// answers 503, probing the port of an unspecified listen address on
// loopback, from the environment variable or --addr.
func TestMainProbesReadyz(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !ready.Load() {
			http.Error(w, `{"status":"unavailable","failed":["nats"]}`, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	var stderr bytes.Buffer
	if code := Main(t.Context(), "x", nil, "0.0.0.0:"+port, &stderr); code != 0 {
		t.Fatalf("ready: exit %d, stderr %s", code, stderr.String())
	}
	ready.Store(false)
	stderr.Reset()
	if code := Main(t.Context(), "x", []string{"--addr", ":" + port}, "127.0.0.1:1", &stderr); code != 1 || !strings.Contains(stderr.String(), "503") || !strings.Contains(stderr.String(), "nats") {
		t.Fatalf("not ready: exit %d, stderr %q; want 1 naming 503 and nats", code, stderr.String())
	}
	stderr.Reset()
	if code := Main(t.Context(), "x", []string{"--bogus"}, ":1", &stderr); code != 2 {
		t.Fatalf("bad flag: exit %d, want 2", code)
	}
}

// TestProbeOverTLS: a listener that serves TLS is probed over TLS.
func TestProbeOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	if err := Probe(t.Context(), srv.Listener.Addr().String()); err != nil {
		t.Fatal(err)
	}
}
