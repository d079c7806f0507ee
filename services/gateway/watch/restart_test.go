package watch

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStreamAcrossHubRestarts: the gateway that serves a watch stops (its
// hub with it) and another starts while events go on being published, as
// when a gateway is restarted or killed; watchers resume on the new hub with
// their last id and receive every matching event exactly once, in order.
// Each new hub starts at the stream's end and passes the published revision,
// as a restarted gateway's does.
func TestStreamAcrossHubRestarts(t *testing.T) {
	f := newFixture(t)
	var current atomic.Pointer[Hub]
	startHub := func() (stop func()) {
		h := NewHub(f.js, Config{Heartbeat: 30 * time.Millisecond, Bookmark: 10 * time.Millisecond, Buffer: 4, CatchUpBatch: 8, TooNewWait: 5 * time.Second},
			func(context.Context) (int64, error) { return f.published.Load(), nil }, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = h.Run(ctx) }()
		current.Store(h)
		return func() {
			current.CompareAndSwap(h, nil)
			cancel()
			<-done
		}
	}
	filters := map[string]Filter{"": {}, "A": {TypeName: "A"}, "B": {TypeName: "B"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := current.Load()
		if h == nil {
			http.Error(w, "no gateway", http.StatusServiceUnavailable)
			return
		}
		wctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		err := h.WaitReady(wctx)
		cancel()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		since, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
		st, err := h.Resolve(r.Context(), since)
		if err != nil {
			http.Error(w, err.Error(), http.StatusGone)
			return
		}
		_ = h.Stream(r.Context(), w, filters[r.URL.Query().Get("type")], st)
	}))
	defer srv.Close()
	wctx, stopWatchers := context.WithCancel(t.Context())
	defer stopWatchers()

	// A first event, which every watcher resumes after.
	types := []string{"", "A"}
	f.publish(t, 1, "A", 1, nil)
	stop := startHub()

	const n = 1500
	type result struct {
		mu   sync.Mutex
		revs []int64
		last int64
	}
	watchers := []string{"", "", "A", "B"}
	results := make([]*result, len(watchers))
	var wg sync.WaitGroup
	for i, typ := range watchers {
		res := &result{last: 1}
		results[i] = res
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				req, _ := http.NewRequestWithContext(wctx, http.MethodGet, srv.URL+"?type="+typ, nil)
				res.mu.Lock()
				req.Header.Set("Last-Event-ID", strconv.FormatInt(res.last, 10))
				res.mu.Unlock()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				if resp.StatusCode != http.StatusOK {
					resp.Body.Close()
					time.Sleep(5 * time.Millisecond)
					continue
				}
				readFrames(resp, func(name string, id int64) {
					res.mu.Lock()
					defer res.mu.Unlock()
					res.last = id // as EventSource: the last id received
					if name != Bookmark {
						res.revs = append(res.revs, id)
					}
				})
				resp.Body.Close()
			}
		}()
	}
	restarts := 0
	for i := int64(2); i <= n; i++ {
		typ := []string{"A", "B", "C"}[rand.IntN(3)]
		types = append(types, typ)
		f.publish(t, i, typ, i%50+1, nil)
		if i%50 == 0 {
			// The gateway goes; a few events are published while none
			// runs; another starts.
			stop()
			restarts++
			for range rand.IntN(4) {
				i++
				typ := []string{"A", "B", "C"}[rand.IntN(3)]
				types = append(types, typ)
				f.publish(t, i, typ, i%50+1, nil)
			}
			stop = startHub()
		}
	}
	defer func() { stop() }()
	last := int64(len(types) - 1)
	deadline := time.Now().Add(30 * time.Second)
	for i, res := range results {
		for {
			res.mu.Lock()
			got := res.last
			res.mu.Unlock()
			if got >= last {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("watcher %d (%q) is stuck at %d of %d", i, watchers[i], got, last)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stopWatchers()
	wg.Wait()
	for i, typ := range watchers {
		var want []int64
		for rev := int64(2); rev <= last; rev++ {
			if typ == "" || types[rev] == typ {
				want = append(want, rev)
			}
		}
		got := results[i].revs
		if !slices.Equal(got, want) {
			t.Errorf("watcher %d (%q): %d events, want %d: %s", i, typ, len(got), len(want), diff(got, want))
		}
	}
	t.Logf("%d gateway restarts", restarts)
}
