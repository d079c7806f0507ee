package devstack

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDevListensOnLoopbackByDefault shows that `no8s dev` serves the API on
// loopback only unless told otherwise, as development servers should.
func TestDevListensOnLoopbackByDefault(t *testing.T) {
	host, _, err := net.SplitHostPort(DefaultConfig().HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		t.Fatalf("no8s dev listens on %q by default, want a loopback address", DefaultConfig().HTTPAddr)
	}
}

// TestDevAllowedHosts: the REST API of no8s dev answers to the loopback
// names, the --listen host unless it is a wildcard address, and the names
// added with --allowed-hosts.
func TestDevAllowedHosts(t *testing.T) {
	loopback := "localhost 127.0.0.1 ::1 [::1]"
	for _, tc := range []struct {
		addr  string
		extra []string
		want  string
	}{
		{"127.0.0.1:8000", nil, loopback + " 127.0.0.1"},
		{":8000", nil, loopback},
		{"0.0.0.0:8000", nil, loopback},
		{"[::]:8000", []string{"dev.example.com"}, loopback + " dev.example.com"},
		{"192.168.1.5:8000", []string{"*.lan"}, loopback + " 192.168.1.5 *.lan"},
	} {
		if got := strings.Join(allowedHosts(Config{HTTPAddr: tc.addr, AllowedHosts: tc.extra}), " "); got != tc.want {
			t.Errorf("--listen %s --allowed-hosts %v: %q, want %q", tc.addr, tc.extra, got, tc.want)
		}
	}
}

// TestStackStopsWhenAServiceStops: when the embedded store stops (a fault
// injected here, as a crash would), no8s dev does not go on answering
// /healthz 200 while every call fails: /healthz fails and Run returns,
// within 5 s, an error naming the store.
func TestStackStopsWhenAServiceStops(t *testing.T) {
	cfg := testConfig(t)
	cfg.RegistrySync, cfg.TenantReconciler = false, false
	fault := make(chan struct{})
	cfg.storeFault = fault
	ready, done := runStack(t, cfg)
	healthz := func() int {
		resp, err := http.Get(ready.APIURL + "/healthz")
		if err != nil {
			return 0 // not answering at all: as good as failed
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if got := healthz(); got != http.StatusOK {
		t.Fatalf("/healthz before the fault: %d", got)
	}
	close(fault)
	stoppedAt := time.Now()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "embedded store stopped") {
			t.Fatalf("no8s dev returned %v, want an error naming the store", err)
		}
		t.Logf("no8s dev stopped %v after its store: %v", time.Since(stoppedAt).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		t.Fatalf("no8s dev still runs 5 s after its store stopped (/healthz %d)", healthz())
	}
	if got := healthz(); got == http.StatusOK {
		t.Fatalf("/healthz answers 200 after the store stopped")
	}
}

// testConfig is a stack on free loopback ports in a temporary directory.
func testConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.StoreAddr, cfg.WorkerAddr, cfg.AdmissionAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.NATSPort = 0
	cfg.MetricsAddr = "off"
	cfg.ReadyFile = filepath.Join(t.TempDir(), "ready.json")
	return cfg
}

// runStack runs the stack until the test ends and waits for its ready
// file; done receives Run's result.
func runStack(t *testing.T, cfg Config) (Ready, <-chan error) {
	t.Helper()
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- Run(t.Context(), cfg, slog.New(slog.DiscardHandler))
	}()
	// The test's context ends before its cleanups: wait for the stack to
	// stop before its directories are removed.
	t.Cleanup(func() { <-finished })
	var ready Ready
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(cfg.ReadyFile); err == nil && json.Unmarshal(b, &ready) == nil {
			return ready, done
		}
		select {
		case err := <-done:
			t.Fatalf("no8s dev stopped before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no8s dev did not become ready within 60 s")
		}
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
