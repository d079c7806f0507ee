package main

// bench_peer.go is the peer scenario (make bench-peer): the same load,
// from this process's own HTTP/JSON code, against no8s and against its
// Kubernetes peer (kube-apiserver + etcd + a controller-runtime noop
// controller, tools/k8s), back to back on this machine (no8s, the peer,
// no8s again), and the table of both with their ratios. Each side, in
// this order:
//
//   - create→Ready open loop at 100, 150, 200, 300 and 400/s (p50, p99,
//     and the highest rate kept up with p99 under 1 s), from the create
//     sent to Ready seen on a watch;
//   - reconciles/s at saturation: 20,000 objects Ready, the scheduler (the
//     controller) stopped, each one's spec changed, started again: objects
//     seen Ready at their new generation per second over the measured
//     window from the first; with the store's CPU per reconcile
//     (PostgreSQL, etcd) and every process's;
//   - creates at c=1 and c=32 (rate, p99), nothing reconciling;
//   - LIST of 10,000 objects of one type in pages of 1,000 (best of 3);
//   - the RSS of every process at the end (no8s with nats-server; the
//     API server, etcd and the controller).

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/sdk/worker"
)

var (
	peerSmokeFlag = flag.Bool("smoke", false, "peer scenario: a few seconds per phase and small counts, no figures kept (checks the harness)")
	peerOnlyFlag  = flag.Bool("peer-only", false, "peer scenario: run the Kubernetes peer alone (no no8s runs, no ratios): for looking into the peer's settings")
	peerRatesFlag = flag.String("peer-rates", "100,150,200,300,400", "peer scenario: the offered create→Ready rates, per second")
)

// peerSizes are one run's counts and windows (full, or -smoke).
type peerSizes struct {
	createWarmup, createMeasure time.Duration
	list                        int // objects listed
	rates                       []int
	rateWarmup, rateMeasure     time.Duration
	sat                         int // objects made dirty for reconciles/s
	satMeasure                  time.Duration
}

// peerKeptUp is the create→Ready p99 under which a rate counts as kept up.
const peerKeptUp = time.Second

func peerSizing() (peerSizes, error) {
	if *peerSmokeFlag {
		return peerSizes{createWarmup: 200 * time.Millisecond, createMeasure: time.Second, list: 1500,
			rates: []int{100}, rateWarmup: time.Second, rateMeasure: 2 * time.Second, sat: 300, satMeasure: 2 * time.Second}, nil
	}
	var rates []int
	for f := range strings.SplitSeq(*peerRatesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return peerSizes{}, fmt.Errorf("-peer-rates: %q is not a positive rate", f)
		}
		rates = append(rates, n)
	}
	return peerSizes{createWarmup: apiWarmup, createMeasure: *apiMeasureFlag, list: apiListCount,
		rates: rates, rateWarmup: *reconcileWarmupFlag, rateMeasure: *reconcileDurationFlag,
		sat: *reconcileResourcesFlag, satMeasure: *reconcileDurationFlag}, nil
}

// peerSide is one system the peer scenario measures.
type peerSide interface {
	label() string
	// store is the CPU group of the side's store: postgres or etcd.
	store() string
	createAPI(ctx context.Context, name string) error
	createList(ctx context.Context, name string) error
	listAll(ctx context.Context) (items, pages int, err error)
	// startReconciler starts what reconciles the create→Ready objects.
	startReconciler(ctx context.Context) error
	createReady(ctx context.Context, name string) error
	watchReady(ctx context.Context) (*readyWatch, error)
	// prepareSat readies the saturation phase; satCreate and satPatch
	// create and change its objects (seq numbers them from 0), watchSat
	// sees them at minGen.
	prepareSat(ctx context.Context, n int) error
	satCreate(ctx context.Context, seq int, name string) error
	satPatch(ctx context.Context, seq int, name string) error
	watchSat(ctx context.Context, minGen int64) (*readyWatch, error)
	stopReconciler(ctx context.Context) error
	restartReconciler(ctx context.Context) error
	// settings are the lines describing every process's flags.
	settings(ctx context.Context) []string
}

// peerResult is what one side measured.
type peerResult struct {
	label       string
	ceiling     float64 // the PostgreSQL ceiling's creates/s at c=32 (no8s's runs)
	restarts    int     // watches opened again after the server ended them
	creates     map[int]loadResult
	list        time.Duration // best of 3
	listPages   int
	rates       []rateResult
	satRate     float64
	satWindow   time.Duration
	satShort    bool
	storeCPU    time.Duration // per reconcile, in the window
	allCPU      time.Duration // every process of the side, per reconcile
	mem         []procMem
	disturbed   float64
	took        time.Duration
	settings    []string
	storeName   string
	satCPULine  string
	createsLine []string
	// dispatched: the work items and attempts of the saturation phase,
	// from the spec changes to the drained backlog (no8s only: counted).
	dispatched dispatchCount
	counted    bool
}

