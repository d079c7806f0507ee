package main

// bench_scale.go is the scale scenario (make bench-scale, not part of the
// default make bench): how cost grows with the store. It fills the store
// through the API to each size (10k, 100k, 1M by default) and at each size
// prints creates/s at c=32, the time of one 100-item LIST page with a label
// selector (a selective one and a broad one), a by-name GET, and the RSS of
// every no8s process. The goal is flat: its targets are the largest size's
// figures as ratios of the smallest's, measured in the same run.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

var scaleSizesFlag = flag.String("scale-sizes", "10000,100000,1000000", "scale scenario: the store sizes to measure at, in resources, ascending")

// The scale targets: the largest size against the smallest, same run.
const (
	scaleTargetCreates   = 0.8  // creates/s at c=32, at least this share of the smallest size's
	scaleTargetRead      = 1.5  // a LIST page with a selector, a by-name GET: at most this many times the smallest size's median
	scaleTargetRSS       = 1.5  // every no8s process together: at most this many times the smallest size's
	scaleShards          = 1000 // the selective label's values
	scaleReads           = 200  // reads timed per kind and size
	scaleFillConcurrency = 32
)

// scaleBody is a create body of the scale scenario: the api scenario's
// DatabaseCluster with a team label every resource has and a shard label
// one resource in scaleShards has.
func scaleBody(seq int64) []byte {
	return fmt.Appendf(nil, `{"name":"scale-%08d","resource_type_name":"DatabaseCluster","resource_type_version":"v1",`+
		`"labels":{"team":"payments","environment":"production","shard":"s%d"},`+
		`"spec":{"engine":"postgres","engine_version":"16.2","instance_class":"db.large","storage_gb":500,"replicas":2,"backup_retention_days":14,"high_availability":true}}`,
		seq, seq%scaleShards)
}

// scaleRow is what the scenario measured at one size.
type scaleRow struct {
	size                          int
	creates                       loadResult
	listSelective, listBroad, get []time.Duration
	rss                           int64
	rssByProc                     string
}

