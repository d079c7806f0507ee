package outbound_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/sdk/outbound"
)

func TestSummary(t *testing.T) {
	for _, c := range []struct {
		ct, body string
		want     string
		absent   []string
	}{
		{"application/json", `{"secret":"internal-8f3a","trace":"x"}`, "500 Internal Server Error (application/json, 38 bytes)", []string{"internal", "secret"}},
		{"text/plain; charset=utf-8", "upstream failed: token=ghp_abcdef123456 retry later", "(text/plain, 51 bytes): upstream failed: token=[redacted] retry later", []string{"ghp_"}},
		{"text/html", "<html><body><h1>Oops</h1><p>key: AKIAIOSFODNN7EXAMPLEKEYX</p></body></html>", "Oops key: [redacted]", []string{"AKIA"}},
		{"text/plain", "session 0123456789abcdefghij0123456789", "session [redacted]", []string{"0123456789abcdef"}},
		{"text/plain", strings.Repeat("word ", 100), "…", nil},
		{"", "whatever", "(no content type, 8 bytes)", []string{"whatever"}},
	} {
		got := outbound.Summary("500 Internal Server Error", c.ct, []byte(c.body))
		if !strings.Contains(got, c.want) {
			t.Errorf("%q: %q, want %q in it", c.body, got, c.want)
		}
		for _, a := range c.absent {
			if strings.Contains(got, a) {
				t.Errorf("%q: %q shows %q", c.body, got, a)
			}
		}
		if len([]rune(got)) > 200 {
			t.Errorf("%q: %d characters", c.body, len([]rune(got)))
		}
	}
}

// TestTransportError: a peer that is not HTTP (a NATS-like INFO line) gets
// a summary without its bytes.
func TestTransportError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("INFO {\"server_id\":\"NDMSECRET\",\"version\":\"2.10\"}\r\n"))
			_ = c.Close()
		}
	}()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	_, err = http.DefaultClient.Do(req)
	if err == nil || !strings.Contains(err.Error(), "NDMSECRET") {
		t.Fatalf("the raw error does not quote the peer (test premise): %v", err)
	}
	got := outbound.TransportError(err)
	if strings.Contains(got.Error(), "NDMSECRET") || strings.Contains(got.Error(), "server_id") || !strings.Contains(got.Error(), "not HTTP") {
		t.Fatalf("%v", got)
	}
	t.Log(got)
}