// dispatchCounter is a side that counts its dispatches (no8s).
type dispatchCounter interface {
	countDispatches(ctx context.Context) (dispatchCount, error)
}

// benchPeer is the "peer" scenario.
func benchPeer(ctx context.Context, env *benchEnv) error {
	sizes, err := peerSizing()
	if err != nil {
		return err
	}
	tools, err := k8sToolsDir(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("machine: nproc %d, load average at start %s", runtime.NumCPU(), load)
	if *peerSmokeFlag {
		fmt.Println("-smoke: a few seconds per phase, small counts; no figures kept")
	}
	pgData := "/var/lib/postgresql"
	if env.pool != nil {
		_ = env.pool.QueryRow(ctx, `SHOW data_directory`).Scan(&pgData)
	}
	workers := 2 * worker.DefaultMaxConcurrency
	if n := *reconcileConcurrencyFlag; n > 0 {
		workers = 2 * n
	}
	var results []peerResult
	sides := []string{"no8s", "Kubernetes", "no8s"}
	if *peerOnlyFlag {
		sides = []string{"Kubernetes"}
	}
	for i, which := range sides {
		fmt.Printf("\n-- %s (run %d of %d)\n", which, i+1, len(sides))
		var side peerSide
		if which == "no8s" {
			if err := env.Fresh(ctx); err != nil {
				return err
			}
			side = &no8sPeerSide{env: env}
		} else {
			env.stop() // the peer runs alone
			env.stackN++
			kp, err := startK8sPeer(ctx, env, tools, workers, pgData)
			if err != nil {
				return fmt.Errorf("starting the Kubernetes peer: %w", err)
			}
			side = &k8sPeerSide{p: kp}
		}
		r, err := runPeerSide(ctx, env, side, sizes)
		if err != nil {
			return fmt.Errorf("%s: %w", which, err)
		}
		results = append(results, r)
		if which != "no8s" {
			env.stop()
			env.used = false
			if err := env.start(ctx); err != nil {
				return err
			}
		}
	}
	if *peerOnlyFlag {
		return nil
	}
	printPeerTable(env, results, sizes)
	fmt.Printf("\n(the three runs took %s)\n", time.Since(start).Round(time.Second))
	return nil
}

// runPeerSide measures one side, phase after phase.
func runPeerSide(ctx context.Context, env *benchEnv, side peerSide, sz peerSizes) (peerResult, error) {
	t0 := time.Now()
	res := peerResult{label: side.label(), creates: map[int]loadResult{}, storeName: side.store()}

	// 1. create→Ready at each offered rate.
	if err := side.startReconciler(ctx); err != nil {
		return res, err
	}
	res.settings = side.settings(ctx) // with every process running
	watch, err := side.watchReady(ctx)
	if err != nil {
		return res, err
	}
	watch.markSent("first", time.Now())
	if err := side.createReady(ctx, "first"); err != nil {
		watch.stop()
		return res, err
	}
	if err := watch.waitReady(ctx, env, []string{"first"}); err != nil {
		watch.stop()
		return res, fmt.Errorf("the first object: %w", err)
	}
	for _, rate := range sz.rates {
		name := func(seq int) string { return fmt.Sprintf("rc%d-%06d", rate, seq) }
		r, _, err := offerRate(ctx, env, watch, rate, sz.rateWarmup, sz.rateMeasure, name, side.createReady)
		if err != nil {
			watch.stop()
			return res, fmt.Errorf("%d/s: %w", rate, err)
		}
		res.rates = append(res.rates, r)
		res.disturbed = max(res.disturbed, r.other)
		fmt.Printf("  create→Ready at %d/s: p50 %s, p99 %s (%d counted, %d errors)\n", rate, fmtDur(percentile(r.lat, 50)), fmtDur(percentile(r.lat, 99)), r.counted, r.errs)
	}
	watch.stop()
	res.restarts += watch.restarts

	// 2. Reconciles/s at saturation.
	if err := peerSaturation(ctx, env, side, sz, &res); err != nil {
		return res, fmt.Errorf("saturation: %w", err)
	}
	fmt.Printf("  reconciles/s at saturation: %.0f over %s; store (%s) CPU per reconcile %s, every process's %s\n",
		res.satRate, res.satWindow.Round(100*time.Millisecond), res.storeName, fmtDur(res.storeCPU), fmtDur(res.allCPU))

	// The reconciler's memory now: it is stopped for what follows.
	env.heapProfiles(ctx, "peer-"+side.label()+"-sat")
	memSat, err := env.procMemory(true)
	if err != nil {
		return res, err
	}

	// 3. Creates at c=1 and c=32, nothing reconciling: the stored objects of
	// the phases above stay, the reconciler is stopped so that no8s's
	// scheduler neither reconciles the new ones nor marks them as waiting
	// for a reconciler. One create first: a kind's first write may be slow.
	if err := side.stopReconciler(ctx); err != nil {
		return res, err
	}
	if err := side.createAPI(ctx, "api-warm"); err != nil {
		return res, err
	}
	for _, c := range apiConcurrencies {
		cpu0 := env.sampleCPU()
		r, err := runLoad(ctx, loadSpec{Concurrency: c, Warmup: sz.createWarmup, Duration: sz.createMeasure}, true, func(ctx context.Context, seq int64) error {
			return side.createAPI(ctx, fmt.Sprintf("api-c%d-%07d", c, seq))
		})
		if err != nil {
			return res, fmt.Errorf("creates at c=%d: %w", c, err)
		}
		cpu1 := env.sampleCPU()
		res.creates[c] = r
		fmt.Printf("  creates at c=%d: %.0f/s, p99 %s\n", c, r.rate(), fmtDur(r.percentile(99)))
		res.createsLine = append(res.createsLine, fmt.Sprintf("creates c=%d\t%s", c, cpu1.cores(cpu0)))
		res.disturbed = max(res.disturbed, cpu1.other(cpu0))
	}

	// The machine's scale: the same-run PostgreSQL ceiling (no8s's side).
	if c, ok := side.(interface {
		ceiling(ctx context.Context) (float64, error)
	}); ok {
		rate, err := c.ceiling(ctx)
		if err != nil {
			return res, fmt.Errorf("ceiling: %w", err)
		}
		res.ceiling = rate
		fmt.Printf("  PostgreSQL ceiling at c=32 (pgx, row + outbox row per transaction): %.0f/s\n", rate)
	}

	// 4. LIST of sz.list objects in pages of 1,000, best of 3.
	if _, err := runLoad(ctx, loadSpec{Concurrency: apiBulkConcurrency, Count: sz.list}, true, func(ctx context.Context, seq int64) error {
		return side.createList(ctx, fmt.Sprintf("list-%07d", seq))
	}); err != nil {
		return res, fmt.Errorf("filling the list: %w", err)
	}
	for range 3 {
		l0 := time.Now()
		n, pages, err := side.listAll(ctx)
		d := time.Since(l0)
		if err != nil {
			return res, err
		}
		if n != sz.list {
			return res, fmt.Errorf("listed %d objects, want %d", n, sz.list)
		}
		if res.list == 0 || d < res.list {
			res.list, res.listPages = d, pages
		}
	}
	fmt.Printf("  LIST %d in %d pages: best of 3 %s\n", sz.list, res.listPages, fmtDur(res.list))

	// 5. Memory of every process, nats-server included; a process stopped
	// since saturation (the scheduler, the controller) as it was then.
	env.heapProfiles(ctx, "peer-"+side.label()+"-end")
	mem, err := env.procMemory(true)
	if err != nil {
		return res, err
	}
	for _, m := range memSat {
		if !slices.ContainsFunc(mem, func(n procMem) bool { return n.name == m.name }) {
			m.name += " (at the end of saturation)"
			mem = append(mem, m)
		}
	}
	res.mem = mem
	res.took = time.Since(t0)
	return res, env.checkAlive()
}

// peerSaturation creates sz.sat objects and waits until all are Ready;
// stops the reconciler, changes each one's spec once, starts it again, and
// counts the objects seen Ready at their new generation over sz.satMeasure
// from the first, with the CPU of the window.
func peerSaturation(ctx context.Context, env *benchEnv, side peerSide, sz peerSizes, res *peerResult) error {
	if err := side.prepareSat(ctx, sz.sat); err != nil {
		return err
	}
	names := make([]string, sz.sat)
	for i := range names {
		names[i] = fmt.Sprintf("sat-%07d", i)
	}
	created, err := side.watchSat(ctx, 1)
	if err != nil {
		return err
	}
	for _, n := range names {
		created.markSent(n, time.Now())
	}
	t0 := time.Now()
	if _, err := runLoad(ctx, loadSpec{Concurrency: apiBulkConcurrency, Count: sz.sat}, true, func(ctx context.Context, seq int64) error {
		return side.satCreate(ctx, int(seq), names[seq])
	}); err != nil {
		created.stop()
		return err
	}
	err = created.waitReady(ctx, env, names)
	created.stop()
	res.restarts += created.restarts
	if err != nil {
		return fmt.Errorf("the created objects Ready: %w", err)
	}
	fmt.Printf("  saturation: %d objects created at c=%d and Ready in %s\n", sz.sat, apiBulkConcurrency, time.Since(t0).Round(100*time.Millisecond))
	if err := side.stopReconciler(ctx); err != nil {
		return err
	}
	dc, counting := side.(dispatchCounter)
	var d0 dispatchCount
	if counting {
		if d0, err = dc.countDispatches(ctx); err != nil {
			return err
		}
	}
	t0 = time.Now()
	if _, err := runLoad(ctx, loadSpec{Concurrency: apiBulkConcurrency, Count: sz.sat}, true, func(ctx context.Context, seq int64) error {
		return side.satPatch(ctx, int(seq), names[seq])
	}); err != nil {
		return fmt.Errorf("spec changes: %w", err)
	}
	fmt.Printf("  reconciler stopped; %d spec changes made in %s; starting it again\n", sz.sat, time.Since(t0).Round(100*time.Millisecond))
	watch, err := side.watchSat(ctx, 2)
	if err != nil {
		return err
	}
	defer func() {
		watch.stop()
		res.restarts += watch.restarts
	}()
	for _, n := range names {
		watch.markSent(n, time.Now())
	}
	if err := side.restartReconciler(ctx); err != nil {
		return err
	}
	// The window opens at the first object seen at its new generation.
	var cpu0 cpuSample
	for restarted := time.Now(); ; {
		if t, _ := watch.readyTimes(names); len(t) > 0 {
			cpu0 = env.sampleCPU()
			break
		}
		if err := watch.failed(); err != nil {
			return err
		}
		if err := env.checkAlive(); err != nil {
			return err
		}
		if time.Since(restarted) > reconcileStall {
			return fmt.Errorf("no object seen at its new generation within %s of starting the reconciler again", reconcileStall)
		}
		if err := sleepUntil(ctx, time.Now().Add(10*time.Millisecond)); err != nil {
			return err
		}
	}
	// The CPU window closes with the measured window, or when the backlog
	// has drained if that comes first (the idle time after it would count).
	var cpu1 cpuSample
	sampled, drained := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		timer := time.NewTimer(time.Until(cpu0.at.Add(sz.satMeasure)))
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-drained:
		}
		cpu1 = env.sampleCPU()
	}()
	err = watch.waitReady(ctx, env, names)
	close(drained)
	<-sampled
	if err != nil {
		return err
	}
	if counting {
		d1, err := dc.countDispatches(ctx)
		if err != nil {
			return err
		}
		res.dispatched, res.counted = d1.since(d0), true
		fmt.Printf("  dispatched from the spec changes to the drained backlog: %s\n", res.dispatched)
	}
	times, _ := watch.readyTimes(names)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	first, last := times[0], times[len(times)-1]
	end := first.Add(sz.satMeasure)
	if last.Before(end) {
		res.satShort, end = true, last
	}
	res.satWindow = end.Sub(first)
	inWindow, inCPU := 0, 0
	for _, t := range times {
		if !t.After(end) {
			inWindow++
		}
		if !t.Before(cpu0.at) && !t.After(cpu1.at) {
			inCPU++
		}
	}
	if res.satWindow > 0 {
		res.satRate = float64(inWindow) / res.satWindow.Seconds()
	}
	if cpu1.at.IsZero() {
		return ctx.Err()
	}
	if inCPU > 0 {
		res.storeCPU = (cpu1.used[side.store()] - cpu0.used[side.store()]) / time.Duration(inCPU)
		res.allCPU = cpu1.spent(cpu0, "bench") / time.Duration(inCPU)
	}
	res.satCPULine = cpu1.cores(cpu0)
	res.disturbed = max(res.disturbed, cpu1.other(cpu0))
	return nil
}