func benchScale(ctx context.Context, env *benchEnv) error {
	var sizes []int
	for _, f := range strings.Split(*scaleSizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return fmt.Errorf("-scale-sizes %q: want ascending positive counts", *scaleSizesFlag)
		}
		sizes = append(sizes, n)
	}
	if err := env.Fresh(ctx); err != nil {
		return err
	}
	if _, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{
		"name": "DatabaseCluster", "version": "v1", "schema": json.RawMessage(databaseClusterSchema),
	}); err != nil {
		return err
	}
	fmt.Printf("stack: %s; store backend: %s\n", describeServices(env), env.backendName())
	fmt.Printf("sizes %v; each resource labelled team=payments (all) and shard=s<n mod %d> (one in %d)\n", sizes, scaleShards, scaleShards)

	// Every create takes a fresh sequence number (its name); stored counts
	// those answered 201.
	var seqs, stored atomic.Int64
	create := func(ctx context.Context, _ int64) error {
		status, _, body, err := env.do(ctx, http.MethodPost, "/api/v1/resources", scaleBody(seqs.Add(1)-1))
		if err != nil {
			return err
		}
		if status != http.StatusCreated {
			return fmt.Errorf("create: %d %s", status, truncateBytes(body, 300))
		}
		stored.Add(1)
		return nil
	}
	var rows []scaleRow
	for _, size := range sizes {
		if err := scaleFill(ctx, &stored, int64(size), create); err != nil {
			return err
		}
		row := scaleRow{size: size}
		// creates/s at c=32 (they add to the store).
		res, err := runLoad(ctx, loadSpec{Concurrency: 32, Warmup: time.Second, Duration: 5 * time.Second}, true, create)
		if err != nil {
			return fmt.Errorf("creates at %d: %w", size, err)
		}
		row.creates = res
		// Reads.
		rng := rand.New(rand.NewPCG(uint64(size), 1))
		for range scaleReads {
			shard := rng.IntN(scaleShards)
			d, err := scaleTimedGet(ctx, env, fmt.Sprintf("/api/v1/resources?resource_type=DatabaseCluster&resource_type_version=v1&label_selector=shard%%3Ds%d&limit=100", shard))
			if err != nil {
				return err
			}
			row.listSelective = append(row.listSelective, d)
			if d, err = scaleTimedGet(ctx, env, "/api/v1/resources?resource_type=DatabaseCluster&resource_type_version=v1&label_selector=team%3Dpayments&limit=100"); err != nil {
				return err
			}
			row.listBroad = append(row.listBroad, d)
			if d, err = scaleTimedGet(ctx, env, fmt.Sprintf("/api/v1/resources/by-name/DatabaseCluster/v1/scale-%08d", rng.Int64N(int64(size)))); err != nil {
				return err
			}
			row.get = append(row.get, d)
		}
		env.heapProfiles(ctx, fmt.Sprintf("scale-%d", size))
		mem, err := env.serviceMemory()
		if err != nil {
			return err
		}
		var parts []string
		for _, m := range mem {
			row.rss += m.rss
			parts = append(parts, fmt.Sprintf("%s %s", m.name, fmtMiB(m.rss)))
		}
		row.rssByProc = strings.Join(parts, ", ")
		rows = append(rows, row)
		fmt.Printf("at %d: creates/s c=32 %.0f (p99 %s); LIST page selective %s, broad %s; by-name GET %s (medians); RSS %s (%s)\n",
			size, res.rate(), fmtDur(res.percentile(99)), fmtDur(percentile(row.listSelective, 50)), fmtDur(percentile(row.listBroad, 50)),
			fmtDur(percentile(row.get, 50)), fmtMiB(row.rss), row.rssByProc)
	}

	fmt.Println()
	tw := newTable()
	fmt.Fprintf(tw, "  stored\tcreates/s c=32\tcreate p99\tLIST selective p50/p99\tLIST broad p50/p99\tGET by name p50/p99\tRSS no8s\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "  %d\t%.0f\t%s\t%s / %s\t%s / %s\t%s / %s\t%s\t\n", r.size, r.creates.rate(), fmtDur(r.creates.percentile(99)),
			fmtDur(percentile(r.listSelective, 50)), fmtDur(percentile(r.listSelective, 99)),
			fmtDur(percentile(r.listBroad, 50)), fmtDur(percentile(r.listBroad, 99)),
			fmtDur(percentile(r.get, 50)), fmtDur(percentile(r.get, 99)), fmtMiB(r.rss))
	}
	tw.Flush()
	first, last := rows[0], rows[len(rows)-1]
	createRatio := last.creates.rate() / first.creates.rate()
	readTarget := func(what string, at, base []time.Duration) targetResult {
		r := float64(percentile(at, 50)) / float64(percentile(base, 50))
		return targetResult{fmt.Sprintf("%s at %d vs %d", what, last.size, first.size), r <= scaleTargetRead,
			fmt.Sprintf("%s vs %s median: %.2fx (target <= %.1fx)", fmtDur(percentile(at, 50)), fmtDur(percentile(base, 50)), r, scaleTargetRead)}
	}
	rssRatio := float64(last.rss) / float64(first.rss)
	printTargets(
		targetResult{fmt.Sprintf("creates/s c=32 at %d vs %d", last.size, first.size), createRatio >= scaleTargetCreates,
			fmt.Sprintf("%.0f/s vs %.0f/s: %.2fx (target >= %.1fx)", last.creates.rate(), first.creates.rate(), createRatio, scaleTargetCreates)},
		readTarget("LIST page, selective selector", last.listSelective, first.listSelective),
		readTarget("LIST page, broad selector", last.listBroad, first.listBroad),
		readTarget("by-name GET", last.get, first.get),
		targetResult{fmt.Sprintf("RSS of no8s processes at %d vs %d", last.size, first.size), rssRatio <= scaleTargetRSS,
			fmt.Sprintf("%s vs %s: %.2fx (target <= %.1fx)", fmtMiB(last.rss), fmtMiB(first.rss), rssRatio, scaleTargetRSS)},
	)
	return nil
}

// scaleFill creates resources through the API at c=32 until target are
// stored, with a progress line every 10 seconds.
func scaleFill(ctx context.Context, stored *atomic.Int64, target int64, create func(context.Context, int64) error) error {
	n := target - stored.Load()
	if n <= 0 {
		return nil
	}
	start := time.Now()
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Printf("  filling to %d: %d stored, %s elapsed\n", target, stored.Load(), time.Since(start).Round(time.Second))
			}
		}
	}()
	if _, err := runLoad(ctx, loadSpec{Concurrency: scaleFillConcurrency, Count: int(n)}, true, create); err != nil {
		return fmt.Errorf("fill to %d: %w", target, err)
	}
	fmt.Printf("(stored %d more, to %d, in %s: %.0f/s)\n", n, stored.Load(), time.Since(start).Round(time.Second), float64(n)/time.Since(start).Seconds())
	return nil
}

// scaleTimedGet times one GET that must answer 200.
func scaleTimedGet(ctx context.Context, env *benchEnv, path string) (time.Duration, error) {
	t0 := time.Now()
	status, _, body, err := env.do(ctx, http.MethodGet, path, nil)
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d %s", path, status, truncateBytes(body, 300))
	}
	return d, nil
}
