package watch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestStreamExactlyOnceUnderLoad: watchers with and without filters, fast
// and slow, reconnecting at random with their last id while events are
// published, each receive exactly the matching events in order. Timers and
// buffers are tiny so that bookmarks, overflows and catch-ups interleave.
func TestStreamExactlyOnceUnderLoad(t *testing.T) {
	f := newFixture(t)
	f.hub = NewHub(f.js, Config{Heartbeat: 30 * time.Millisecond, Bookmark: 10 * time.Millisecond, Buffer: 4, CatchUpBatch: 8}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); _ = f.hub.Run(ctx) }()
	defer func() { cancel(); <-hubDone }()
	if err := f.hub.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	filters := map[string]Filter{"": {}, "A": {TypeName: "A"}, "B": {TypeName: "B"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		since, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
		st, err := f.hub.Resolve(r.Context(), since)
		if err != nil {
			http.Error(w, err.Error(), http.StatusGone)
			return
		}
		var out http.ResponseWriter = w
		if d, _ := time.ParseDuration(r.URL.Query().Get("delay")); d > 0 {
			out = slowWriter{w, d}
		}
		_ = f.hub.Stream(r.Context(), out, filters[r.URL.Query().Get("type")], st)
	}))
	wctx, stopWatchers := context.WithCancel(t.Context())
	defer srv.Close()
	defer stopWatchers()

	const n = 3000
	types := make([]string, n+1)
	type result struct {
		mu   sync.Mutex
		revs []int64
		last int64
	}
	watchers := []struct{ typ, delay string }{{"", "0"}, {"", "200us"}, {"A", "0"}, {"A", "300us"}, {"B", "100us"}}
	results := make([]*result, len(watchers))
	var wg sync.WaitGroup
	for i, w := range watchers {
		res := &result{}
		results[i] = res
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(wctx, time.Duration(20+rand.IntN(200))*time.Millisecond)
				req, _ := http.NewRequestWithContext(cctx, http.MethodGet, srv.URL+"?type="+w.typ+"&delay="+w.delay, nil)
				res.mu.Lock()
				req.Header.Set("Last-Event-ID", strconv.FormatInt(res.last, 10))
				res.mu.Unlock()
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					readFrames(resp, func(name string, id int64) {
						res.mu.Lock()
						defer res.mu.Unlock()
						if name == Bookmark {
							res.last = max(res.last, id)
							return
						}
						res.revs = append(res.revs, id)
						res.last = id
					})
					resp.Body.Close()
				}
				ccancel()
			}
		}()
	}
	for i := int64(1); i <= n; i++ {
		typ := []string{"A", "B", "C"}[rand.IntN(3)]
		types[i] = typ
		f.publish(t, i, typ, i%50+1, nil)
		if i%100 == 0 {
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, res := range results {
		for {
			res.mu.Lock()
			last := res.last
			res.mu.Unlock()
			if last >= n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a watcher is stuck at %d of %d", last, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stopWatchers()
	wg.Wait()
	for i, w := range watchers {
		var want []int64
		for rev := int64(1); rev <= n; rev++ {
			if w.typ == "" || types[rev] == w.typ {
				want = append(want, rev)
			}
		}
		got := results[i].revs
		if !slices.Equal(got, want) {
			t.Errorf("watcher %+v: %d events, want %d: %s", w, len(got), len(want), diff(got, want))
		}
	}
	t.Logf("%+v", f.hub.Stats())
}

func diff(got, want []int64) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d got %d want %d (before: %v)", i, got[i], want[i], got[max(0, i-3):i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}

// readFrames calls fn for each event frame's name and id until the body ends.
func readFrames(resp *http.Response, fn func(name string, id int64)) {
	buf := make([]byte, 0, 64<<10)
	tmp := make([]byte, 32<<10)
	name := ""
	var id int64 = -1
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
			case line == "":
				if name != "" && id >= 0 {
					fn(name, id)
				}
				name, id = "", -1
			case len(line) > 7 && line[:7] == "event: ":
				name = line[7:]
			case len(line) > 4 && line[:4] == "id: ":
				id, _ = strconv.ParseInt(line[4:], 10, 64)
			}
		}
		if err != nil {
			return
		}
	}
}