// printPeerTable prints every side's settings, then the figures side by
// side with the ratio of no8s (the mean of its two runs) to Kubernetes.
func printPeerTable(env *benchEnv, rs []peerResult, sz peerSizes) {
	fmt.Println("\nsettings:")
	for _, r := range rs {
		fmt.Printf("  %s (took %s):\n", r.label, r.took.Round(time.Second))
		for _, s := range r.settings {
			fmt.Printf("    %s\n", s)
		}
	}
	var k8s peerResult
	var ours []peerResult
	for _, r := range rs {
		if r.label == "no8s" {
			ours = append(ours, r)
		} else {
			k8s = r
		}
	}
	tw := newTable()
	fmt.Fprintf(tw, "\n  figure\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t", r.label)
	}
	fmt.Fprintf(tw, "no8s / Kubernetes\t\n")
	mean := func(f func(r peerResult) float64) float64 {
		var sum float64
		for _, r := range ours {
			sum += f(r)
		}
		return sum / float64(len(ours))
	}
	row := func(name string, f func(r peerResult) float64, format func(float64) string) {
		fmt.Fprintf(tw, "  %s\t", name)
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t", format(f(r)))
		}
		m := mean(f)
		ratio := "-"
		if k := f(k8s); k > 0 {
			ratio = fmt.Sprintf("%.2f×", m/k)
		}
		fmt.Fprintf(tw, "%s\t\n", ratio)
		if !*peerSmokeFlag {
			env.figure(name+", no8s", m)
			env.figure(name+", Kubernetes", f(k8s))
		}
	}
	perSec := func(v float64) string { return fmt.Sprintf("%.0f/s", v) }
	msf := func(v float64) string { return fmtDur(time.Duration(v * float64(time.Millisecond))) }
	for _, c := range apiConcurrencies {
		row(fmt.Sprintf("creates/s at c=%d", c), func(r peerResult) float64 { return r.creates[c].rate() }, perSec)
		row(fmt.Sprintf("create p99 at c=%d", c), func(r peerResult) float64 { return ms(r.creates[c].percentile(99)) }, msf)
	}
	row(fmt.Sprintf("LIST %d in pages of 1,000", sz.list), func(r peerResult) float64 { return ms(r.list) }, msf)
	for i, rate := range sz.rates {
		row(fmt.Sprintf("create→Ready p50 at %d/s", rate), func(r peerResult) float64 { return ms(percentile(r.rates[i].lat, 50)) }, msf)
		row(fmt.Sprintf("create→Ready p99 at %d/s", rate), func(r peerResult) float64 { return ms(percentile(r.rates[i].lat, 99)) }, msf)
	}
	row(fmt.Sprintf("highest rate kept up (p99 < %s)", peerKeptUp), keptUp, perSec)
	row("reconciles/s at saturation", func(r peerResult) float64 { return r.satRate }, perSec)
	row("store CPU per reconcile (postgres | etcd)", func(r peerResult) float64 { return ms(r.storeCPU) }, msf)
	row("CPU of every process per reconcile", func(r peerResult) float64 { return ms(r.allCPU) }, msf)
	row("RSS of every process", totalRSS, func(v float64) string { return fmtMiB(int64(v)) })
	tw.Flush()
	if !*peerSmokeFlag && len(ours) > 0 && k8s.label != "" {
		printTargets(peerTargets(k8s, ours, sz, mean)...)
	}

	fmt.Println("\ndetails:")
	disturbed := 0.0
	for _, r := range rs {
		fmt.Printf("  %s:\n", r.label)
		for _, l := range r.createsLine {
			fmt.Printf("    CPU, %s\n", l)
		}
		for _, x := range r.rates {
			fmt.Printf("    %d/s: answered %.0f/s, counted %d, late %d, errors %d, p50 %s p99 %s max %s; CPU %s\n", x.rate, x.answered, x.counted, x.late, x.errs,
				fmtDur(percentile(x.lat, 50)), fmtDur(percentile(x.lat, 99)), fmtDur(percentile(x.lat, 100)), x.cpu)
		}
		short := ""
		if r.satShort {
			short = " (the backlog drained before the window ended)"
		}
		fmt.Printf("    saturation: %.0f/s over %s%s; CPU %s\n", r.satRate, r.satWindow.Round(100*time.Millisecond), short, r.satCPULine)
		var parts []string
		for _, m := range r.mem {
			parts = append(parts, fmt.Sprintf("%s %s", m.name, fmtMiB(m.rss)))
		}
		fmt.Printf("    RSS: %s\n", strings.Join(parts, ", "))
		if r.restarts > 0 {
			fmt.Printf("    the server ended a watch %d times: opened again from the last version seen (after a list when it was too old)\n", r.restarts)
		}
		disturbed = max(disturbed, r.disturbed)
	}
	printPeerReference(k8s, ours)
	if disturbed > 0.3 {
		fmt.Printf("\nNOTE: other processes on this machine used up to %.2f cores during a measurement: the figures are pessimistic; rerun on a quiet machine.\n", disturbed)
	}
}

