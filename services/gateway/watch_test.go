package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/gateway/watch"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/resource"
)

// watchTestConfig makes the watch timers short enough for tests, and the
// live buffer small so that slow readers fall back to the stream.
var watchTestConfig = watch.Config{
	Heartbeat:    300 * time.Millisecond,
	Bookmark:     700 * time.Millisecond,
	Buffer:       16,
	StallTimeout: time.Second,
	WriteTimeout: 20 * time.Second,
	Retry:        100 * time.Millisecond,
	TooNewWait:   5 * time.Second, // a loaded machine publishes late: a resume at a just-created revision must wait, not fail
}

// sseEvent is one event (or, with Name "", one comment) read from a watch.
type sseEvent struct {
	Name, ID string
	Data     []byte
	Comment  string
}

func (e sseEvent) rev(t testing.TB) int64 {
	t.Helper()
	n, err := strconv.ParseInt(e.ID, 10, 64)
	if err != nil {
		t.Fatalf("event %s has id %q: %v", e.Name, e.ID, err)
	}
	return n
}

// eventDoc is the data of a resource event.
type eventDoc struct {
	EventType           string            `json:"event_type"`
	ResourceID          int64             `json:"resource_id"`
	ResourceName        string            `json:"resource_name"`
	ResourceTypeName    string            `json:"resource_type_name"`
	ResourceTypeVersion string            `json:"resource_type_version"`
	ResourceData        resource.Resource `json:"resource_data"`
	Timestamp           time.Time         `json:"timestamp"`
	Code                string            `json:"code"`
	Detail              string            `json:"detail"`
	Revision            int64             `json:"revision"`
}

func (e sseEvent) doc(t testing.TB) eventDoc {
	t.Helper()
	var d eventDoc
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("event %s data %s: %v", e.Name, e.Data, err)
	}
	return d
}

// sseStream is an open watch.
type sseStream struct {
	t      testing.TB
	resp   *http.Response
	events chan sseEvent
	errc   chan error
	cancel context.CancelFunc
}

// watchClient dials with a small receive buffer when small is set, so that
// a client that stops reading makes the gateway's writes block soon.
func watchClient(small bool) *http.Client {
	d := &net.Dialer{}
	if small {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			if err != nil {
				return err
			}
			return serr
		}
	}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableCompression: true}}
}

// openWatch opens a watch on the shared gateway and fails unless it
// answers 200 text/event-stream.
func openWatch(t testing.TB, path string, headers ...string) *sseStream {
	t.Helper()
	return openWatchWith(t, watchClient(false), env.server.URL, path, 0, headers...)
}

// openWatchWith opens a watch with client on base. With buffer > 0 the
// reader stops after buffer events until the test drains the channel.
func openWatchWith(t testing.TB, client *http.Client, base, path string, buffer int, headers ...string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: status %d: %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if buffer <= 0 {
		buffer = 100000
	}
	s := &sseStream{t: t, resp: resp, events: make(chan sseEvent, buffer), errc: make(chan error, 1), cancel: cancel}
	go s.read()
	t.Cleanup(s.close)
	return s
}

