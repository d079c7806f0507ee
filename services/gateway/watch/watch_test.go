package watch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/labelselector"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/testenv"
)

// fixture is a real JetStream with the event stream and a running hub.
type fixture struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	hub    *Hub
	// published stands in for the store's relay cursor (the hub reads it
	// at every bookmark).
	published atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ns := testenv.NATS(t)
	nc := testenv.Connect(t, ns)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := eventstream.Ensure(t.Context(), js, eventstream.StreamConfig{MaxAge: time.Hour, Duplicates: time.Minute, Memory: true}, eventstream.Identity{StoreID: testStoreID})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{js: js, stream: stream}
}

func (f *fixture) start(t *testing.T) {
	t.Helper()
	f.hub = NewHub(f.js, Config{Heartbeat: time.Second, Bookmark: time.Second, Buffer: 4, TooNewWait: 100 * time.Millisecond}, func(context.Context) (int64, error) { return f.published.Load(), nil }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer wcancel()
	if err := f.hub.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
}

// testStoreID is the store the fixture's stream belongs to: its events
// carry it, as the relay's do.
const testStoreID = "watch-test-store"

// publish appends an event with revision rev, as the relay does.
func (f *fixture) publish(t *testing.T, rev int64, typeName string, id int64, labels map[string]string) {
	t.Helper()
	r := &resource.Resource{ID: id, Name: "r" + strconv.FormatInt(id, 10), ResourceTypeName: typeName, ResourceTypeVersion: "v1", Labels: labels, ResourceVersion: rev, Spec: []byte(`{}`)}
	data, err := eventstream.Encode(eventstream.Event{Revision: rev, Type: eventstream.Modified, Resource: r, Timestamp: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: subjects.Event(typeName, "v1"), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, eventstream.MsgID(rev))
	msg.Header.Set(eventstream.StoreIDHeader, testStoreID)
	if _, err := f.js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	f.published.Store(rev)
}

// sync waits until the hub has read every published event.
func (f *fixture) sync(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := f.stream.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if f.hub.position().seq >= info.State.LastSeq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hub at %d, stream at %d", f.hub.position().seq, info.State.LastSeq)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestResolveSparseRevisions(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	// Sparse revisions: 10, 20, ..., 100 at sequences 1..10.
	for i := int64(1); i <= 10; i++ {
		f.publish(t, 10*i, "A", i, nil)
	}
	f.sync(t)
	ctx := t.Context()
	cases := []struct {
		since int64
		seq   uint64
	}{{9, 1}, {10, 2}, {15, 2}, {19, 2}, {20, 3}, {55, 6}, {99, 10}, {100, 11}}
	for _, c := range cases {
		st, err := f.hub.Resolve(ctx, c.since)
		if err != nil {
			t.Fatalf("since %d: %v", c.since, err)
		}
		if st.seq != c.seq || st.rev != c.since || st.now {
			t.Fatalf("since %d: start %+v, want seq %d", c.since, st, c.seq)
		}
	}
	// Beyond the newest revision: refused, naming it.
	var tooNew *TooNewError
	if _, err := f.hub.Resolve(ctx, 1000); !errors.As(err, &tooNew) || tooNew.Newest != 100 || tooNew.Since != 1000 {
		t.Fatalf("since 1000: %v, want too new with newest 100", err)
	}
	// Nothing was removed from the stream: any resume point is served.
	if st, err := f.hub.Resolve(ctx, 0); err != nil || st.seq != 1 {
		t.Fatalf("since 0: %+v %v", st, err)
	}
}

func TestResolveGoneRule(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	for i := int64(1); i <= 10; i++ {
		f.publish(t, 10*i, "A", i, nil)
	}
	f.sync(t)
	ctx := t.Context()
	// Expire the first four (revisions 10..40): the oldest retained is 50.
	if err := f.stream.Purge(ctx, jetstream.WithPurgeSequence(5)); err != nil {
		t.Fatal(err)
	}
	for _, since := range []int64{0, 10, 40, 48} {
		_, err := f.hub.Resolve(ctx, since)
		var gone *GoneError
		if !errors.As(err, &gone) || gone.Oldest != 49 {
			t.Fatalf("since %d: %v, want gone with oldest 49", since, err)
		}
	}
	// 49 is fine: every revision after it is retained.
	for since, seq := range map[int64]uint64{49: 5, 50: 6, 100: 11} {
		st, err := f.hub.Resolve(ctx, since)
		if err != nil || st.seq != seq {
			t.Fatalf("since %d: %+v %v, want seq %d", since, st, err, seq)
		}
	}
	// Everything expired: the store's published revision decides.
	if err := f.stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	f.published.Store(120)
	if _, err := f.hub.Resolve(ctx, 90); !errors.As(err, new(*GoneError)) {
		t.Fatalf("since 90 on an empty stream published to 120: %v", err)
	}
	// A gateway that starts on the empty stream knows nothing but that.
	f.start(t)
	if _, err := f.hub.Resolve(ctx, 130); !errors.As(err, new(*TooNewError)) {
		t.Fatalf("since 130 on an empty stream published to 120: %v, want too new", err)
	}
	for since, ok := range map[int64]bool{0: false, 119: false, 120: true} {
		st, err := f.hub.Resolve(ctx, since)
		if !ok {
			if !errors.As(err, new(*GoneError)) {
				t.Fatalf("since %d on an empty stream published to 120: %v", since, err)
			}
			continue
		}
		if err != nil || st.seq != 11 {
			t.Fatalf("since %d: %+v %v", since, st, err)
		}
	}
}

func TestResolveEmptyStream(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	st, err := f.hub.Resolve(t.Context(), 0)
	if err != nil || st.seq != 1 || st.rev != 0 {
		t.Fatalf("resolve on a stream that never had events: %+v %v", st, err)
	}
	// Nothing was ever published: any later resume point is ahead.
	var tooNew *TooNewError
	if _, err := f.hub.Resolve(t.Context(), 42); !errors.As(err, &tooNew) || tooNew.Newest != 0 {
		t.Fatalf("since 42 on a stream that never had events: %v, want too new", err)
	}
}

func TestFilter(t *testing.T) {
	sel, err := labelselector.Parse("env in (prod),!legacy")
	if err != nil {
		t.Fatal(err)
	}
	ev := &event{typeName: "A", typeVersion: "v1", resourceID: 7, labels: map[string]string{"env": "prod"}}
	for _, c := range []struct {
		f    Filter
		want bool
		subj string
	}{
		{Filter{}, true, "no8s.events.>"},
		{Filter{TypeName: "A"}, true, "no8s.events.A.*"},
		{Filter{TypeName: "B"}, false, "no8s.events.B.*"},
		{Filter{TypeVersion: "v1"}, true, "no8s.events.*.v1"},
		{Filter{TypeName: "A", TypeVersion: "v2"}, false, "no8s.events.A.v2"},
		{Filter{ResourceID: 7}, true, "no8s.events.>"},
		{Filter{ResourceID: 8}, false, "no8s.events.>"},
		{Filter{Selector: sel}, true, "no8s.events.>"},
	} {
		if got := c.f.match(ev); got != c.want {
			t.Errorf("%+v matches %v, want %v", c.f, got, c.want)
		}
		if got := c.f.subject(); got != c.subj {
			t.Errorf("%+v subject %q, want %q", c.f, got, c.subj)
		}
	}
	ev.labels["legacy"] = "1"
	if (Filter{Selector: sel}).match(ev) {
		t.Error("selector with !legacy matched a legacy resource")
	}
}

// TestStreamCatchUpThenLive streams through the handler: a resume catches
// up from the stream and continues live without gap or duplicate, with a
// tiny live buffer that forces the overflow path.
func TestStreamCatchUpThenLive(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	for i := int64(1); i <= 50; i++ {
		f.publish(t, 2*i, []string{"A", "B"}[i%2], i, nil)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
		st, err := f.hub.Resolve(r.Context(), since)
		if err != nil {
			http.Error(w, err.Error(), http.StatusGone)
			return
		}
		_ = f.hub.Stream(r.Context(), w, Filter{TypeName: "A"}, st)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"?since=20", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ids := make(chan int64, 1000)
	go readIDs(resp, ids)
	// Live events while it catches up.
	for i := int64(51); i <= 100; i++ {
		f.publish(t, 2*i, []string{"A", "B"}[i%2], i, nil)
	}
	// Type A has even i: revisions 2i for even i, above 20.
	var want []int64
	for i := int64(12); i <= 100; i += 2 {
		want = append(want, 2*i)
	}
	for n, w := range want {
		select {
		case got := <-ids:
			if got != w {
				t.Fatalf("event %d: revision %d, want %d", n, got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d (revision %d) did not arrive", n, w)
		}
	}
	select {
	case got := <-ids:
		t.Fatalf("unexpected revision %d", got)
	case <-time.After(200 * time.Millisecond):
	}
}

// readIDs sends the ids of resource events (not bookmarks) read from resp.
func readIDs(resp *http.Response, ids chan<- int64) {
	buf := make([]byte, 0, 64<<10)
	tmp := make([]byte, 32<<10)
	name := ""
	for {
		n, err := resp.Body.Read(tmp)
		buf = append(buf, tmp[:n]...)
		for {
			i := indexByte(buf, '\n')
			if i < 0 {
				break
			}
			line := string(buf[:i])
			buf = buf[i+1:]
			switch {
			case len(line) > 7 && line[:7] == "event: ":
				name = line[7:]
			case len(line) > 4 && line[:4] == "id: " && name == eventstream.Modified:
				v, _ := strconv.ParseInt(line[4:], 10, 64)
				ids <- v
			}
		}
		if err != nil {
			return
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// slowWriter delays every write: a client that reads slower than events
// arrive.
type slowWriter struct {
	http.ResponseWriter
	delay time.Duration
}

func (w slowWriter) Write(b []byte) (int, error) {
	time.Sleep(w.delay)
	return w.ResponseWriter.Write(b)
}

func (w slowWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestStreamOverflow: a watcher slower than the event rate overflows its
// live buffer, catches up from the stream, and still receives every event
// exactly once, in order; a fast watcher beside it is not held back.
func TestStreamOverflow(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	f.publish(t, 1, "A", 1, nil)
	f.sync(t)
	handler := func(delay time.Duration) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			st, err := f.hub.Resolve(r.Context(), 1)
			if err != nil {
				http.Error(w, err.Error(), http.StatusGone)
				return
			}
			_ = f.hub.Stream(r.Context(), slowWriter{w, delay}, Filter{}, st)
		})
	}
	slow := httptest.NewServer(handler(2 * time.Millisecond))
	defer slow.Close()
	fast := httptest.NewServer(handler(0))
	defer fast.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // before the servers close: they wait for their handlers
	open := func(url string) chan int64 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		ids := make(chan int64, 1000)
		go readIDs(resp, ids)
		return ids
	}
	slowIDs, fastIDs := open(slow.URL), open(fast.URL)
	const n = 300
	start := time.Now()
	for i := int64(2); i <= n; i++ {
		f.publish(t, i, "A", i, nil)
	}
	check := func(name string, ids chan int64) time.Duration {
		for want := int64(2); want <= n; want++ {
			select {
			case got := <-ids:
				if got != want {
					t.Fatalf("%s watcher: revision %d, want %d", name, got, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s watcher: revision %d did not arrive", name, want)
			}
		}
		return time.Since(start)
	}
	fastTook := check("fast", fastIDs)
	slowTook := check("slow", slowIDs)
	st := f.hub.Stats()
	t.Logf("fast watcher done after %s, slow after %s; %+v", fastTook, slowTook, st)
	if st.Overflows == 0 || st.CatchUps == 0 {
		t.Fatalf("the slow watcher never overflowed and caught up: %+v", st)
	}
}