// keptUp is the highest offered rate a side kept up with: no failed create
// and a create→Ready p99 under peerKeptUp.
func keptUp(r peerResult) float64 {
	best := 0
	for _, x := range r.rates {
		if x.errs == 0 && len(x.lat) > 0 && percentile(x.lat, 99) < peerKeptUp {
			best = max(best, x.rate)
		}
	}
	return float64(best)
}

// totalRSS is the RSS of every process of a side, in bytes.
func totalRSS(r peerResult) float64 {
	var t int64
	for _, m := range r.mem {
		t += m.rss
	}
	return float64(t)
}

// Today's PostgreSQL CPU per reconcile at saturation when the targets were
// set (2026-11-27, this kind of machine): the target is half of it.
const peerPGCPUBefore = 2300 * time.Microsecond

// peerTargets are the reconcile loop's targets against the peer, each on
// the ratio of no8s (mean, the mean of its runs) to Kubernetes, as the
// table prints it.
func peerTargets(k8s peerResult, ours []peerResult, sz peerSizes, mean func(func(peerResult) float64) float64) []targetResult {
	ratio := func(f func(peerResult) float64) float64 {
		if k := f(k8s); k > 0 {
			return mean(f) / k
		}
		return 0
	}
	var ts []targetResult
	at := func(name string, f func(peerResult) float64, ok func(float64) bool, want string) {
		r := ratio(f)
		ts = append(ts, targetResult{name: name, ok: r > 0 && ok(r), detail: fmt.Sprintf("%.2f× (target %s)", r, want)})
	}
	atMost := func(limit float64) func(float64) bool { return func(r float64) bool { return r <= limit } }
	atLeast := func(limit float64) func(float64) bool { return func(r float64) bool { return r >= limit } }
	if i := slices.Index(sz.rates, 100); i >= 0 {
		at("create→Ready p50 at 100/s", func(r peerResult) float64 { return ms(percentile(r.rates[i].lat, 50)) }, atMost(1), "<= 1.00×")
		at("create→Ready p99 at 100/s", func(r peerResult) float64 { return ms(percentile(r.rates[i].lat, 99)) }, atMost(0.5), "<= 0.50×")
	}
	at("highest rate kept up", keptUp, atLeast(2), ">= 2.00×")
	at("reconciles/s at saturation", func(r peerResult) float64 { return r.satRate }, atLeast(2), ">= 2.00×")
	worst := dispatchCount{}
	for _, r := range ours {
		if r.counted && (worst.attempts == 0 || r.dispatched.perAttempt() > worst.perAttempt()) {
			worst = r.dispatched
		}
	}
	ts = append(ts, dispatchTarget(worst))
	pg := time.Duration(mean(func(r peerResult) float64 { return float64(r.storeCPU) }))
	ts = append(ts, targetResult{name: "PostgreSQL CPU per reconcile at saturation", ok: pg > 0 && pg <= peerPGCPUBefore/2,
		detail: fmt.Sprintf("%s (target <= %s, half of the %s measured when the targets were set)", fmtDur(pg), fmtDur(peerPGCPUBefore/2), fmtDur(peerPGCPUBefore))})
	at("creates/s at c=32", func(r peerResult) float64 { return r.creates[32].rate() }, atLeast(2.5), ">= 2.50×")
	at(fmt.Sprintf("LIST %d (time)", sz.list), func(r peerResult) float64 { return ms(r.list) }, atMost(1.0/3), "<= 0.33×: 3× faster")
	at("RSS of every process", totalRSS, atMost(1.0/8), "<= 0.125×")
	return ts
}

