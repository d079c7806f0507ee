package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/no8s/no8s/libs/client"
)

// The "watch" scenario (issue 4): 1,000 concurrent SSE watchers on one
// gateway, half of them filtered by type, while changes are committed
// through the API at a fixed 200/s, alternating between two types. It
// reports the fan-out latency from commit (the event's timestamp, taken in
// the store's write transaction) to delivery in this process, over every
// delivery to every watcher, and the gateway's memory per idle watcher
// (its RSS with the 1,000 watchers connected and idle, minus before, per
// watcher).
const (
	watchWatchers   = 1000
	watchRate       = 200 // changes per second
	watchWarmup     = 3 * time.Second
	watchMeasure    = 20 * time.Second
	watchP99Target  = 100 * time.Millisecond
	watchIdleTarget = 64 << 10 // bytes per idle watcher
	watchResources  = 50       // per type, updated round robin
)

func benchWatch(ctx context.Context, env *benchEnv) error {
	if err := env.Fresh(ctx); err != nil {
		return err
	}
	types := []string{"WatchBenchA", "WatchBenchB"}
	ids := map[string][]int64{}
	for _, ty := range types {
		if _, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{
			"name": ty, "version": "v1", "schema": map[string]any{"type": "object"},
		}); err != nil {
			return err
		}
		for i := range watchResources {
			body, err := env.postJSON(ctx, "/api/v1/resources", map[string]any{
				"name": fmt.Sprintf("r%03d", i), "resource_type_name": ty, "resource_type_version": "v1", "spec": map[string]any{"n": 0},
			})
			if err != nil {
				return err
			}
			id, err := jsonID(body)
			if err != nil {
				return err
			}
			ids[ty] = append(ids[ty], id)
		}
	}
	fmt.Printf("stack: %s\n", describeServices(env))
	gwPID := 0
	for _, p := range env.services() {
		if p.name == "gateway" {
			gwPID = p.pid
		}
	}
	time.Sleep(2 * time.Second) // let the gateway settle after the setup writes
	rss0, err := readProcKB(gwPID, "VmRSS")
	if err != nil {
		return err
	}

	// 1,000 watchers: even ones see everything, odd ones one type each.
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	api, err := env.watchClient()
	if err != nil {
		return err
	}
	var measureFrom, measureTo atomic.Int64 // unix nanos of the commit window
	measureFrom.Store(1 << 62)
	measureTo.Store(1 << 62)
	watchers := make([]*benchWatcher, watchWatchers)
	var connected sync.WaitGroup
	var wg sync.WaitGroup
	var failures atomic.Int64
	var firstErr atomic.Value
	for i := range watchers {
		filter := ""
		if i%2 == 1 {
			filter = types[(i/2)%2]
		}
		w := &benchWatcher{filter: filter, lat: make([]int32, 0, 2*watchRate*int(watchMeasure/time.Second))}
		watchers[i] = w
		connected.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.run(wctx, api, connected.Done, &measureFrom, &measureTo); err != nil && wctx.Err() == nil {
				failures.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}()
	}
	waitConnected := make(chan struct{})
	go func() { connected.Wait(); close(waitConnected) }()
	select {
	case <-waitConnected:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("the watchers did not all connect within 60s (%d failed: %v)", failures.Load(), firstErr.Load())
	}
	if n := failures.Load(); n > 0 {
		return fmt.Errorf("%d watchers failed: %v", n, firstErr.Load())
	}
	time.Sleep(3 * time.Second)
	rss1, err := readProcKB(gwPID, "VmRSS")
	if err != nil {
		return err
	}
	perIdle := (rss1 - rss0) / watchWatchers
	fmt.Printf("gateway RSS %s before the watchers, %s with %d idle watchers: %.1f KiB per idle watcher\n",
		fmtMiB(rss0), fmtMiB(rss1), watchWatchers, float64(rss1-rss0)/watchWatchers/1024)

	// Changes at a fixed rate, alternating types, from 16 writers (enough
	// to hold the rate while each write takes tens of milliseconds).
	start := time.Now()
	measureFrom.Store(start.Add(watchWarmup).UnixNano())
	measureTo.Store(start.Add(watchWarmup + watchMeasure).UnixNano())
	total := int((watchWarmup + watchMeasure) / (time.Second / watchRate))
	tokens := make(chan int)
	go func() {
		defer close(tokens)
		tick := time.NewTicker(time.Second / watchRate)
		defer tick.Stop()
		for i := range total {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			tokens <- i
		}
	}()
	cpu0 := env.sampleCPU()
	var writeErrs atomic.Int64
	var committed [2]atomic.Int64 // per type, all writes
	var wwg sync.WaitGroup
	for range 16 {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for i := range tokens {
				t := i % 2
				id := ids[types[t]][(i/2)%watchResources]
				status, _, _, err := env.do(ctx, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", id), map[string]any{"spec": map[string]any{"n": i + 1}}) // never a no-op
				if err != nil || status != http.StatusOK {
					writeErrs.Add(1)
					continue
				}
				committed[t].Add(1)
			}
		}()
	}
	wwg.Wait()
	cpu1 := env.sampleCPU()
	elapsed := time.Since(start)
	if n := writeErrs.Load(); n > 0 {
		return fmt.Errorf("%d writes failed", n)
	}
	// Let the last deliveries arrive.
	want := func(w *benchWatcher) int64 {
		switch w.filter {
		case "":
			return committed[0].Load() + committed[1].Load()
		case types[0]:
			return committed[0].Load()
		default:
			return committed[1].Load()
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		behind := 0
		for _, w := range watchers {
			if w.events.Load() < want(w) {
				behind++
			}
		}
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			lo, hi := map[string]int64{}, map[string]int64{}
			for _, w := range watchers {
				got := w.events.Load()
				if v, ok := lo[w.filter]; !ok || got < v {
					lo[w.filter] = got
				}
				hi[w.filter] = max(hi[w.filter], got)
			}
			return fmt.Errorf("%d watchers did not receive every change within 30s (committed %d + %d; received min/max per filter %v / %v)",
				behind, committed[0].Load(), committed[1].Load(), lo, hi)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rss2, _ := readProcKB(gwPID, "VmRSS")
	stopWatchers()
	wg.Wait()

	var all []time.Duration
	var deliveries int64
	for _, w := range watchers {
		deliveries += w.events.Load()
		for _, us := range w.lat {
			all = append(all, time.Duration(us)*time.Microsecond)
		}
		if got := w.events.Load(); got != want(w) {
			return fmt.Errorf("a watcher (filter %q) received %d events, %d were committed", w.filter, got, want(w))
		}
	}
	if len(all) == 0 {
		return errors.New("no delivery measured")
	}
	p50, p99, pmax := percentile(all, 50), percentile(all, 99), percentile(all, 100)
	fmt.Printf("\n%d changes at %d/s over %s (%s warm-up), %d watchers (%d unfiltered, %d filtered by type)\n",
		committed[0].Load()+committed[1].Load(), watchRate, elapsed.Round(time.Second), watchWarmup, watchWatchers, watchWatchers/2, watchWatchers/2)
	fmt.Printf("every watcher received exactly the changes of its filter: %d deliveries, %.0f/s\n", deliveries, float64(deliveries)/elapsed.Seconds())
	tw := newTable()
	fmt.Fprintf(tw, "  commit to delivery\tn\tp50\tp99\tmax\t\n")
	fmt.Fprintf(tw, "  after warm-up\t%d\t%s\t%s\t%s\t\n", len(all), fmtDur(p50), fmtDur(p99), fmtDur(pmax))
	tw.Flush()
	env.figure("fan-out commit to delivery p50, ms", ms(p50))
	env.figure("fan-out commit to delivery p99, ms", ms(p99))
	env.figure("gateway CPU under fan-out, cores", cpu1.groupCores(cpu0, "gateway"))
	fmt.Printf("gateway RSS under load: %s\n", fmtMiB(rss2))
	fmt.Printf("CPU used, in cores: %s\n", cpu1.cores(cpu0))
	if other := cpu1.other(cpu0); other > 0.3 {
		fmt.Printf("note: other processes took %.2f cores while measuring: the figures are disturbed\n", other)
	}
	printTargets(
		targetResult{
			name:   fmt.Sprintf("fan-out p99, %d watchers at %d changes/s", watchWatchers, watchRate),
			ok:     p99 < watchP99Target,
			detail: fmt.Sprintf("%s (target < %s)", fmtDur(p99), fmtDur(watchP99Target)),
		},
		targetResult{
			name:   "gateway memory per idle watcher",
			ok:     perIdle < watchIdleTarget,
			detail: fmt.Sprintf("%.1f KiB (target < %d KiB)", float64(perIdle)/1024, watchIdleTarget>>10),
		},
	)
	return nil
}

// benchWatcher is one SSE client.
type benchWatcher struct {
	filter string
	events atomic.Int64
	lat    []int32 // microseconds, commits inside the measuring window
}

// run watches until ctx ends; connected is called once the stream has
// started (its first BOOKMARK). Frames are read raw (client.Stream) and
// only their timestamp is parsed.
func (w *benchWatcher) run(ctx context.Context, api *client.Client, connected func(), from, to *atomic.Int64) error {
	once := sync.OnceFunc(connected)
	defer once()
	st, err := api.OpenStream(ctx, client.ListOptions{TypeName: w.filter}, client.FromNow)
	if err != nil {
		return err
	}
	defer st.Close()
	tsKey := []byte(`"timestamp":"`)
	for {
		f, err := st.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if f.Name == client.EventBookmark {
			once()
			continue
		}
		now := time.Now()
		i := bytes.LastIndex(f.Data, tsKey)
		if i < 0 {
			return fmt.Errorf("event without timestamp: %s", f.Data)
		}
		rest := f.Data[i+len(tsKey):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return fmt.Errorf("bad timestamp in %s", f.Data)
		}
		ts, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
		if err != nil {
			return err
		}
		w.events.Add(1)
		if c := ts.UnixNano(); c >= from.Load() && c < to.Load() {
			w.lat = append(w.lat, int32(now.Sub(ts)/time.Microsecond))
		}
	}
}

// jsonID reads the id of a created object.
func jsonID(body []byte) (int64, error) {
	i := bytes.Index(body, []byte(`"id":`))
	if i < 0 {
		return 0, fmt.Errorf("no id in %s", truncateBytes(body, 200))
	}
	rest := body[i+5:]
	j := bytes.IndexAny(rest, ",}")
	if j < 0 {
		return 0, fmt.Errorf("no id in %s", truncateBytes(body, 200))
	}
	return strconv.ParseInt(string(bytes.TrimSpace(rest[:j])), 10, 64)
}
