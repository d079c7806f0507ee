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
