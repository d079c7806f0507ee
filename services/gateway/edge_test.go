package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveReal runs a gateway over the shared stack's backends through Serve,
// the server construction the binaries use (not httptest's), on a loopback
// listener until the test ends; cfg is applied to the test defaults. It
// returns the address.
func serveReal(t *testing.T, cfg func(*Config)) string {
	t.Helper()
	c := testConfig()
	c.Health = env.gateway.cfg.Health
	c.JetStream, c.Watch = env.js, watchTestConfig
	c.Reconcile = env.gateway.cfg.Reconcile
	c.Outbound = env.gateway.cfg.Outbound
	c.ShutdownGrace = time.Second
	if cfg != nil {
		cfg(&c)
	}
	gw := New(c, env.store, env.admission, env.log.With("gateway", t.Name()))
	// Receive buffers as small as a real network path's: on loopback the
	// kernel would otherwise absorb megabytes a server never read.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		}); err != nil {
			return err
		}
		return serr
	}}
	lis, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// rawExchange writes head and then body in full before reading anything,
// as Python's urllib does, and reads one response.
func rawExchange(t *testing.T, addr, head string, body func(w io.Writer) error) (*http.Response, []byte) {
	t.Helper()
	// A send buffer as small as a real client's: the body cannot hide in
	// the kernel either.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 64<<10)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	w := bufio.NewWriterSize(conn, 64<<10)
	if _, err := io.WriteString(w, head); err != nil {
		t.Fatalf("write head: %v", err)
	}
	if err := body(w); err != nil {
		t.Fatalf("writing the body before reading the answer failed: %v", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("writing the body before reading the answer failed: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return resp, data
}

// TestTooLargeBodyIsAnsweredReadably shows that a client that writes a body
// over the limit in full before reading the answer gets a readable 413, not
// a reset: with a Content-Length of 3 MiB and chunked with 9 MiB.
func TestTooLargeBodyIsAnsweredReadably(t *testing.T) {
	addr := serveReal(t, nil)
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	for _, tc := range []struct {
		name string
		head string
		body func(io.Writer) error
	}{
		{name: "content-length 3 MiB",
			head: fmt.Sprintf("POST /api/v1/resource-types HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, 3<<20),
			body: func(w io.Writer) error {
				for range (3 << 20) / len(chunk) {
					if _, err := w.Write(chunk); err != nil {
						return err
					}
				}
				return nil
			}},
		// 20 MB, past what was drained before issue 27 (16 MiB): a reset.
		{name: "content-length 20 MB",
			head: fmt.Sprintf("POST /api/v1/resources HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, 20_000_000),
			body: func(w io.Writer) error {
				for left := 20_000_000; left > 0; left -= len(chunk) {
					if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
						return err
					}
				}
				return nil
			}},
		{name: "chunked 9 MiB",
			head: fmt.Sprintf("POST /api/v1/resources HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", addr),
			body: func(w io.Writer) error {
				for range (9 << 20) / len(chunk) {
					if _, err := fmt.Fprintf(w, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
						return err
					}
				}
				_, err := io.WriteString(w, "0\r\n\r\n")
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := rawExchange(t, addr, tc.head, tc.body)
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d, want 413: %s", resp.StatusCode, data)
			}
			var e errorDoc
			if err := json.Unmarshal(data, &e); err != nil || e.Code != "too_large" {
				t.Fatalf("body %s: %v", data, err)
			}
		})
	}
}

// TestHeadIsAnsweredAsGet shows that HEAD on a GET route answers what GET
// would, without a body.
func TestHeadIsAnsweredAsGet(t *testing.T) {
	for _, tc := range []struct {
		path   string
		status int
		header string
	}{
		{"/health", http.StatusOK, "Content-Type"},
		{"/api/v1/openapi.json", http.StatusOK, "Content-Type"},
		{"/api/v1/resources?limit=1", http.StatusOK, HeaderResourceVersion},
		{"/api/v1/resource-types", http.StatusOK, "Content-Type"},
		{"/api/v1/resources/999999999", http.StatusNotFound, HeaderRequestID},
		{"/api/v1/events", http.StatusOK, "Content-Type"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodHead, env.server.URL+tc.path, nil)
		resp, err := env.server.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatalf("HEAD %s: %v", tc.path, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != tc.status || len(data) != 0 || resp.Header.Get(tc.header) == "" {
			t.Errorf("HEAD %s: status %d (want %d), %d body bytes, %s %q", tc.path, resp.StatusCode, tc.status, len(data), tc.header, resp.Header.Get(tc.header))
		}
	}
}

// TestWatchResumeAheadOfNewestRevision shows that a resume point beyond the
// newest revision is refused with an error naming the newest revision
// instead of a stream that waits silently forever.
func TestWatchResumeAheadOfNewestRevision(t *testing.T) {
	newest, err := strconv.ParseInt(do(t, http.MethodGet, "/api/v1/resources?limit=1", nil).expect(t, http.StatusOK).Header.Get(HeaderResourceVersion), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ahead := newest + 1000000
	for _, h := range [][]string{{HeaderLastEventID, strconv.FormatInt(ahead, 10)}, nil} {
		path := "/api/v1/events"
		if h == nil {
			path += "?since=" + strconv.FormatInt(ahead, 10)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.server.URL+path, nil)
		if h != nil {
			req.Header.Set(h[0], h[1])
		}
		resp, err := env.server.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatalf("GET %s %v: %v", path, h, err)
		}
		if resp.StatusCode == http.StatusOK {
			// A stream: it must not stay silent. Wait for anything but a
			// heartbeat, within the deadline.
			_, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			t.Fatalf("GET %s %v: 200 stream that never said anything (%v)", path, h, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		r := response{Status: resp.StatusCode, Header: resp.Header, Body: data}
		e := r.expectError(t, http.StatusBadRequest, "too_new")
		var got int64
		if _, err := fmt.Sscanf(e.Detail[strings.Index(e.Detail, "newest revision is ")+len("newest revision is "):], "%d", &got); err != nil || got < newest || got >= ahead {
			t.Fatalf("detail %q does not name the newest revision (>= %d): %v", e.Detail, newest, err)
		}
	}
}

// TestWriteWithBodyNeedsJSONContentType shows that a write with a body and
// no (or a non-JSON) Content-Type is refused with 415 before anything
// happens, while body-less POST and DELETE need none.
func TestWriteWithBodyNeedsJSONContentType(t *testing.T) {
	for _, tc := range []struct {
		method, path, ct, body string
	}{
		{http.MethodPost, "/api/v1/resource-types", "", `{"name":"NoCtType","version":"v1","schema":{"type":"object"}}`},
		{http.MethodPost, "/api/v1/resources", "", `{"name":"x","resource_type_name":"NoCtType","resource_type_version":"v1","spec":{}}`},
		{http.MethodPost, "/api/v1/resources/1/reconcile", "text/plain", `hello`},
		{http.MethodPost, "/api/v1/resources/1/reconcile", "", `{}`},
		{http.MethodDelete, "/api/v1/resources/999999999", "application/x-www-form-urlencoded", `a=b`},
		{http.MethodPut, "/api/v1/resources/999999999", "", `{"spec":{}}`},
		{http.MethodPatch, "/api/v1/resources/999999999", "", `{"spec":{}}`},
		{http.MethodPost, "/api/v1/admission-webhooks", "multipart/form-data; boundary=x", "--x--"},
	} {
		unchanged(t, func() {
			req, _ := http.NewRequest(tc.method, env.server.URL+tc.path, strings.NewReader(tc.body))
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			resp, err := env.server.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("%s %s with Content-Type %q: status %d, want 415: %s", tc.method, tc.path, tc.ct, resp.StatusCode, data)
			}
		})
	}
	// No body, no Content-Type: fine.
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodPost, "/api/v1/resources/999999999/reconcile", http.StatusNotFound},
		{http.MethodDelete, "/api/v1/resources/999999999", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, env.server.URL+tc.path, nil)
		resp, err := env.server.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s without body: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
}

// TestSecurityHeaders shows the standard security headers on every kind of
// answer: JSON, errors, the OpenAPI document and an event stream.
func TestSecurityHeaders(t *testing.T) {
	check := func(what string, h http.Header) {
		t.Helper()
		if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", what, got)
		}
		if got := h.Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'none'") || !strings.Contains(got, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", what, got)
		}
		if got := h.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q", what, got)
		}
	}
	check("health", do(t, http.MethodGet, "/health", nil).expect(t, http.StatusOK).Header)
	check("openapi", do(t, http.MethodGet, "/api/v1/openapi.json", nil).expect(t, http.StatusOK).Header)
	check("list", do(t, http.MethodGet, "/api/v1/resources?limit=1", nil).expect(t, http.StatusOK).Header)
	check("404", do(t, http.MethodGet, "/nope", nil).expect(t, http.StatusNotFound).Header)
	check("400", do(t, http.MethodPost, "/api/v1/resource-types", `{`).expect(t, http.StatusBadRequest).Header)
	w := openWatch(t, "/api/v1/events")
	check("event stream", w.resp.Header)
}