// ---- the no8s side ---------------------------------------------------------

// no8sPeerSide is the stack of benchEnv: separate services on PostgreSQL,
// the noop reconciler in two replicas.
type no8sPeerSide struct {
	env    *benchEnv
	satIDs []int64
	sched  int  // schedulers started, to name the next
	typed  bool // the types are made (startReconciler, the first phase)
}

func (s *no8sPeerSide) label() string { return "no8s" }

func (s *no8sPeerSide) countDispatches(ctx context.Context) (dispatchCount, error) {
	return s.env.countDispatches(ctx)
}
func (s *no8sPeerSide) store() string { return "postgres" }

func (s *no8sPeerSide) createAPI(ctx context.Context, name string) error {
	return apiCreate(ctx, s.env, "v1beta1", name)
}

// types creates the scenario's types once: DatabaseCluster v1beta1 (the
// creates), v1 (the list) and ReconcileBench/v1 (reconciled).
func (s *no8sPeerSide) types(ctx context.Context) error {
	if s.typed {
		return nil
	}
	s.typed = true
	for _, v := range []string{"v1", "v1beta1"} {
		if _, err := s.env.postJSON(ctx, "/api/v1/resource-types", map[string]any{
			"name": "DatabaseCluster", "version": v, "schema": json.RawMessage(databaseClusterSchema),
		}); err != nil {
			return err
		}
	}
	_, err := s.env.postJSON(ctx, "/api/v1/resource-types", map[string]any{
		"name": reconcileType, "version": reconcileVersion, "schema": json.RawMessage(databaseClusterSchema),
		"reconcile_policy": map[string]any{"resync_seconds": reconcileResync},
	})
	return err
}