func (s *sseStream) read() {
	defer close(s.events)
	r := bufio.NewReader(s.resp.Body)
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			s.errc <- err
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.Name != "" || ev.Comment != "" {
				s.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			ev.Comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "event: "):
			ev.Name = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			ev.Data = []byte(line[len("data: "):])
		case strings.HasPrefix(line, "retry: "):
		default:
			s.errc <- fmt.Errorf("unexpected line %q", line)
			return
		}
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next event (comments and, unless keep, bookmarks are
// skipped); it fails the test after timeout.
func (s *sseStream) next(timeout time.Duration, keep ...string) sseEvent {
	s.t.Helper()
	ev, err := s.nextOrEnd(timeout, keep...)
	if err != nil {
		s.t.Fatalf("watch: %v", err)
	}
	return ev
}

// nextOrEnd is next that reports the end of the stream as an error.
func (s *sseStream) nextOrEnd(timeout time.Duration, keep ...string) (sseEvent, error) {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return sseEvent{}, fmt.Errorf("stream ended: %w", <-s.errc)
			}
			if ev.Name == "" {
				if contains(keep, "comment") {
					return ev, nil
				}
				continue
			}
			if ev.Name == watch.Bookmark && !contains(keep, watch.Bookmark) {
				continue
			}
			return ev, nil
		case <-deadline:
			return sseEvent{}, fmt.Errorf("no event within %s", timeout)
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// expectEvents reads n events and returns them.
func (s *sseStream) expectEvents(n int) []sseEvent {
	s.t.Helper()
	out := make([]sseEvent, 0, n)
	for range n {
		out = append(out, s.next(10*time.Second))
	}
	return out
}

// expectQuiet fails if an event (not a bookmark or comment) arrives within d.
func (s *sseStream) expectQuiet(d time.Duration) {
	s.t.Helper()
	if ev, err := s.nextOrEnd(d); err == nil {
		s.t.Fatalf("unexpected event %s id %s: %s", ev.Name, ev.ID, ev.Data)
	}
}

// watchRuns makes type names unique across -count runs on one stack.
var watchRuns atomic.Int64

// watchType registers a resource type with an open schema under a name
// unique to this run, and returns the name.
func watchType(t testing.TB, name string) string {
	t.Helper()
	name += strconv.FormatInt(watchRuns.Add(1), 10)
	createType(t, name, "v1", `{"type":"object","properties":{"n":{"type":"integer"},"pad":{"type":"string"}}}`)
	return name
}

// change is one committed write and the revision it took.
type change struct {
	kind string
	id   int64
	rev  int64
}

func create(t testing.TB, typ, name string, labels map[string]string) change {
	t.Helper()
	r := createResource(t, map[string]any{"name": name, "resource_type_name": typ, "resource_type_version": "v1", "spec": map[string]any{"n": 0}, "labels": labels})
	return change{eventstream.Created, r.ID, r.ResourceVersion}
}

func modify(t testing.TB, id int64, n int) change {
	t.Helper()
	r := do(t, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", id), map[string]any{"spec": map[string]any{"n": n}}).expect(t, http.StatusOK)
	got := decode[resource.Resource](t, r)
	return change{eventstream.Modified, id, got.ResourceVersion}
}

func checkEvents(t testing.TB, got []sseEvent, want []change) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		d := g.doc(t)
		if g.Name != w.kind || g.rev(t) != w.rev || d.ResourceID != w.id || d.EventType != w.kind {
			t.Fatalf("event %d: %s id %s of resource %d; want %s id %d of resource %d", i, g.Name, g.ID, d.ResourceID, w.kind, w.rev, w.id)
		}
	}
}

func TestWatchEventFormat(t *testing.T) {
	tyFormat := watchType(t, "WatchFormat")
	w := openWatch(t, "/api/v1/events?resource_type="+tyFormat)
	r := createResource(t, map[string]any{"name": "fmt-a", "resource_type_name": tyFormat, "resource_type_version": "v1",
		"spec": map[string]any{"n": 1}, "labels": map[string]string{"app": "x"}})
	ev := w.next(10 * time.Second)
	if ev.Name != "CREATED" || ev.rev(t) != r.ResourceVersion {
		t.Fatalf("got %s id %s, want CREATED id %d", ev.Name, ev.ID, r.ResourceVersion)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(ev.Data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"event_type", "resource_id", "resource_name", "resource_type_name", "resource_type_version", "resource_data", "timestamp"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("event data lacks %q: %s", k, ev.Data)
		}
	}
	d := ev.doc(t)
	if d.EventType != "CREATED" || d.ResourceID != r.ID || d.ResourceName != "fmt-a" || d.ResourceTypeName != tyFormat ||
		d.ResourceTypeVersion != "v1" || d.ResourceData.ID != r.ID || d.ResourceData.ResourceVersion != r.ResourceVersion ||
		d.ResourceData.Labels["app"] != "x" || d.Timestamp.IsZero() {
		t.Fatalf("event data %s does not describe %+v", ev.Data, r)
	}
	m := modify(t, r.ID, 2)
	del := do(t, http.MethodDelete, fmt.Sprintf("/api/v1/resources/%d", r.ID), nil).expect(t, http.StatusAccepted)
	deleted := decode[resource.Resource](t, del)
	// The reconciler's cleanup removes its finalizer: the resource is purged.
	reconcileNow(t, deleted)
	got := w.expectEvents(3)
	checkEvents(t, got[:2], []change{m, {eventstream.Deleted, r.ID, deleted.ResourceVersion}})
	if d := got[2].doc(t); got[2].Name != eventstream.Purged || d.ResourceID != r.ID || got[2].rev(t) <= deleted.ResourceVersion {
		t.Fatalf("third event %s id %s of resource %d, want PURGED after %d", got[2].Name, got[2].ID, d.ResourceID, deleted.ResourceVersion)
	}
	if spec := got[0].doc(t).ResourceData.Spec; string(spec) != `{"n":2}` {
		t.Fatalf("MODIFIED resource_data.spec %s", spec)
	}
}

