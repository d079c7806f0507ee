package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/client"
)

// These tests run the client against real HTTP servers that answer in the
// API's shapes; the gateway's own tests (services/gateway) run it against
// the real gateway.

func newClient(t *testing.T, h http.Handler, opts ...client.Option) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8000", "ftp://x", "http://"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

func TestErrorAnswer(t *testing.T) {
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(client.HeaderRequestID, "req-1")
		writeJSON(w, http.StatusBadRequest, map[string]any{"detail": "invalid resource", "code": client.CodeValidationFailed,
			"errors": []map[string]string{{"path": "/spec/size", "message": "must be an integer"}}})
	}))
	_, err := c.CreateResource(context.Background(), client.CreateRequest{Name: "x", ResourceTypeName: "T", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{}`)})
	e := client.AsError(err)
	if e == nil || e.Status != 400 || e.Code != client.CodeValidationFailed || e.RequestID != "req-1" || len(e.Errors) != 1 || e.Errors[0].Path != "/spec/size" {
		t.Fatalf("error %#v", err)
	}
	if !strings.Contains(err.Error(), "/spec/size: must be an integer") || client.IsNotFound(err) || !client.HasCode(err, client.CodeValidationFailed) {
		t.Fatalf("error text %q", err)
	}
	// A body that is not a problem document still gives a code.
	c = newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no route", http.StatusNotFound) }))
	_, err = c.GetResourceByID(context.Background(), 1)
	if !client.IsNotFound(err) || client.AsError(err).Code != "not_found" || client.AsError(err).Detail != "no route" {
		t.Fatalf("plain 404: %#v", err)
	}
}

func TestRetriesHonourRetryAfterAndSpareWrites(t *testing.T) {
	var gets, posts atomic.Int32
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counter := &gets
		if r.Method == http.MethodPost {
			counter = &posts
		}
		n := counter.Add(1)
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": "store unavailable", "code": "unavailable"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": 7, "name": "x"})
	}))
	start := time.Now()
	r, err := c.GetResourceByID(context.Background(), 7)
	if err != nil || r.ID != 7 || gets.Load() != 2 {
		t.Fatalf("GET after a 503: %v %+v, %d requests", err, r, gets.Load())
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("retried after %v, before Retry-After's second", d)
	}
	_, err = c.CreateResource(context.Background(), client.CreateRequest{Name: "x"})
	if e := client.AsError(err); e == nil || e.Status != 503 || e.RetryAfter != time.Second || posts.Load() != 1 {
		t.Fatalf("POST: %v after %d requests (a write is never retried)", err, posts.Load())
	}
	// A write refused by a limit was not done: it is sent again.
	posts.Store(0)
	cl := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, map[string]string{"detail": "too many requests", "code": client.CodeRateLimited})
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"id": 8, "name": "x"})
	}))
	start = time.Now()
	if r, err := cl.CreateResource(context.Background(), client.CreateRequest{Name: "x"}); err != nil || r.ID != 8 || posts.Load() != 2 {
		t.Fatalf("POST after a 429 rate_limited: %v %+v, %d requests", err, r, posts.Load())
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("retried after %v, before Retry-After's second", d)
	}
	// WithRetries(0): the first answer is the answer.
	gets.Store(0)
	c0 := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": "down", "code": "unavailable"})
	}), client.WithRetries(0))
	if _, err := c0.GetResourceByID(context.Background(), 1); err == nil || gets.Load() != 1 {
		t.Fatalf("WithRetries(0): %v after %d requests", err, gets.Load())
	}
}

func TestHeadersWarningsAndDryRun(t *testing.T) {
	var got http.Header
	var query string
	var warnings []string
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, query = r.Header.Clone(), r.URL.RawQuery
		w.Header().Add(client.HeaderWarning, `299 - "spec.size is deprecated"`)
		w.Header().Set(client.HeaderApplyResult, client.ApplyConfigured)
		writeJSON(w, http.StatusOK, map[string]any{"id": 1})
	}), client.WithToken("s3cret"), client.WithUserAgent("test-agent"), client.WithWarningHandler(func(w string) { warnings = append(warnings, w) }))
	_, result, err := c.Apply(context.Background(), client.ApplyRequest{Name: "x"}, client.DryRun(), client.WithHeader("X-Extra", "1"))
	if err != nil || result != client.ApplyConfigured {
		t.Fatalf("apply: %v %q", err, result)
	}
	if got.Get("Authorization") != "Bearer s3cret" || got.Get("User-Agent") != "test-agent" || got.Get("X-Extra") != "1" ||
		got.Get("Content-Type") != "application/json" || query != "dry_run=true" {
		t.Fatalf("request headers %v, query %q", got, query)
	}
	if len(warnings) != 1 || warnings[0] != "spec.size is deprecated" {
		t.Fatalf("warnings %q", warnings)
	}
}

func TestDeletePropagation(t *testing.T) {
	var queries []string
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		writeJSON(w, http.StatusAccepted, map[string]any{"id": 7})
	}))
	for _, p := range []lifecycle.Propagation{lifecycle.PropagationForeground, lifecycle.PropagationOrphan, lifecycle.PropagationBackground, ""} {
		if _, err := c.DeleteResource(context.Background(), 7, client.WithPropagation(p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DeleteResource(context.Background(), 7, client.WithPropagation(lifecycle.PropagationOrphan), client.IfResourceVersion(42)); err != nil {
		t.Fatal(err)
	}
	want := []string{"DELETE /api/v1/resources/7?propagation_policy=Foreground", "DELETE /api/v1/resources/7?propagation_policy=Orphan",
		"DELETE /api/v1/resources/7?", "DELETE /api/v1/resources/7?", "DELETE /api/v1/resources/7?propagation_policy=Orphan&resource_version=42"}
	if !slices.Equal(queries, want) {
		t.Fatalf("requests %q, want %q", queries, want)
	}
}

func TestPagesAndListResources(t *testing.T) {
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("namespace") != "team-a" || r.URL.Query().Get("limit") != "2" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"detail": "bad query " + r.URL.RawQuery, "code": "invalid"})
			return
		}
		page := map[string]int{"": 0, "p2": 1, "p3": 2}[r.URL.Query().Get("continue")]
		if page == 0 {
			w.Header().Set(client.HeaderResourceVersion, "42")
		}
		if page < 2 {
			w.Header().Set(client.HeaderContinueToken, fmt.Sprintf("p%d", page+2))
		}
		items := []client.Resource{{ID: int64(2*page + 1)}, {ID: int64(2*page + 2)}}
		if page == 2 {
			items = items[:1]
		}
		writeJSON(w, http.StatusOK, items)
	}))
	o := client.ListOptions{Namespace: "team-a", Limit: 2}
	all, rev, err := c.ListResources(context.Background(), o)
	if err != nil || rev != 42 || len(all) != 5 || all[4].ID != 5 {
		t.Fatalf("list: %v, revision %d, %d items", err, rev, len(all))
	}
	pages := 0
	for p, err := range c.Pages(context.Background(), o) {
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if pages == 1 {
			break // the iterator stops when asked
		}
		_ = p
	}
	if pages != 1 {
		t.Fatalf("%d pages after break", pages)
	}
}

// sseServer answers watches by connection number: each handler writes
// its frames and returns (dropping the connection), or answers an error.
type sseServer struct {
	mu      sync.Mutex
	conns   []*http.Request
	lists   int
	answers []func(w http.ResponseWriter)
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if r.URL.Path == "/api/v1/resources" {
		s.lists++
		s.mu.Unlock()
		w.Header().Set(client.HeaderResourceVersion, "10")
		writeJSON(w, http.StatusOK, []client.Resource{{ID: 1, ResourceVersion: 10}})
		return
	}
	n := len(s.conns)
	s.conns = append(s.conns, r)
	s.mu.Unlock()
	if n >= len(s.answers) {
		<-r.Context().Done()
		return
	}
	s.answers[n](w)
}

func frame(w http.ResponseWriter, name string, id int64, data string) {
	fmt.Fprintf(w, "event: %s\nid: %d\ndata: %s\n\n", name, id, data)
	w.(http.Flusher).Flush()
}

func change(id, rv int64) string {
	return fmt.Sprintf(`{"event_type":"MODIFIED","resource_id":%d,"namespace":"default","resource_name":"r","resource_type_name":"T","resource_type_version":"v1","resource_data":{"id":%d,"resource_version":%d},"timestamp":"2026-11-27T10:00:00Z"}`, id, id, rv)
}

func TestListAndWatchResumesAndRelists(t *testing.T) {
	srv := &sseServer{answers: []func(w http.ResponseWriter){
		func(w http.ResponseWriter) { // an event, then the connection drops
			w.Header().Set("Content-Type", "text/event-stream")
			frame(w, "MODIFIED", 11, change(2, 11))
		},
		func(w http.ResponseWriter) { // resumed after 11: an event and a bookmark
			w.Header().Set("Content-Type", "text/event-stream")
			frame(w, "MODIFIED", 12, change(2, 12))
			frame(w, client.EventBookmark, 20, `{"event_type":"BOOKMARK","revision":20,"timestamp":"2026-11-27T10:00:00Z"}`)
		},
		func(w http.ResponseWriter) { // the history is gone: list again
			writeJSON(w, http.StatusGone, map[string]string{"detail": "expired", "code": client.CodeGone})
		},
	}}
	c := newClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var (
		events   []int64
		relisted = make(chan int64, 1)
	)
	err := c.ListAndWatch(ctx, client.ListOptions{TypeName: "T"}, func(items []client.Resource, rev int64) error {
		if len(items) != 1 || rev != 10 {
			t.Errorf("listed %d items at %d", len(items), rev)
		}
		return nil
	}, client.WatchHandler{
		Event: func(ev client.Event) error { events = append(events, ev.Revision); return nil },
		Relisted: func(items []client.Resource, rev int64) error {
			relisted <- rev
			cancel()
			return nil
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ListAndWatch ended with %v", err)
	}
	if fmt.Sprint(events) != "[11 12]" {
		t.Fatalf("events %v, want [11 12]", events)
	}
	if rev := <-relisted; rev != 10 || srv.lists != 2 {
		t.Fatalf("relisted at %d after %d lists", rev, srv.lists)
	}
	want := []string{"10", "11", "20"}
	for i, r := range srv.conns[:3] {
		if r.URL.Query().Get("since") != want[i] || r.Header.Get("Last-Event-ID") != want[i] || r.URL.Query().Get("resource_type") != "T" {
			t.Errorf("connection %d: %s, Last-Event-ID %q; want since %s", i, r.URL.RawQuery, r.Header.Get("Last-Event-ID"), want[i])
		}
	}
}

func TestStreamFromNowAndHandlerErrors(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	srv := &sseServer{answers: []func(w http.ResponseWriter){
		func(w http.ResponseWriter) {
			frame(w, "CREATED", 5, change(1, 5))
			<-done // the watch ends on the handler's error, not the stream's
		},
	}}
	c := newClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop := errors.New("enough")
	err := c.Watch(ctx, client.ListOptions{}, client.FromNow, func(client.Event) error { return stop }, nil)
	if !errors.Is(err, stop) {
		t.Fatalf("Watch ended with %v, want the handler's error", err)
	}
	if r := srv.conns[0]; r.URL.Query().Has("since") || r.Header.Get("Last-Event-ID") != "" {
		t.Fatalf("FromNow sent %s, Last-Event-ID %q", r.URL.RawQuery, r.Header.Get("Last-Event-ID"))
	}
}

func TestWaitHelpers(t *testing.T) {
	var reads atomic.Int32
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/v1/resources/by-name/"):
			writeJSON(w, http.StatusNotFound, map[string]string{"detail": "not found", "code": client.CodeNotFound})
		case r.URL.Path == "/api/v1/resources/3":
			if reads.Add(1) < 3 {
				writeJSON(w, http.StatusOK, map[string]any{"id": 3, "generation": 2, "conditions": []map[string]any{
					{"type": "Ready", "status": "True", "observed_generation": 1, "last_transition_time": "2026-11-27T10:00:00Z"}}})
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id": 3, "generation": 2, "conditions": []map[string]any{
				{"type": "Ready", "status": "True", "observed_generation": 2, "last_transition_time": "2026-11-27T10:00:00Z"}}})
		default:
			writeJSON(w, http.StatusNotFound, map[string]string{"detail": "not found", "code": client.CodeNotFound})
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Already gone counts as deleted.
	if err := c.WaitDeletedByName(ctx, "T", "v1", "", "gone", client.WaitOptions{}); err != nil {
		t.Fatalf("WaitDeletedByName of a resource already gone: %v", err)
	}
	if err := c.WaitDeleted(ctx, 9, client.WaitOptions{}); err != nil {
		t.Fatalf("WaitDeleted of a resource already gone: %v", err)
	}
	// A condition for an older generation does not count.
	progress := 0
	r, err := c.Wait(ctx, 3, func(r *client.Resource) bool { return client.ConditionMet(r, "Ready", "True") },
		client.WaitOptions{Interval: 10 * time.Millisecond, Progress: func(*client.Resource) { progress++ }})
	if err != nil || r.ID != 3 || reads.Load() != 3 || progress != 2 {
		t.Fatalf("Wait: %v after %d reads, %d progress calls", err, reads.Load(), progress)
	}
	if _, err := c.Wait(ctx, 9, func(*client.Resource) bool { return true }, client.WaitOptions{}); !errors.Is(err, client.ErrDeleted) {
		t.Fatalf("Wait on a deleted resource: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, err := c.Wait(short, 3, func(*client.Resource) bool { return false }, client.WaitOptions{Interval: 10 * time.Millisecond}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v", err)
	}
}