// ceiling measures the PostgreSQL ceiling as the api scenario does and
// returns its rate at c=32.
func (s *no8sPeerSide) ceiling(ctx context.Context) (float64, error) {
	var lines []string
	var disturbed float64
	out, _, _, err := apiCeiling(ctx, s.env, &lines, &disturbed)
	if err != nil {
		return 0, err
	}
	return out[32].rate(), nil
}

func (s *no8sPeerSide) createList(ctx context.Context, name string) error {
	return apiCreate(ctx, s.env, "v1", name)
}

func (s *no8sPeerSide) listAll(ctx context.Context) (int, int, error) {
	return s.env.listAll(ctx, "/api/v1/resources?resource_type=DatabaseCluster&resource_type_version=v1")
}

func (s *no8sPeerSide) startReconciler(ctx context.Context) error {
	if err := s.types(ctx); err != nil {
		return err
	}
	if err := s.restartReconciler(ctx); err != nil {
		return err
	}
	return s.env.startNoopReplicas(ctx, reconcileReconciler, []string{reconcileType + "/" + reconcileVersion}, []string{"a", "b"}, reconcileWorkerFlags()...)
}

// create sends one create of ReconcileBench and returns its id.
func (s *no8sPeerSide) create(ctx context.Context, name string) (int64, error) {
	status, _, body, err := s.env.do(ctx, http.MethodPost, "/api/v1/resources", createBody(reconcileType, reconcileVersion, name))
	if err != nil {
		return 0, err
	}
	if status != http.StatusCreated {
		return 0, fmt.Errorf("create %s: %d %s", name, status, truncateBytes(body, 300))
	}
	return jsonID(body)
}