func TestWatchResume(t *testing.T) {
	tyResume := watchType(t, "WatchResume")
	var all []change
	a := create(t, tyResume, "res-a", nil)
	all = append(all, a)
	for i := range 5 {
		all = append(all, modify(t, a.id, i+1))
	}
	// Every resume point, by header and by parameter, yields exactly the
	// later changes.
	for k := range all {
		since := strconv.FormatInt(all[k].rev, 10)
		w := openWatch(t, "/api/v1/events?resource_type="+tyResume, HeaderLastEventID, since)
		checkEvents(t, w.expectEvents(len(all)-k-1), all[k+1:])
		w.close()
		w = openWatch(t, "/api/v1/events?resource_type="+tyResume+"&since="+since)
		checkEvents(t, w.expectEvents(len(all)-k-1), all[k+1:])
		w.close()
	}
	// Last-Event-ID (a reconnecting EventSource) wins over since.
	w := openWatch(t, fmt.Sprintf("/api/v1/events?resource_type=%s&since=%d", tyResume, all[0].rev), HeaderLastEventID, strconv.FormatInt(all[4].rev, 10))
	checkEvents(t, w.expectEvents(1), all[5:])
	// Changes after the resume keep coming, live.
	more := modify(t, a.id, 99)
	checkEvents(t, w.expectEvents(1), []change{more})
	w.expectQuiet(300 * time.Millisecond)
}

func TestWatchListThenWatch(t *testing.T) {
	tyList := watchType(t, "WatchList")
	var before []change
	for i := range 5 {
		before = append(before, create(t, tyList, fmt.Sprintf("lw-%d", i), nil))
	}
	// List in pages of two; the first page's X-Resource-Version is the
	// snapshot of the whole list.
	var rv string
	var listed []resource.Resource
	next := ""
	for {
		r := do(t, http.MethodGet, "/api/v1/resources?resource_type="+tyList+"&limit=2"+next, nil).expect(t, http.StatusOK)
		if rv == "" {
			rv = r.Header.Get(HeaderResourceVersion)
		}
		listed = append(listed, decode[[]resource.Resource](t, r)...)
		tok := r.Header.Get(HeaderContinueToken)
		if tok == "" {
			break
		}
		next = "&continue=" + tok
	}
	if len(listed) != 5 || rv == "" {
		t.Fatalf("listed %d resources, X-Resource-Version %q", len(listed), rv)
	}
	after := []change{modify(t, before[0].id, 1), create(t, tyList, "lw-new", nil)}
	w := openWatch(t, "/api/v1/events?resource_type="+tyList+"&since="+rv)
	// The list may already reflect changes the relay had not published at
	// its snapshot: a client skips an event whose revision is not above the
	// listed resource's resource_version. What remains is exactly what
	// changed after the list.
	listedRV := map[int64]int64{}
	for _, r := range listed {
		listedRV[r.ID] = r.ResourceVersion
	}
	since, _ := strconv.ParseInt(rv, 10, 64)
	var fresh []sseEvent
	for len(fresh) < len(after) {
		ev := w.next(10 * time.Second)
		if ev.rev(t) <= since {
			t.Fatalf("event %s id %s is not after the list's X-Resource-Version %d", ev.Name, ev.ID, since)
		}
		if ev.rev(t) <= listedRV[ev.doc(t).ResourceID] {
			continue
		}
		fresh = append(fresh, ev)
	}
	checkEvents(t, fresh, after)
	w.expectQuiet(300 * time.Millisecond)
}

