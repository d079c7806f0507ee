package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchStalledWatcher is the slow-client test: a watcher that
// stops reading while changes are committed. The gateway's memory stays
// bounded, the stalled watcher ends with a final event giving the reason,
// and the other watchers' delivery latency (commit to delivery) does not
// move: the same load is run once without and once with the stalled
// watcher, and the p99 latencies are compared.
func TestWatchStalledWatcher(t *testing.T) {
	n := rounds(2000, 10000)
	const rate = 200 // changes per second
	c := newCluster(t)
	c.startStore("")
	adm := c.startAdmission(c.storeAddrs[0])
	addr := freeAddr(t)
	gw := c.startGatewayAt(addr, c.storeAddrs[0], adm, append(watchFlags, "--watch-stall-timeout", "2s")...)
	base := "http://" + addr
	pad := strings.Repeat("x", 4<<10) // every event is ~5 KiB

	phase := func(name string, stalled bool) (p99 time.Duration, growth int64, stuck *sseConn) {
		ty := "Load" + name
		if r := do(t, http.MethodPost, base+"/api/v1/resource-types", map[string]any{"name": ty, "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != http.StatusCreated {
			t.Fatalf("create type: %d %s", r.status, r.body)
		}
		var ids []int64
		for i := range 16 {
			r := do(t, http.MethodPost, base+"/api/v1/resources", map[string]any{"name": fmt.Sprintf("r%d", i), "resource_type_name": ty, "resource_type_version": "v1", "spec": map[string]any{}})
			if r.status != http.StatusCreated {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			ids = append(ids, int64(r.json(t)["id"].(float64)))
		}
		since, _ := strconv.ParseInt(do(t, http.MethodGet, base+"/api/v1/resources?limit=1&resource_type="+ty, nil).header.Get("X-Resource-Version"), 10, 64)
		url := base + "/api/v1/events?resource_type=" + ty
		if stalled {
			var err error
			if stuck, _, err = dialWatch(t.Context(), url, since, true, 1); err != nil {
				t.Fatal(err)
			}
		}
		// Eight watchers that keep up, measuring commit-to-delivery.
		var lat []time.Duration
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 8 {
			conn, _, err := dialWatch(t.Context(), url, since, false, 4096)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.close()
				got := 0
				local := make([]time.Duration, 0, n)
				timeout := time.After(5 * time.Minute)
				for got < n {
					select {
					case ev, ok := <-conn.events:
						if !ok {
							t.Errorf("watcher ended after %d events: %v", got, conn.err)
							return
						}
						if ev.name != "MODIFIED" {
							continue
						}
						var d struct {
							Timestamp time.Time `json:"timestamp"`
						}
						if err := json.Unmarshal(ev.data, &d); err != nil {
							t.Error(err)
							return
						}
						local = append(local, ev.at.Sub(d.Timestamp))
						got++
					case <-timeout:
						t.Errorf("watcher got %d of %d events", got, n)
						return
					}
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			}()
		}
		// Sample the gateway's RSS while the changes go in at a fixed rate.
		start := rss(t, gw)
		var peak atomic.Int64
		peak.Store(start)
		stopSampling := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stopSampling:
					return
				case <-time.After(50 * time.Millisecond):
					if v := rss(t, gw); v > peak.Load() {
						peak.Store(v)
					}
				}
			}
		}()
		tokens := make(chan int)
		go func() {
			defer close(tokens)
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			for i := range n {
				<-tick.C
				tokens <- i
			}
		}()
		var wwg sync.WaitGroup
		var failed atomic.Int64
		for range 8 {
			wwg.Add(1)
			go func() {
				defer wwg.Done()
				for i := range tokens {
					r := doNoFatal(http.MethodPatch, fmt.Sprintf("%s/api/v1/resources/%d", base, ids[i%len(ids)]), map[string]any{"spec": map[string]any{"n": i, "pad": pad}})
					if r != http.StatusOK {
						failed.Add(1)
					}
				}
			}()
		}
		wwg.Wait()
		if f := failed.Load(); f > 0 {
			t.Fatalf("%d writes failed", f)
		}
		wg.Wait()
		close(stopSampling)
		<-sampled
		if t.Failed() {
			t.FailNow()
		}
		slices.Sort(lat)
		p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		growth = peak.Load() - start
		t.Logf("%s: %d changes at %d/s, 8 watchers: latency p50 %s p99 %s; gateway RSS %.1f MiB, peak growth %.1f MiB",
			name, n, rate, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), float64(start)/(1<<20), float64(growth)/(1<<20))
		return p99, growth, stuck
	}

	phase("Warmup", false)
	baseP99, _, _ := phase("Baseline", false)
	stalledP99, growth, stuck := phase("Stalled", true)
	defer stuck.close()

	if growth >= 32<<20 {
		t.Errorf("gateway RSS grew by %.1f MiB with a stalled watcher (limit 32 MiB)", float64(growth)/(1<<20))
	}
	change := float64(stalledP99-baseP99) / float64(baseP99)
	t.Logf("p99 with a stalled watcher moved by %+.1f%%", 100*change)
	if change > 0.20 {
		t.Errorf("p99 latency moved by %+.1f%% with a stalled watcher (limit 20%%)", 100*change)
	}
	// The stalled watcher reads again: what was buffered, then the reason.
	got := 0
	var final sseEvent
	timeout := time.After(60 * time.Second)
	for final.name == "" {
		select {
		case ev, ok := <-stuck.events:
			if !ok {
				t.Fatalf("stalled watcher's stream ended after %d events without a reason: %v", got, stuck.err)
			}
			switch ev.name {
			case "ERROR":
				final = ev
			case "MODIFIED":
				got++
			}
		case <-timeout:
			t.Fatalf("stalled watcher: no final event after %d events", got)
		}
	}
	var reason struct{ Code, Detail string }
	_ = json.Unmarshal(final.data, &reason)
	t.Logf("stalled watcher received %d of %d events, then ERROR %s: %s", got, n, reason.Code, reason.Detail)
	if reason.Code != "too_slow" || got >= n {
		t.Fatalf("final event %s after %d of %d events", final.data, got, n)
	}
	select {
	case _, ok := <-stuck.events:
		if ok {
			t.Fatal("events after the final event")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end after the final event")
	}
}

// rss is a process's resident set size in bytes.
func rss(t *testing.T, p *proc) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read gateway status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// doNoFatal sends a JSON request and returns the status (0 on a transport
// error); for goroutines other than the test's.
func doNoFatal(method, url string, body any) int {
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(string(b)))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
