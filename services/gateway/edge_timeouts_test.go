package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The server timeouts under test (edge_config_test.go sets them).
const (
	testHeaderTimeout = 300 * time.Millisecond
	testBodyTimeout   = 500 * time.Millisecond
	testIdleTimeout   = 300 * time.Millisecond
)

// waitClosed reads from conn until the server closes it, within limit; it
// returns how long that took and whatever the server sent.
func waitClosed(t *testing.T, conn net.Conn, limit time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(limit))
	data, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s (sent %q)", limit, data)
	}
	return time.Since(start), string(data)
}

// TestServerTimeouts shows that the gateway's real server closes
// connections that trickle their headers, trickle their body, or sit idle.
func TestServerTimeouts(t *testing.T) {
	addr := serveReal(t, shortTimeouts)
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	t.Run("headers", func(t *testing.T) {
		conn := dial()
		fmt.Fprintf(conn, "GET /health HTTP/1.1\r\nHost: %s\r\nX-Slow: ", addr)
		waitClosed(t, conn, 5*time.Second)
	})

	t.Run("body", func(t *testing.T) {
		conn := dial()
		fmt.Fprintf(conn, "POST /api/v1/resource-types HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", addr, 1<<20)
		// Trickle one byte every 50 ms, as slow clients do, until the
		// server hangs up.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		_, got := waitClosed(t, conn, 5*time.Second)
		if got != "" && !strings.Contains(got, " 408 ") {
			t.Fatalf("answer %q, want 408 or a closed connection", got)
		}
	})

	t.Run("idle", func(t *testing.T) {
		conn := dial()
		fmt.Fprintf(conn, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		start := time.Now()
		_ = conn.SetReadDeadline(start.Add(5 * time.Second))
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("an idle kept-alive connection was not closed: %v", err)
		}
	})
}

// TestConcurrentBodyReadsAreBounded shows that body reads beyond the bound
// wait for a slot: with one slot held by a trickling client, another write
// is answered only once the trickler has been cut off.
func TestConcurrentBodyReadsAreBounded(t *testing.T) {
	addr := serveReal(t, func(c *Config) { shortTimeouts(c); oneBodySlot(c) })
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	start := time.Now()
	fmt.Fprintf(slow, "POST /api/v1/resource-types HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr)
	slowDone := make(chan time.Time, 1)
	go func() {
		_, _ = io.ReadAll(slow)
		slowDone <- time.Now()
	}()
	// Let the trickler take the slot first.
	time.Sleep(testBodyTimeout / 5)
	resp, err := http.Post("http://"+addr+"/api/v1/resource-types", "application/json", strings.NewReader(`{`))
	if err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400 (malformed JSON, once read): %s", resp.StatusCode, data)
	}
	var cutOff time.Time
	select {
	case cutOff = <-slowDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the trickler was never cut off")
	}
	if answered.Before(cutOff.Add(-50 * time.Millisecond)) {
		t.Fatalf("the second body was read at %s, before the slot holder was cut off at %s", answered.Sub(start), cutOff.Sub(start))
	}
}

// TestWatchOutlivesServerTimeouts shows that an event stream is exempt from
// every server timeout: open longer than all of them, it still delivers.
func TestWatchOutlivesServerTimeouts(t *testing.T) {
	addr := serveReal(t, shortTimeouts)
	createType(t, "EdgeLongWatch", "v1", `{"type":"object"}`)
	w := openWatchWith(t, watchClient(false), "http://"+addr, "/api/v1/events?resource_type=EdgeLongWatch", 0)
	// Outlive every timeout, reading heartbeats meanwhile.
	deadline := time.Now().Add(4 * max(testHeaderTimeout, testBodyTimeout, testIdleTimeout))
	for time.Now().Before(deadline) {
		if _, err := w.nextOrEnd(time.Until(deadline)+time.Second, "comment"); err != nil && !strings.Contains(err.Error(), "no event") {
			t.Fatalf("the watch ended: %v", err)
		}
	}
	r := createResource(t, map[string]any{"name": "late", "resource_type_name": "EdgeLongWatch", "resource_type_version": "v1", "spec": map[string]any{}})
	for {
		ev := w.next(10 * time.Second)
		if ev.Name == "CREATED" && ev.doc(t).ResourceID == r.ID {
			return
		}
	}
}