func TestWatchFilters(t *testing.T) {
	tyFilterA := watchType(t, "WatchFilterA")
	tyFilterB := watchType(t, "WatchFilterB")
	createType(t, tyFilterA, "v2", `{"type":"object"}`)
	start := do(t, http.MethodGet, "/api/v1/resources?limit=1", nil).expect(t, http.StatusOK).Header.Get(HeaderResourceVersion)
	a1 := create(t, tyFilterA, "fa-1", map[string]string{"env": "prod"})
	b1 := create(t, tyFilterB, "fb-1", map[string]string{"env": "dev"})
	r := createResource(t, map[string]any{"name": "fa-2", "resource_type_name": tyFilterA, "resource_type_version": "v2", "spec": map[string]any{}, "labels": map[string]string{"env": "prod"}})
	a2 := change{eventstream.Created, r.ID, r.ResourceVersion}
	a1m := modify(t, a1.id, 5)
	b1m := modify(t, b1.id, 5)

	cases := []struct {
		path string
		want []change
	}{
		{"/api/v1/events?resource_type=" + tyFilterA, []change{a1, a2, a1m}},
		{"/api/v1/events?resource_type=" + tyFilterA + "&resource_type_version=v1", []change{a1, a1m}},
		{"/api/v1/events?resource_type=" + tyFilterB, []change{b1, b1m}},
		{"/api/v1/events?label_selector=env%3Dprod", []change{a1, a2, a1m}},
		{"/api/v1/events?resource_type=" + tyFilterA + "&label_selector=env+in+(dev)", nil},
		{"/api/v1/events?label_selector=env", []change{a1, b1, a2, a1m, b1m}},
		{fmt.Sprintf("/api/v1/resources/%d/events", b1.id), []change{b1, b1m}},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			w := openWatch(t, c.path+sep(c.path)+"since="+start)
			checkEvents(t, w.expectEvents(len(c.want)), c.want)
			w.expectQuiet(200 * time.Millisecond)
		})
	}
	// Live, with the per-resource stream.
	w := openWatch(t, fmt.Sprintf("/api/v1/resources/%d/events", a1.id))
	modify(t, b1.id, 6)
	m := modify(t, a1.id, 6)
	checkEvents(t, w.expectEvents(1), []change{m})
}

func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

func TestWatchBadRequests(t *testing.T) {
	do(t, http.MethodGet, "/api/v1/events?since=abc", nil).expectError(t, http.StatusBadRequest, "invalid", "/since")
	do(t, http.MethodGet, "/api/v1/events?since=-1", nil).expectError(t, http.StatusBadRequest, "invalid", "/since")
	do(t, http.MethodGet, "/api/v1/events", nil, HeaderLastEventID, "x1").expectError(t, http.StatusBadRequest, "invalid")
	do(t, http.MethodGet, "/api/v1/events?resource_type=lower", nil).expectError(t, http.StatusBadRequest, "", "/resource_type")
	do(t, http.MethodGet, "/api/v1/events?resource_type_version=1", nil).expectError(t, http.StatusBadRequest, "", "/resource_type_version")
	do(t, http.MethodGet, "/api/v1/events?label_selector=a+in+(b", nil).expectError(t, http.StatusBadRequest, "", "/label_selector")
	do(t, http.MethodGet, "/api/v1/resources/999999999/events", nil).expectError(t, http.StatusNotFound, "not_found")
	do(t, http.MethodGet, "/api/v1/resources/abc/events", nil).expect(t, http.StatusBadRequest)
	do(t, http.MethodPost, "/api/v1/events", nil).expect(t, http.StatusMethodNotAllowed)
}

func TestWatchUnconfigured(t *testing.T) {
	gw := New(testConfig(), env.store, env.admission, nil)
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
}

