package watch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestStreamFromNow: watchers without a resume point receive every event
// published after they started, once.
func TestStreamFromNow(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	f.publish(t, 1, "A", 1, nil)
	f.sync(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = f.hub.Stream(r.Context(), w, Filter{}, Now())
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const watchers, n = 20, 2000
	counts := make([]atomic.Int64, watchers)
	lasts := make([]atomic.Int64, watchers)
	for i := range watchers {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		go readFrames(resp, func(name string, id int64) {
			if name != Bookmark {
				counts[i].Add(1)
				lasts[i].Store(id)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	for i := int64(2); i <= n+1; i++ {
		f.publish(t, i, "A", i, nil)
		if i%20 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := range watchers {
		for counts[i].Load() < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := counts[i].Load(); got != n {
			t.Fatalf("watcher %d received %d of %d events (last %d)", i, got, n, lasts[i].Load())
		}
	}
}

// TestBookmarksBeforeAnyEvent: on a fresh cluster, types and namespaces
// have taken revisions but no event was ever published. A watch from now
// still starts with a BOOKMARK, at the store's published revision, and the
// periodic bookmarks follow that revision while no event comes (a client
// always has a resume point); resuming from a bookmark misses nothing.
func TestBookmarksBeforeAnyEvent(t *testing.T) {
	f := newFixture(t)
	f.published.Store(7) // revisions without events: the default namespace, a type
	f.start(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = f.hub.Stream(r.Context(), w, Filter{TypeName: "A"}, Now())
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // before the server closes: it waits for its handler
	type frame struct {
		name string
		id   int64
	}
	frames := make(chan frame, 100)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go readFrames(resp, func(name string, id int64) { frames <- frame{name, id} })
	next := func(what string) frame {
		t.Helper()
		select {
		case fr := <-frames:
			return fr
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s within 10s", what)
		}
		return frame{}
	}
	if fr := next("bookmark at the start"); fr.name != Bookmark || fr.id != 7 {
		t.Fatalf("first frame %s id %d, want BOOKMARK 7", fr.name, fr.id)
	}
	// More revisions without events: the next bookmarks (every second here)
	// pass them.
	f.published.Store(9)
	for fr := next("a bookmark at 9"); fr.id < 9; fr = next("a bookmark at 9") {
		if fr.name != Bookmark || fr.id != 7 {
			t.Fatalf("frame %s id %d, want bookmarks 7 then 9", fr.name, fr.id)
		}
	}
	// The first event arrives after the bookmark; a watch resuming from the
	// bookmark starts right before it.
	f.publish(t, 10, "A", 1, nil)
	for fr := next("the event"); fr.name != "MODIFIED"; fr = next("the event") {
		if fr.name != Bookmark || fr.id != 9 {
			t.Fatalf("frame %s id %d before the event", fr.name, fr.id)
		}
	}
	f.sync(t)
	if st, err := f.hub.Resolve(ctx, 9); err != nil || st.seq != 1 {
		t.Fatalf("resume from the bookmark 9: %+v %v, want sequence 1", st, err)
	}
}
