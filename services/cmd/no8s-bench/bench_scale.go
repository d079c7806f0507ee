package main

// bench_scale.go is issue 13's scale scenario (make bench-scale, not part of
// the default make bench): how cost grows with the store. It fills the store
// through the API to each size (10k, 100k, 1M by default) and at each size
// prints creates/s at c=32, the time of one 100-item LIST page with a label
// selector (a selective one and a broad one), a by-name GET, and the RSS of
// every no8s process. The goal is flat.

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

// Issue 13's scale targets.
const (
	scaleTargetCreateDrop = 0.20                  // creates/s at the largest size vs the smallest
	scaleTargetRead       = 20 * time.Millisecond // one LIST page, one by-name GET (median)
	scaleTargetRSS        = 300 << 20             // every no8s process together
	scaleShards           = 1000                  // the selective label's values
	scaleReads            = 200                   // reads timed per kind and size
	scaleFillConcurrency  = 32
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
	drop := 1 - last.creates.rate()/first.creates.rate()
	slowest := max(percentile(last.listSelective, 50), percentile(last.listBroad, 50))
	printTargets(
		targetResult{fmt.Sprintf("creates/s at %d within 20%% of %d", last.size, first.size), drop <= scaleTargetCreateDrop,
			fmt.Sprintf("%.0f/s vs %.0f/s: %+.1f%% (target >= -20%%)", last.creates.rate(), first.creates.rate(), -100*drop)},
		targetResult{fmt.Sprintf("one 100-item LIST page with a selector at %d", last.size), slowest < scaleTargetRead,
			fmt.Sprintf("%s median, the slower of selective and broad (target < %s)", fmtDur(slowest), scaleTargetRead)},
		targetResult{fmt.Sprintf("by-name GET at %d", last.size), percentile(last.get, 50) < scaleTargetRead,
			fmt.Sprintf("%s median (target < %s)", fmtDur(percentile(last.get, 50)), scaleTargetRead)},
		targetResult{fmt.Sprintf("RSS of no8s processes at %d", last.size), last.rss < scaleTargetRSS,
			fmt.Sprintf("%s (target < %s)", fmtMiB(last.rss), fmtMiB(scaleTargetRSS))},
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