func TestWatchHeartbeatAndBookmark(t *testing.T) {
	tyQuiet := watchType(t, "WatchQuiet")
	tyNoisy := watchType(t, "WatchNoisy")
	c := create(t, tyNoisy, "noisy", nil)
	w := openWatch(t, "/api/v1/events?resource_type="+tyQuiet)
	// A watch from "now" starts with a bookmark, so that a reconnect before
	// the first event resumes where it started.
	first := w.next(5*time.Second, watch.Bookmark)
	if first.Name != watch.Bookmark || first.rev(t) <= 0 {
		t.Fatalf("first event %s id %s, want a BOOKMARK", first.Name, first.ID)
	}
	m := modify(t, c.id, 1)
	var sawHeartbeat bool
	var bookmark int64
	deadline := time.Now().Add(10 * time.Second)
	for (!sawHeartbeat || bookmark < m.rev) && time.Now().Before(deadline) {
		ev := w.next(5*time.Second, watch.Bookmark, "comment")
		switch {
		case ev.Comment == "heartbeat":
			sawHeartbeat = true
		case ev.Name == watch.Bookmark:
			if d := ev.doc(t); d.Revision != ev.rev(t) || d.EventType != watch.Bookmark {
				t.Fatalf("bookmark id %s data %s", ev.ID, ev.Data)
			}
			bookmark = ev.rev(t)
		case ev.Name != "":
			t.Fatalf("filtered watch got %s %s", ev.Name, ev.Data)
		}
	}
	if !sawHeartbeat || bookmark < m.rev {
		t.Fatalf("heartbeat %v, newest bookmark %d (want >= %d, the newest revision the stream passed)", sawHeartbeat, bookmark, m.rev)
	}
	// Resuming from the bookmark misses nothing and repeats nothing.
	q := create(t, tyQuiet, "quiet", nil)
	w2 := openWatch(t, "/api/v1/events?resource_type="+tyQuiet, HeaderLastEventID, strconv.FormatInt(bookmark, 10))
	checkEvents(t, w2.expectEvents(1), []change{q})
}

// TestWatchSlowReader: a reader slower than the writers, on a small receive
// buffer, falls behind the fan-out and catches up from the stream; it still
// receives every event once, in order. (The overflow path itself is tested
// deterministically in package watch.)
func TestWatchSlowReader(t *testing.T) {
	tySlow := watchType(t, "WatchSlow")
	c := create(t, tySlow, "slow", nil)
	before := env.gateway.events.Stats()
	path := fmt.Sprintf("/api/v1/events?resource_type=%s&since=%d", tySlow, c.rev)
	w := openWatchWith(t, watchClient(true), env.server.URL, path, 1)
	fast := openWatch(t, path)
	var mu sync.Mutex
	want := make([]change, 0, 4*51)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := createResource(t, map[string]any{"name": fmt.Sprintf("slow-%d", g), "resource_type_name": tySlow, "resource_type_version": "v1", "spec": map[string]any{}})
			mu.Lock()
			want = append(want, change{eventstream.Created, r.ID, r.ResourceVersion})
			mu.Unlock()
			pad := strings.Repeat("p", 4<<10)
			for i := range 50 {
				res := do(t, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", r.ID), map[string]any{"spec": map[string]any{"n": i, "pad": pad}}).expect(t, http.StatusOK)
				mu.Lock()
				want = append(want, change{eventstream.Modified, r.ID, decode[resource.Resource](t, res).ResourceVersion})
				mu.Unlock()
			}
		}()
	}
	got := make([]sseEvent, 0, 4*51)
	for range 4 * 51 {
		got = append(got, w.next(20*time.Second))
		<-time.After(3 * time.Millisecond)
	}
	wg.Wait()
	sortChanges(want)
	checkEvents(t, got, want)
	checkEvents(t, fast.expectEvents(len(want)), want)
	w.expectQuiet(200 * time.Millisecond)
	after := env.gateway.events.Stats()
	t.Logf("overflows %d, catch-ups %d", after.Overflows-before.Overflows, after.CatchUps-before.CatchUps)
}