func (s *no8sPeerSide) createReady(ctx context.Context, name string) error {
	_, err := s.create(ctx, name)
	return err
}

func (s *no8sPeerSide) watchReady(ctx context.Context) (*readyWatch, error) {
	return startReadyWatch(ctx, s.env)
}

func (s *no8sPeerSide) prepareSat(_ context.Context, n int) error {
	s.satIDs = make([]int64, n)
	return nil
}

func (s *no8sPeerSide) satCreate(ctx context.Context, seq int, name string) error {
	id, err := s.create(ctx, name)
	s.satIDs[seq] = id
	return err
}

func (s *no8sPeerSide) satPatch(ctx context.Context, seq int, _ string) error {
	return mergePatch(ctx, s.env, s.satIDs[seq], reconcilePatch)
}

func (s *no8sPeerSide) watchSat(ctx context.Context, minGen int64) (*readyWatch, error) {
	w, err := startReadyWatch(ctx, s.env)
	if w != nil {
		w.minGen = minGen
	}
	return w, err
}

func (s *no8sPeerSide) stopReconciler(context.Context) error {
	for _, p := range s.env.procs {
		if p.name == "scheduler" {
			s.env.stopProc(p)
			return nil
		}
	}
	return fmt.Errorf("no scheduler running")
}

func (s *no8sPeerSide) restartReconciler(ctx context.Context) error {
	s.sched++
	_, err := s.env.startScheduler(ctx, fmt.Sprintf("bench-scheduler-%d", s.sched), reconcileSchedulerFlags()...)
	return err
}

