package outbound_test

import (
	"bytes"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/platform/outbound"
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
	// net/http logs a peer that speaks first with its bytes ("Unsolicited
	// response received on idle HTTP channel") on the standard logger.
	var logged bytes.Buffer
	log.SetOutput(&logged)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	client := outbound.NewClient(outbound.NewTransport(&outbound.Dialer{Policy: outbound.Policy{AllowLoopback: true}}, nil))
	for range 20 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		_, err = client.Do(req)
		if err == nil {
			t.Fatal("a NATS-like peer answered HTTP")
		}
		got := outbound.TransportError(err)
		if strings.Contains(got.Error(), "NDMSECRET") || strings.Contains(got.Error(), "server_id") || !strings.Contains(got.Error(), "not HTTP") {
			t.Fatalf("%v (raw: %v)", got, err)
		}
	}
	if strings.Contains(logged.String(), "NDMSECRET") {
		t.Fatalf("the standard logger got the peer's bytes: %s", logged.String())
	}
}