func sortChanges(c []change) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j].rev < c[j-1].rev; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// TestWatchStalledClient: a client that stops reading is cut off with a
// final too_slow event, which it reads once it reads again, and resumes
// from its last event without a gap.
func TestWatchStalledClient(t *testing.T) {
	tyStall := watchType(t, "WatchStall")
	c := create(t, tyStall, "stall", nil)
	before := env.gateway.events.Stats()
	w := openWatchWith(t, watchClient(true), env.server.URL, fmt.Sprintf("/api/v1/events?resource_type=%s&since=%d", tyStall, c.rev), 1)
	w.next(5*time.Second, "comment") // connected
	// The reader goroutine now blocks on the full channel: the client
	// stops reading. ~8 MiB of events fill every socket buffer.
	pad := strings.Repeat("x", 64<<10)
	want := make([]change, 0, 100)
	for i := range 100 {
		r := do(t, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", c.id), map[string]any{"spec": map[string]any{"n": i, "pad": pad}}).expect(t, http.StatusOK)
		want = append(want, change{eventstream.Modified, c.id, decode[resource.Resource](t, r).ResourceVersion})
	}
	// The gateway's write has been blocked since during the writes above;
	// let it stay blocked past the stall timeout.
	<-time.After(2 * watchTestConfig.StallTimeout)
	// Read again: everything that was buffered, then the reason.
	var got []sseEvent
	var final sseEvent
	for {
		ev, err := w.nextOrEnd(20 * time.Second)
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		if ev.Name == watch.Error {
			final = ev
			break
		}
		got = append(got, ev)
	}
	if d := final.doc(t); d.Code != watch.CodeTooSlow || d.Detail == "" || final.ID != "" {
		t.Fatalf("final event id %q data %s", final.ID, final.Data)
	}
	if _, err := w.nextOrEnd(5 * time.Second); err == nil || !strings.Contains(err.Error(), "stream ended") {
		t.Fatalf("the stream goes on after the final event: %v", err)
	}
	t.Logf("received %d of %d events before the final event", len(got), len(want))
	if len(got) == 0 || len(got) >= len(want) {
		t.Fatalf("received %d of %d events before being cut off", len(got), len(want))
	}
	checkEvents(t, got, want[:len(got)])
	if after := env.gateway.events.Stats(); after.TooSlow == before.TooSlow {
		t.Fatalf("stats do not count the stalled watcher: %+v", after)
	}
	// Resume from the last event received: the rest, exactly once.
	last := got[len(got)-1].ID
	w2 := openWatch(t, "/api/v1/events?resource_type="+tyStall, HeaderLastEventID, last)
	checkEvents(t, w2.expectEvents(len(want)-len(got)), want[len(got):])
	w2.expectQuiet(200 * time.Millisecond)
}

func waitUntil(t testing.TB, timeout time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWatchGone: a resume point older than the retained history is refused
// with 410 and a body that says to list again; one right before the oldest
// retained event is served.
func TestWatchGone(t *testing.T) {
	tyGone := watchType(t, "WatchGone")
	c := create(t, tyGone, "gone", nil)
	var changes []change
	for i := range 6 {
		changes = append(changes, modify(t, c.id, i))
	}
	ctx := t.Context()
	stream, err := env.js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the relay has published the last change, then drop all
	// but the last three events, as retention would.
	waitUntil(t, 10*time.Second, "the relay", func() bool {
		rev, err := eventstream.LastRevision(ctx, stream)
		return err == nil && rev >= changes[5].rev
	})
	if err := stream.Purge(ctx, jetstream.WithPurgeKeep(3)); err != nil {
		t.Fatal(err)
	}
	oldest := changes[3].rev
	r := do(t, http.MethodGet, "/api/v1/events?resource_type="+tyGone, nil, HeaderLastEventID, strconv.FormatInt(changes[1].rev, 10))
	e := r.expectError(t, http.StatusGone, "gone")
	if !strings.Contains(e.Detail, "list") || !strings.Contains(e.Detail, HeaderResourceVersion) {
		t.Fatalf("410 detail does not tell the client to list again: %s", e.Detail)
	}
	do(t, http.MethodGet, fmt.Sprintf("/api/v1/resources/%d/events?since=%d", c.id, changes[1].rev), nil).expectError(t, http.StatusGone, "gone")
	// oldest-1 is resumable: every later event is retained.
	w := openWatch(t, "/api/v1/events?resource_type="+tyGone, HeaderLastEventID, strconv.FormatInt(oldest-1, 10))
	checkEvents(t, w.expectEvents(3), changes[3:])
}

// TestWatchShutdown: stopping the gateway ends its watches cleanly and
// promptly.
func TestWatchShutdown(t *testing.T) {
	cfg := testConfig()
	cfg.JetStream, cfg.Watch = env.js, watchTestConfig
	cfg.ShutdownGrace = 10 * time.Second
	gw := New(cfg, env.store, env.admission, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, lis) }()
	tyStop := watchType(t, "WatchStop")
	w := openWatchWith(t, watchClient(false), "http://"+lis.Addr().String(), "/api/v1/events?resource_type="+tyStop, 0)
	c := create(t, tyStop, "stop", nil)
	checkEvents(t, w.expectEvents(1), []change{c})
	start := time.Now()
	cancel()
	var err2 error
	for err2 == nil {
		_, err2 = w.nextOrEnd(5 * time.Second)
	}
	if !strings.Contains(err2.Error(), "stream ended") || !errors.Is(errors.Unwrap(err2), io.EOF) {
		t.Fatalf("watch did not end cleanly: %v", err2)
	}
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %s", d)
	}
}