func (s *no8sPeerSide) settings(ctx context.Context) []string {
	var out []string
	var syncCommit, fsync, buffers, autovacuum string
	if s.env.pool != nil && s.env.pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('fsync'), current_setting('shared_buffers'), current_setting('autovacuum')`).Scan(&syncCommit, &fsync, &buffers, &autovacuum) == nil {
		line := fmt.Sprintf("PostgreSQL: synchronous_commit %s, fsync %s, shared_buffers %s, autovacuum %s", syncCommit, fsync, buffers, autovacuum)
		if autovacuum != "on" {
			// Nothing the run writes is vacuumed or analysed: dead row
			// versions pile up and plans made on small tables stay.
			line += " (as no production server runs: nothing is vacuumed or analysed during the run)"
		}
		out = append(out, line)
	}
	for _, p := range s.env.procs {
		line := p.name + ": " + strings.Join(p.cmd.Args, " ")
		for _, kv := range p.cmd.Env {
			if strings.HasPrefix(kv, "NO8S_") {
				line += " (env " + kv + ")"
			}
		}
		out = append(out, line)
	}
	over := "plain HTTP (-gateway-tls not given)"
	if s.env.roots != nil {
		over = "TLS"
	}
	return append(out, "load generator: this process, HTTP/1.1 keep-alive over "+over+", the bootstrap token (the administrator); tracing off")
}

// ---- the Kubernetes side -----------------------------------------------------

// k8sPeerSide is the Kubernetes peer.
type k8sPeerSide struct {
	p *k8sPeer
}

func (s *k8sPeerSide) label() string { return "Kubernetes" }
func (s *k8sPeerSide) store() string { return "etcd" }

func (s *k8sPeerSide) createAPI(ctx context.Context, name string) error {
	return s.p.create(ctx, "api", peerAPIKind, peerAPIPlural, name)
}

func (s *k8sPeerSide) createList(ctx context.Context, name string) error {
	return s.p.create(ctx, "list", peerAPIKind, peerAPIPlural, name)
}

func (s *k8sPeerSide) listAll(ctx context.Context) (int, int, error) {
	return s.p.listAll(ctx, "list", peerAPIPlural)
}

func (s *k8sPeerSide) startReconciler(ctx context.Context) error {
	return s.p.startController(ctx, "ready")
}

func (s *k8sPeerSide) createReady(ctx context.Context, name string) error {
	return s.p.create(ctx, "ready", peerReadyKind, peerReadyPlural, name)
}

func (s *k8sPeerSide) watchReady(ctx context.Context) (*readyWatch, error) {
	return s.p.startWatch(ctx, "ready", peerReadyPlural, 1)
}

// prepareSat moves the controller to the namespace sat: a controller-runtime
// controller reconciles every object it lists when it starts, dirty or
// not, where no8s's scheduler dispatches only the dirty ones; so that both
// reconcile the same objects after the restart, the peer's lists only them.
func (s *k8sPeerSide) prepareSat(ctx context.Context, _ int) error {
	s.p.stopController()
	return s.p.startController(ctx, "sat")
}

func (s *k8sPeerSide) satCreate(ctx context.Context, _ int, name string) error {
	return s.p.create(ctx, "sat", peerReadyKind, peerReadyPlural, name)
}

func (s *k8sPeerSide) satPatch(ctx context.Context, _ int, name string) error {
	return s.p.patch(ctx, "sat", peerReadyPlural, name)
}

func (s *k8sPeerSide) watchSat(ctx context.Context, minGen int64) (*readyWatch, error) {
	return s.p.startWatch(ctx, "sat", peerReadyPlural, minGen)
}

func (s *k8sPeerSide) stopReconciler(context.Context) error {
	s.p.stopController()
	return nil
}

func (s *k8sPeerSide) restartReconciler(ctx context.Context) error {
	return s.p.startController(ctx, "sat")
}

func (s *k8sPeerSide) settings(context.Context) []string {
	return append(append([]string{}, s.p.settings...), "noop-controller "+strings.Join(s.p.ctrlArgs, " "),
		"load generator: this process, HTTP/1.1 keep-alive over TLS, bearer token (system:masters); API Priority and Fairness and in-flight limits at their defaults; etcd at its defaults (fsync on)")
}

// readyTimes returns when each of names was first seen ready, and how many
// were not.
func (w *readyWatch) readyTimes(names []string) ([]time.Time, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]time.Time, 0, len(names))
	for _, n := range names {
		if t, ok := w.ready[n]; ok {
			out = append(out, t)
		}
	}
	return out, len(names) - len(out)
}

// The peer's figures measured on 2026-11-27 on a machine of this kind, and
// the PostgreSQL ceiling of the machine the older constant came from: what
// a run's own peer is compared with, scaled by the machines' speeds.
const (
	refPeerCreatesC32    = 286.0                 // creates/s at c=32, 2026-11-27
	refPeerReadyP50      = 17 * time.Millisecond // create→Ready p50 at 100/s, 2026-11-27
	refOldConstantLow    = 1040.0                // creates/s at c=32, the old constant (another machine)
	refOldConstantHigh   = 1125.0
	refOldMachineCeiling = 8372.0 // PostgreSQL ceiling at c=32 of that machine
)

// printPeerReference prints the peer's c=32 creates/s and its create→Ready
// p50 at 100/s beside the reference figures, and the machine's scale: this
// run's PostgreSQL ceiling against the old machine's.
func printPeerReference(k8s peerResult, ours []peerResult) {
	var ceil float64
	for _, r := range ours {
		ceil += r.ceiling / float64(len(ours))
	}
	fmt.Println("\nthe peer against the reference figures:")
	c32 := k8s.creates[32].rate()
	fmt.Printf("  creates/s at c=32: %.0f/s here; %.0f/s on 2026-11-27 (%+.0f%%); %.0f-%.0f/s in the old constant (%+.0f%% of its middle)\n",
		c32, refPeerCreatesC32, 100*(c32/refPeerCreatesC32-1), refOldConstantLow, refOldConstantHigh, 100*(c32/((refOldConstantLow+refOldConstantHigh)/2)-1))
	for _, r := range k8s.rates {
		if r.rate == 100 {
			p50 := percentile(r.lat, 50)
			fmt.Printf("  create→Ready p50 at 100/s: %s here; %s on 2026-11-27\n", fmtDur(p50), fmtDur(refPeerReadyP50))
		}
	}
	if ceil > 0 {
		fmt.Printf("  the machine: PostgreSQL ceiling at c=32 %.0f/s in this run, %.0f/s on the old constant's machine: scale %.2f (the old constant scaled: %.0f-%.0f/s)\n",
			ceil, refOldMachineCeiling, ceil/refOldMachineCeiling, refOldConstantLow*ceil/refOldMachineCeiling, refOldConstantHigh*ceil/refOldMachineCeiling)
	}
}
