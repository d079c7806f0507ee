package main

// bench_reconcile.go is issue 13's benchmark: the whole reconcile loop with
// every service as its own process, a scheduler and the noop reconciler in
// two replicas (leases and fencing as always).
//
//   - create→Ready latency at 100/s, 200/s and 400/s offered, open loop (a
//     ticker hands each create to an idle sender; nobody waits for answers
//     before sending the next): from sending the create request to the first
//     event of one SSE watch showing the resource ready.
//   - reconciles/s at saturation: N resources (20,000) created and ready;
//     the scheduler is stopped while each gets one spec change (merge patch),
//     so the whole backlog is there when it starts again (as a new leader:
//     it lists every resource and dispatches the dirty ones); reconciles/s
//     are history rows per second over a window of at least 30 s from the
//     first reconcile of the backlog.
//
// With CPU per process over each measured window, as the api scenario prints it.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk/worker"
	"github.com/no8s/no8s/services/scheduler"
)

var (
	reconcileDurationFlag  = flag.Duration("reconcile-duration", 30*time.Second, "reconcile scenario: measured time at each offered create rate, and the reconciles/s window")
	reconcileWarmupFlag    = flag.Duration("reconcile-warmup", 5*time.Second, "reconcile scenario: warm-up before measuring at each offered create rate")
	reconcileResourcesFlag = flag.Int("reconcile-resources", 20_000, "reconcile scenario: resources created, then changed once each, for reconciles/s at saturation")
	// Knobs to find what limits the figures; 0 leaves the services' defaults.
	reconcileDispatchersFlag = flag.Int("reconcile-dispatchers", 0, "reconcile scenario: the scheduler's --dispatchers (0: its default)")
	reconcileConcurrencyFlag = flag.Int("reconcile-concurrency", 0, "reconcile scenario: each noop replica's --concurrency (0: its default)")
)

// reconcileSchedulerFlags and reconcileWorkerFlags are the flags the
// knobs above add to the scheduler and to each noop replica.
func reconcileSchedulerFlags() []string {
	if n := *reconcileDispatchersFlag; n > 0 {
		return []string{"--dispatchers", strconv.Itoa(n)}
	}
	return nil
}

func reconcileWorkerFlags() []string {
	if n := *reconcileConcurrencyFlag; n > 0 {
		return []string{"--concurrency", strconv.Itoa(n)}
	}
	return nil
}

const (
	reconcileType       = "ReconcileBench"
	reconcileVersion    = "v1"
	reconcileReconciler = "bench-noop"                  // its two replicas are reconciler-a and reconciler-b
	reconcileSenders    = 512                           // goroutines sending creates, so the generator never waits for answers
	reconcileLate       = 10 * time.Millisecond         // a create sent this long after its due time counts as late
	reconcileStall      = 60 * time.Second              // saturation: fail after this long without progress
	reconcileResync     = 3600                          // the type's resync_seconds: nothing is resynced during the run
	reconcileTargetRate = 1000.0                        // noop reconciles/s sustained
	reconcilePatch      = `{"spec":{"storage_gb":501}}` // the saturation phase's spec change (500 before)
)

// reconcileRatesFlag are the offered create rates, per second.
var reconcileRatesFlag = flag.String("reconcile-rates", "100,200,400", "reconcile scenario: the offered create rates measured (\"\": none, saturation only)")

// offeredRates parses -reconcile-rates.
func offeredRates() ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(*reconcileRatesFlag, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-reconcile-rates: %q is not a positive rate", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// reconcileP99Targets are issue 13's create→Ready p99 targets by rate.
var reconcileP99Targets = map[int]time.Duration{200: 50 * time.Millisecond, 400: 100 * time.Millisecond}

// benchReconcile is the "reconcile" scenario.
func benchReconcile(ctx context.Context, env *benchEnv) error {
	if err := env.Fresh(ctx); err != nil {
		return err
	}
	warmup, measure, nSat := *reconcileWarmupFlag, *reconcileDurationFlag, *reconcileResourcesFlag
	if _, err := env.startScheduler(ctx, "bench-scheduler-1", reconcileSchedulerFlags()...); err != nil {
		return err
	}
	if err := startNoopBench(ctx, env); err != nil {
		return err
	}
	dispatchers := fmt.Sprintf("default %d", scheduler.DefaultConfig().Dispatchers)
	concurrency := fmt.Sprintf("default %d", worker.DefaultMaxConcurrency)
	if n := *reconcileDispatchersFlag; n > 0 {
		dispatchers = strconv.Itoa(n)
	}
	if n := *reconcileConcurrencyFlag; n > 0 {
		concurrency = strconv.Itoa(n)
	}
	fmt.Printf("stack: %s\n", describeServices(env))
	fmt.Printf("reconciler %s: noop, 2 replicas (reconciler-a, -b), worker concurrency %s each; scheduler dispatchers %s;\n"+
		"type %s/%s (DatabaseCluster schema, resync_seconds %d: no resync during the run); create body %d bytes\n",
		reconcileReconciler, concurrency, dispatchers, reconcileType, reconcileVersion, reconcileResync, len(createBody(reconcileType, reconcileVersion, "rc100-000000")))

	// One resource through the whole loop first: a smoke test, and the
	// event the watch's starting BOOKMARK needs (none on an empty stream).
	if _, err := env.postJSON(ctx, "/api/v1/resources", createBody(reconcileType, reconcileVersion, "first")); err != nil {
		return err
	}
	if err := waitCount(ctx, env, `SELECT count(*) FROM resources WHERE name = 'first' AND status = 'ready'`, 1, nil); err != nil {
		return fmt.Errorf("the first resource: %w", err)
	}

	// 1. create→Ready latency, one rate after the other, one watch.
	watch, err := startReadyWatch(ctx, env)
	if err != nil {
		return err
	}
	offered, err := offeredRates()
	if err != nil {
		watch.stop()
		return err
	}
	var rates []rateResult
	for _, rate := range offered {
		r, err := reconcileAtRate(ctx, env, watch, rate, warmup, measure)
		if err != nil {
			watch.stop()
			return fmt.Errorf("%d/s: %w", rate, err)
		}
		rates = append(rates, r)
	}
	watch.stop()
	fmt.Printf("\ncreate→Ready, open loop, %s warm-up then %s measured per rate; from sending the create to the first watch event showing it ready\n", warmup, measure)
	tw := newTable()
	fmt.Fprintf(tw, "  offered\tanswered/s\tcounted\tlate >%s\tworst lag\terrors\tp50\tp99\tmax\t\n", fmtDur(reconcileLate))
	for _, r := range rates {
		fmt.Fprintf(tw, "  %d/s\t%.0f\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t\n", r.rate, r.answered, r.counted, r.late, fmtDur(r.maxLag), r.errs,
			fmtDur(percentile(r.lat, 50)), fmtDur(percentile(r.lat, 99)), fmtDur(percentile(r.lat, 100)))
		env.figure(fmt.Sprintf("create→Ready p50 at %d/s, ms", r.rate), ms(percentile(r.lat, 50)))
		env.figure(fmt.Sprintf("create→Ready p99 at %d/s, ms", r.rate), ms(percentile(r.lat, 99)))
	}
	tw.Flush()
	fmt.Println("  (counted: creates due in the measured window; late: counted creates sent more than that after their due time;")
	fmt.Println("   every resource of a rate is seen ready before the next rate starts)")
	fmt.Println("where the time goes, p50 / p99 (this process's clocks and the database's, one machine):")
	tw = newTable()
	fmt.Fprintf(tw, "  offered\t")
	for _, n := range stageNames {
		fmt.Fprintf(tw, "%s\t", n)
	}
	fmt.Fprintf(tw, "\n")
	for _, r := range rates {
		fmt.Fprintf(tw, "  %d/s\t", r.rate)
		for _, st := range r.stages {
			fmt.Fprintf(tw, "%s / %s\t", fmtDur(percentile(st, 50)), fmtDur(percentile(st, 99)))
		}
		fmt.Fprintf(tw, "\n")
	}
	tw.Flush()
	fmt.Println("CPU used in the measured window, in cores:")
	tw = newTable()
	disturbed := 0.0
	for _, r := range rates {
		fmt.Fprintf(tw, "  %d/s\t%s\n", r.rate, r.cpu)
		disturbed = max(disturbed, r.other)
	}
	tw.Flush()

	// 2. reconciles/s at saturation.
	sat, err := reconcileSaturation(ctx, env, nSat, measure)
	if err != nil {
		return fmt.Errorf("saturation: %w", err)
	}
	disturbed = max(disturbed, sat.other)
	fmt.Println()
	if disturbed > 0.3 {
		fmt.Printf("NOTE: other processes on this machine used up to %.2f cores during a measurement: the figures are pessimistic; rerun on a quiet machine.\n\n", disturbed)
	}

	var targets []targetResult
	for _, r := range rates {
		want, ok := reconcileP99Targets[r.rate]
		if !ok {
			continue
		}
		p99 := percentile(r.lat, 99)
		detail := fmt.Sprintf("%s (target < %s)", fmtDur(p99), fmtDur(want))
		if r.errs > 0 {
			detail += fmt.Sprintf("; %d failed creates", r.errs)
		}
		targets = append(targets, targetResult{
			name:   fmt.Sprintf("create→Ready p99 at %d/s", r.rate),
			ok:     p99 < want && r.errs == 0,
			detail: detail,
		})
	}
	detail := fmt.Sprintf("%.0f/s over %s (target >= %.0f/s)", sat.rate(), sat.window.Round(100*time.Millisecond), reconcileTargetRate)
	if sat.short {
		detail += fmt.Sprintf("; the backlog drained before %s: raise -reconcile-resources", measure)
	}
	targets = append(targets, targetResult{
		name:   "noop reconciles/s at saturation",
		ok:     sat.rate() >= reconcileTargetRate && !sat.short,
		detail: detail,
	}, dispatchTarget(sat.dispatched))
	printTargets(targets...)
	return nil
}

// ---- create→Ready at an offered rate -------------------------------------

// rateResult is what reconcileAtRate measured.
type rateResult struct {
	rate     int
	counted  int           // creates due in the measured window
	answered float64       // counted creates answered 201, per second of the window
	late     int           // counted creates sent more than reconcileLate after their due time
	maxLag   time.Duration // the latest a counted create was sent after its due time
	errs     int           // failed creates, warm-up included
	lat      []time.Duration
	stages   [4][]time.Duration // the latency's parts (stageNames), for the counted resources seen ready
	cpu      string             // cores per process over the measured window
	other    float64            // cores the rest of the machine used meanwhile
}

// reconcileAtRate offers creates at rate per second for warmup + measure,
// open loop: a dispatcher hands each create at its due time to one of
// reconcileSenders goroutines, which records the send time in watch and
// sends it. Then it waits for the counted creates to become ready.
func reconcileAtRate(ctx context.Context, env *benchEnv, watch *readyWatch, rate int, warmup, measure time.Duration) (rateResult, error) {
	name := func(seq int) string { return fmt.Sprintf("rc%d-%06d", rate, seq) }
	res, want, err := offerRate(ctx, env, watch, rate, warmup, measure, name, func(ctx context.Context, n string) error {
		status, _, body, err := env.do(ctx, http.MethodPost, "/api/v1/resources", createBody(reconcileType, reconcileVersion, n))
		if err == nil && status != http.StatusCreated {
			err = fmt.Errorf("create %s: %d %s", n, status, truncateBytes(body, 300))
		}
		return err
	})
	if err != nil {
		return res, err
	}
	if err := res.readStages(ctx, env, watch, fmt.Sprintf("rc%d-%%", rate), want); err != nil {
		return res, err
	}
	return res, env.checkAlive()
}

// offerRate offers creates (create, of the objects name numbers) at rate
// per second for warmup + measure, open loop, as reconcileAtRate
// describes, and waits until watch has seen every created object ready. It
// returns the figures and the names of the counted objects created.
func offerRate(ctx context.Context, env *benchEnv, watch *readyWatch, rate int, warmup, measure time.Duration,
	name func(seq int) string, create func(ctx context.Context, name string) error) (rateResult, []string, error) {
	res := rateResult{rate: rate}
	period := time.Second / time.Duration(rate)
	total := int((warmup + measure) / period)
	type job struct {
		seq int
		due time.Time
	}
	jobs := make(chan job, total) // room for every create: the dispatcher never blocks
	start := time.Now().Add(100 * time.Millisecond)
	from, to := start.Add(warmup), start.Add(warmup+measure)
	counted := func(due time.Time) bool { return !due.Before(from) && due.Before(to) }
	created := make([]bool, total) // each index written by one sender, read after wg.Wait
	var (
		late, errs, maxLag atomic.Int64
		firstErr           atomic.Value
		wg                 sync.WaitGroup
	)
	for range reconcileSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				now := time.Now()
				if lag := now.Sub(j.due); counted(j.due) {
					if lag > reconcileLate {
						late.Add(1)
					}
					for {
						old := maxLag.Load()
						if int64(lag) <= old || maxLag.CompareAndSwap(old, int64(lag)) {
							break
						}
					}
				}
				n := name(j.seq)
				watch.markSent(n, now)
				if err := create(ctx, n); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				created[j.seq] = true
				watch.markAnswered(n, time.Now())
			}
		}()
	}
	var cpu0, cpu1 cpuSample
	cpuDone := make(chan struct{})
	go func() {
		defer close(cpuDone)
		if sleepUntil(ctx, from) != nil {
			return
		}
		cpu0 = env.sampleCPU()
		waitProfiles := env.startProfiles(ctx, fmt.Sprintf("reconcile-%d", rate), measure)
		defer waitProfiles()
		if sleepUntil(ctx, to) != nil {
			return
		}
		cpu1 = env.sampleCPU()
	}()
	for i := range total {
		due := start.Add(time.Duration(i) * period)
		if sleepUntil(ctx, due) != nil {
			break
		}
		jobs <- job{seq: i, due: due}
	}
	close(jobs)
	wg.Wait()
	<-cpuDone
	if err := ctx.Err(); err != nil {
		return res, nil, err
	}
	res.cpu, res.other = cpu1.cores(cpu0), cpu1.other(cpu0)
	res.late, res.maxLag, res.errs = int(late.Load()), time.Duration(maxLag.Load()), int(errs.Load())
	if res.errs > 0 {
		fmt.Printf("%d/s: %d creates failed, the first: %v\n", rate, res.errs, firstErr.Load())
	}

	// Wait until the watch has seen every resource of this rate ready, so
	// that the next rate starts with no backlog.
	var want, every []string
	answered := 0
	for i := range total {
		if created[i] {
			every = append(every, name(i))
		}
		if !counted(start.Add(time.Duration(i) * period)) {
			continue
		}
		res.counted++
		if created[i] {
			answered++
			want = append(want, name(i))
		}
	}
	res.answered = float64(answered) / measure.Seconds()
	if err := watch.waitReady(ctx, env, every); err != nil {
		return res, nil, err
	}
	env.markSpanWindow(fmt.Sprintf("%d/s", rate), from, to)
	res.lat, _ = watch.latencies(want)
	return res, want, nil
}

// stageNames name the parts of create→Ready, in order.
var stageNames = [4]string{
	"sent→answered",           // the create through gateway, admission and store
	"created→attempt started", // event to the scheduler, dispatch, a worker's fetch and lease
	"attempt",                 // the noop attempt and its completion (history started_at → reconcile_time)
	"reconciled→ready event",  // outbox, NATS, gateway, SSE to this process
}

// readStages splits the latency of the counted resources seen ready into
// stageNames, from this process's clocks (sent, answered, ready event) and
// the database's (created_at, the first successful attempt's started_at
// and reconcile_time), all of one machine.
func (r *rateResult) readStages(ctx context.Context, env *benchEnv, watch *readyWatch, like string, names []string) error {
	rows, err := env.pool.Query(ctx, `
		SELECT r.name, r.created_at, h.started_at, h.reconcile_time
		FROM resources r
		JOIN LATERAL (SELECT started_at, reconcile_time FROM reconciliation_history h
		              WHERE h.resource_id = r.id AND h.success ORDER BY h.id LIMIT 1) h ON true
		WHERE r.name LIKE $1 AND h.started_at IS NOT NULL`, like)
	if err != nil {
		return err
	}
	type dbTimes struct{ created, started, reconciled time.Time }
	db := map[string]dbTimes{}
	for rows.Next() {
		var name string
		var t dbTimes
		if err := rows.Scan(&name, &t.created, &t.started, &t.reconciled); err != nil {
			return err
		}
		db[name] = t
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range names {
		sent, answered, ready, ok := watch.times(n)
		t, inDB := db[n]
		if !ok || !inDB {
			continue
		}
		r.stages[0] = append(r.stages[0], answered.Sub(sent))
		r.stages[1] = append(r.stages[1], t.started.Sub(t.created))
		r.stages[2] = append(r.stages[2], t.reconciled.Sub(t.started))
		r.stages[3] = append(r.stages[3], ready.Sub(t.reconciled))
	}
	return nil
}

// sleepUntil sleeps until t or until ctx ends (then it returns its error).
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// readyWatch is one SSE watch on the benchmark's type that notes, for each
// resource whose create was sent (markSent), when the first event showing
// it ready arrived; and when the create was answered (markAnswered).
type readyWatch struct {
	minGen   int64 // the observed generation an object must reach to count as ready
	mu       sync.Mutex
	restarts int                  // times the watch was opened again after the server ended it
	sent     map[string]time.Time // by resource name
	answered map[string]time.Time // by resource name
	ready    map[string]time.Time // the first ready event, by resource name
	err      error                // why the watch ended early

	cancel context.CancelFunc
	done   chan struct{}
}

// startReadyWatch opens an SSE watch on the reconcile scenario's type and
// returns once it has started (its first BOOKMARK).
func startReadyWatch(ctx context.Context, env *benchEnv) (*readyWatch, error) {
	api, err := env.watchClient()
	if err != nil {
		return nil, err
	}
	return newReadyWatch(ctx, 1, func(ctx context.Context, w *readyWatch, started func()) error {
		return w.runSSE(ctx, api, client.ListOptions{TypeName: reconcileType}, started)
	})
}

// newReadyWatch starts source, which reads a watch and hands each event to
// w.seen, calling started once the watch is open, and returns once it has
// started. An object counts as ready when its Ready state is true at an
// observed generation of at least minGen.
func newReadyWatch(ctx context.Context, minGen int64, source func(ctx context.Context, w *readyWatch, started func()) error) (*readyWatch, error) {
	wctx, cancel := context.WithCancel(ctx)
	w := &readyWatch{minGen: minGen, sent: map[string]time.Time{}, answered: map[string]time.Time{}, ready: map[string]time.Time{}, cancel: cancel, done: make(chan struct{})}
	started := make(chan struct{})
	go func() {
		defer close(w.done)
		err := source(wctx, w, sync.OnceFunc(func() { close(started) }))
		if wctx.Err() == nil {
			if err == nil {
				err = errors.New("the watch ended")
			}
			w.mu.Lock()
			w.err = fmt.Errorf("watch: %w", err)
			w.mu.Unlock()
		}
	}()
	select {
	case <-started:
		return w, nil
	case <-w.done:
		return nil, w.failed()
	case <-time.After(30 * time.Second):
		w.stop()
		return nil, errors.New("the watch did not start within 30s")
	}
}

// seen notes an event of name: the first one showing it ready at minGen
// or later, of a name whose create was sent, is its ready time.
func (w *readyWatch) seen(name string, ready bool, observedGen int64, at time.Time) {
	if !ready || observedGen < w.minGen {
		return
	}
	w.mu.Lock()
	if _, sent := w.sent[name]; sent {
		if _, seen := w.ready[name]; !seen {
			w.ready[name] = at
		}
	}
	w.mu.Unlock()
}

// stop ends the watch and waits for it.
func (w *readyWatch) stop() {
	w.cancel()
	<-w.done
}

// failed returns why the watch ended early, or nil.
func (w *readyWatch) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// markSent notes when the create of name was sent.
func (w *readyWatch) markSent(name string, at time.Time) {
	w.mu.Lock()
	w.sent[name] = at
	w.mu.Unlock()
}

// markAnswered notes when the create of name was answered 201.
func (w *readyWatch) markAnswered(name string, at time.Time) {
	w.mu.Lock()
	w.answered[name] = at
	w.mu.Unlock()
}

// times returns when the create of name was sent and answered, and when
// its first ready event arrived; ok is false unless all three happened.
func (w *readyWatch) times(name string) (sent, answered, ready time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sent, ok1 := w.sent[name]
	answered, ok2 := w.answered[name]
	ready, ok3 := w.ready[name]
	return sent, answered, ready, ok1 && ok2 && ok3
}

// waitReady waits until every one of names has been seen ready. It polls
// the watch, not the database, so as not to load PostgreSQL while the
// last of them are still being reconciled; it fails after reconcileStall
// without progress.
func (w *readyWatch) waitReady(ctx context.Context, env *benchEnv, names []string) error {
	last, progress := -1, time.Now()
	for {
		if err := w.failed(); err != nil {
			return err
		}
		_, missing := w.latencies(names)
		if missing == 0 {
			return nil
		}
		if missing != last {
			last, progress = missing, time.Now()
		} else if time.Since(progress) > reconcileStall {
			return fmt.Errorf("%d of %d resources not seen ready, no progress for %s; in the store: %s",
				missing, len(names), reconcileStall, w.describeMissing(ctx, env, names, 10))
		}
		if err := env.checkAlive(); err != nil {
			return err
		}
		if err := sleepUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
			return err
		}
	}
}

// describeMissing says, for the first limit of names not seen ready, what
// the store holds of them: what a stall needs to be told apart (an event
// never published, a lost dispatch, a held lease), with the transaction ids
// of the resource's row and of its last event's outbox row.
func (w *readyWatch) describeMissing(ctx context.Context, env *benchEnv, names []string, limit int) string {
	w.mu.Lock()
	var missing []string
	for _, n := range names {
		if _, ok := w.ready[n]; !ok && len(missing) < limit {
			missing = append(missing, n)
		}
	}
	w.mu.Unlock()
	if env.pool == nil {
		return strings.Join(missing, ", ") + " (no store to look in)"
	}
	rows, err := env.pool.Query(ctx, `
		SELECT r.name, r.status, r.generation, r.observed_generation, r.resource_version,
		       r.lease_holder, r.lease_epoch, r.lease_expires_at, r.failures, r.dispatch_id,
		       (SELECT count(*) FROM reconciliation_history h WHERE h.resource_id = r.id),
		       EXISTS (SELECT 1 FROM outbox o WHERE o.revision = r.resource_version),
		       (SELECT coalesce(max(o.xmin::text), '') FROM outbox o WHERE o.revision = r.resource_version), r.xmin::text,
		       (SELECT published_revision FROM relay_state)
		FROM resources r WHERE r.name = ANY($1) ORDER BY r.name`, missing)
	if err != nil {
		return fmt.Sprintf("(read failed: %v)", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, status, holder, dispatch string
		var gen, observed, rv, epoch, failures, attempts, published int64
		var expires *time.Time
		var inOutbox bool
		var oxmin, rxmin string
		if err := rows.Scan(&name, &status, &gen, &observed, &rv, &holder, &epoch, &expires, &failures, &dispatch, &attempts, &inOutbox, &oxmin, &rxmin, &published); err != nil {
			return fmt.Sprintf("(read failed: %v)", err)
		}
		out = append(out, fmt.Sprintf("%s %s gen %d/%d rv %d (outbox row: %t xmin %s, resource xmin %s; relay at %d) lease %q epoch %d until %v failures %d dispatch %s attempts %d",
			name, status, observed, gen, rv, inOutbox, oxmin, rxmin, published, holder, epoch, expires, failures, dispatch, attempts))
	}
	if err := rows.Err(); err != nil {
		return fmt.Sprintf("(read failed: %v)", err)
	}
	return strings.Join(out, "; ")
}

// latencies returns, for the names that have been seen ready, the time from
// sending their create to the first ready event, and how many were not.
func (w *readyWatch) latencies(names []string) ([]time.Duration, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]time.Duration, 0, len(names))
	for _, n := range names {
		r, ok := w.ready[n]
		if !ok {
			continue
		}
		out = append(out, r.Sub(w.sent[n]))
	}
	return out, len(names) - len(out)
}

// runSSE reads a no8s event stream until ctx ends; started is called at
// its first BOOKMARK. Frames are read raw (client.Stream) and decoded only
// as far as the name, status and observed generation: the load generator
// stays cheap.
func (w *readyWatch) runSSE(ctx context.Context, api *client.Client, o client.ListOptions, started func()) error {
	st, err := api.OpenStream(ctx, o, client.FromNow)
	if err != nil {
		return err
	}
	defer st.Close()
	var ev struct {
		Name string `json:"resource_name"`
		Data struct {
			Status   string `json:"status"`
			Observed int64  `json:"observed_generation"`
		} `json:"resource_data"`
	}
	for {
		f, err := st.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		now := time.Now()
		switch f.Name {
		case client.EventBookmark:
			started()
			continue
		case client.EventError:
			return fmt.Errorf("ERROR event: %s", f.Data)
		}
		ev.Name, ev.Data.Status, ev.Data.Observed = "", "", 0
		if err := json.Unmarshal(f.Data, &ev); err != nil {
			return fmt.Errorf("event %s: %w", truncateBytes(f.Data, 200), err)
		}
		w.seen(ev.Name, ev.Data.Status == "ready", ev.Data.Observed, now)
	}
}

// ---- reconciles/s at saturation ------------------------------------------

// startNoopBench registers the scenario's type (the DatabaseCluster schema,
// no resync during a run) and starts the noop reconciler's two replicas
// for it: what reconcileSaturation measures.
func startNoopBench(ctx context.Context, env *benchEnv) error {
	if _, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{
		"name": reconcileType, "version": reconcileVersion, "description": "the reconcile scenario's type",
		"schema":           json.RawMessage(databaseClusterSchema),
		"reconcile_policy": map[string]any{"resync_seconds": reconcileResync},
	}); err != nil {
		return err
	}
	return env.startNoopReplicas(ctx, reconcileReconciler, []string{reconcileType + "/" + reconcileVersion}, []string{"a", "b"}, reconcileWorkerFlags()...)
}

// satResult is what reconcileSaturation measured.
type satResult struct {
	window time.Duration // from the backlog's first reconcile
	rows   int           // history rows with their reconcile_time in the window
	short  bool          // the backlog drained before the asked window ended
	other  float64       // cores the rest of the machine used in the window
	// dispatched is what the scheduler dispatched and the workers
	// attempted from its start to the drained backlog.
	dispatched dispatchCount
}

// rate is reconciles per second over the window.
func (s satResult) rate() float64 {
	if s.window <= 0 {
		return 0
	}
	return float64(s.rows) / s.window.Seconds()
}

// reconcileSaturation creates n resources at apiBulkConcurrency and waits
// until all are ready; stops the scheduler, changes each one's spec once
// (merge patch) and starts a new scheduler; then counts the history rows
// of the backlog over measure from its first reconcile, and waits until it
// has drained.
func reconcileSaturation(ctx context.Context, env *benchEnv, n int, measure time.Duration) (satResult, error) {
	var res satResult
	const sat = `name LIKE 'sat-%'`
	fmt.Printf("\nreconciles/s at saturation: %d resources\n", n)
	ids := make([]int64, n)
	t0 := time.Now()
	if _, err := runLoad(ctx, loadSpec{Concurrency: apiBulkConcurrency, Count: n}, true, func(ctx context.Context, seq int64) error {
		name := fmt.Sprintf("sat-%07d", seq)
		status, _, body, err := env.do(ctx, http.MethodPost, "/api/v1/resources", createBody(reconcileType, reconcileVersion, name))
		if err != nil {
			return err
		}
		if status != http.StatusCreated {
			return fmt.Errorf("create %s: %d %s", name, status, truncateBytes(body, 300))
		}
		ids[seq], err = jsonID(body)
		return err
	}); err != nil {
		return res, err
	}
	created := time.Since(t0)
	if err := waitCount(ctx, env, `SELECT count(*) FROM resources WHERE `+sat+` AND status = 'ready'`, n, nil); err != nil {
		return res, fmt.Errorf("waiting for the created resources to be ready: %w", err)
	}
	fmt.Printf("  created through the API at c=%d in %s (%.0f/s); all ready %s after the first create\n",
		apiBulkConcurrency, created.Round(100*time.Millisecond), float64(n)/created.Seconds(), time.Since(t0).Round(100*time.Millisecond))

	// The backlog: every resource changed once while no scheduler runs.
	for _, p := range env.procs {
		if p.name == "scheduler" {
			env.stopProc(p)
			break
		}
	}
	t0 = time.Now()
	if _, err := runLoad(ctx, loadSpec{Concurrency: apiBulkConcurrency, Count: n}, true, func(ctx context.Context, seq int64) error {
		return mergePatch(ctx, env, ids[seq], reconcilePatch)
	}); err != nil {
		return res, err
	}
	patched := time.Since(t0)
	var dirty int
	if err := env.pool.QueryRow(ctx, `SELECT count(*) FROM resources WHERE `+sat+` AND generation > observed_generation`).Scan(&dirty); err != nil {
		return res, err
	}
	if dirty != n {
		return res, fmt.Errorf("%d of %d resources dirty after the spec changes", dirty, n)
	}
	fmt.Printf("  scheduler stopped; one spec change each (merge patch) at c=%d in %s (%.0f/s): %d resources dirty\n",
		apiBulkConcurrency, patched.Round(100*time.Millisecond), float64(n)/patched.Seconds(), dirty)

	d0, err := env.countDispatches(ctx)
	if err != nil {
		return res, err
	}
	base := d0.attempts
	t0 = time.Now()
	if _, err := env.startScheduler(ctx, "bench-scheduler-2", reconcileSchedulerFlags()...); err != nil {
		return res, err
	}
	leading := time.Since(t0)
	var first time.Time
	for first.IsZero() {
		var t *time.Time
		if err := env.pool.QueryRow(ctx, `SELECT min(reconcile_time) FROM reconciliation_history WHERE id > $1`, base).Scan(&t); err != nil {
			return res, err
		}
		if t != nil {
			first = *t
			break
		}
		if time.Since(t0) > reconcileStall {
			return res, fmt.Errorf("no reconcile within %s of starting the scheduler", reconcileStall)
		}
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return res, err
		}
	}
	cpu0 := env.sampleCPU()
	commits0, err := env.commits(ctx)
	if err != nil {
		return res, err
	}
	waitProfiles := env.startProfiles(ctx, "reconcile-sat", measure)
	end := first.Add(measure)
	var cpu1 cpuSample
	sampled := false
	tick := func() {
		if !sampled && !time.Now().Before(end) {
			cpu1, sampled = env.sampleCPU(), true
		}
	}
	// Poll the history's primary key (cheap: the measurement should not
	// load PostgreSQL), then check every resource once.
	if err := waitCount(ctx, env, fmt.Sprintf(`SELECT count(*) FROM reconciliation_history WHERE id > %d`, base), n, tick); err != nil {
		return res, fmt.Errorf("waiting for the backlog to drain: %w", err)
	}
	if err := waitCount(ctx, env, `SELECT count(*) FROM resources WHERE `+sat+` AND generation = observed_generation AND status = 'ready'`, n, tick); err != nil {
		return res, fmt.Errorf("waiting for the backlog to drain: %w", err)
	}
	var last time.Time
	var total, failed int
	if err := env.pool.QueryRow(ctx, `SELECT max(reconcile_time), count(*), count(*) FILTER (WHERE NOT success) FROM reconciliation_history WHERE id > $1`, base).Scan(&last, &total, &failed); err != nil {
		return res, err
	}
	if !sampled {
		cpu1 = env.sampleCPU()
	}
	commits1, err := env.commits(ctx)
	if err != nil {
		return res, err
	}
	d1, err := env.countDispatches(ctx)
	if err != nil {
		return res, err
	}
	res.dispatched = d1.since(d0)
	waitProfiles()
	env.heapProfiles(ctx, "reconcile-sat-drained")
	if last.Before(end) {
		res.short = true
		end = last
	}
	res.window = end.Sub(first)
	if err := env.pool.QueryRow(ctx, `SELECT count(*) FROM reconciliation_history WHERE id > $1 AND reconcile_time >= $2 AND reconcile_time <= $3`, base, first, end).Scan(&res.rows); err != nil {
		return res, err
	}
	res.other = cpu1.other(cpu0)
	fmt.Printf("  scheduler started again: leading after %s, first reconcile of the backlog %s after its start\n",
		leading.Round(10*time.Millisecond), first.Sub(t0).Round(10*time.Millisecond))
	fmt.Printf("  %d history rows with reconcile_time in the %s from the first: %.0f reconciles/s\n", res.rows, res.window.Round(100*time.Millisecond), res.rate())
	env.figure("reconciles/s at saturation", res.rate())
	fmt.Printf("  backlog drained %s after the first reconcile: all %d ready at their new generation, %d history rows (%d failed attempts)\n",
		last.Sub(first).Round(100*time.Millisecond), n, total, failed)
	if res.short {
		fmt.Printf("  (the backlog drained before %s had passed: the window is shorter than asked)\n", measure)
	}
	if err := printSatStages(ctx, env, base, first, end); err != nil {
		return res, err
	}
	fmt.Printf("  dispatched from the scheduler's start to the drained backlog: %s\n", res.dispatched)
	env.figure("work items per attempt, saturation", res.dispatched.perAttempt())
	fmt.Printf("  PostgreSQL transactions committed per reconcile, drain included: %.2f (%d commits, %d reconciles)\n",
		float64(commits1-commits0)/float64(total), commits1-commits0, total)
	fmt.Printf("  CPU in the window, in cores: %s\n", cpu1.cores(cpu0))
	if err := printDrainedMemory(env); err != nil {
		return res, err
	}
	return res, env.checkAlive()
}

// printDrainedMemory prints the RSS of every process, nats-server
// included, once a saturation backlog has drained, and records the
// scheduler's, nats-server's and the total as figures: what an A/B of a
// memory change compares.
func printDrainedMemory(env *benchEnv) error {
	mem, err := env.procMemory(true)
	if err != nil {
		return err
	}
	var total int64
	var parts []string
	for _, m := range mem {
		total += m.rss
		parts = append(parts, fmt.Sprintf("%s %s (peak %s)", m.name, fmtMiB(m.rss), fmtMiB(m.peak)))
		if m.name == "scheduler" || m.name == "nats-server" {
			env.figure("RSS "+m.name+" MiB, drained", float64(m.rss)/(1<<20))
		}
	}
	env.figure("RSS every process MiB, drained", float64(total)/(1<<20))
	fmt.Printf("  RSS once drained: %s in all: %s\n", fmtMiB(total), strings.Join(parts, ", "))
	return nil
}

// waitCount polls query (a count) every 250 ms until it reaches want,
// calling tick before each poll; it fails after reconcileStall without
// progress.
func waitCount(ctx context.Context, env *benchEnv, query string, want int, tick func()) error {
	last, progress := -1, time.Now()
	for {
		if tick != nil {
			tick()
		}
		var got int
		if err := env.pool.QueryRow(ctx, query).Scan(&got); err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if got != last {
			last, progress = got, time.Now()
		} else if time.Since(progress) > reconcileStall {
			return fmt.Errorf("stuck at %d of %d for %s", got, want, reconcileStall)
		}
		if err := env.checkAlive(); err != nil {
			return err
		}
		if err := sleepUntil(ctx, time.Now().Add(250*time.Millisecond)); err != nil {
			return err
		}
	}
}

// mergePatch sends a JSON merge patch to one resource and expects 200.
func mergePatch(ctx context.Context, env *benchEnv, id int64, patch string) error {
	_, _, _, err := env.api.Raw(ctx, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", id), []byte(patch), "application/merge-patch+json")
	if err != nil {
		return fmt.Errorf("patch %d: %w", id, err)
	}
	return nil
}

// dispatchTarget is the target on dispatches: no more work items than
// attempts, from the scheduler's start to the drained backlog.
func dispatchTarget(c dispatchCount) targetResult {
	return targetResult{name: "dispatches per reconcile at saturation", ok: c.attempts > 0 && c.items <= uint64(c.attempts),
		detail: fmt.Sprintf("%s (target <= 1.00)", c)}
}

// printSatStages splits the backlog's reconciles in the window into the
// scheduler's part (how fast the backlog's resources were dispatched: the
// database's dispatched_at, the last dispatch of each, so a rate above
// reconciles/s is the queue growing, not more dispatches than reconciles)
// and the workers' (dispatched → lease acquired, the attempt), from the
// database's clocks.
func printSatStages(ctx context.Context, env *benchEnv, base int64, from, to time.Time) error {
	var dispatched int
	var waitP50, waitP99, attP50, attP99 float64
	err := env.pool.QueryRow(ctx, `
		SELECT count(*),
		       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM h.started_at - r.dispatched_at)), 0),
		       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM h.started_at - r.dispatched_at)), 0),
		       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM h.reconcile_time - h.started_at)), 0),
		       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM h.reconcile_time - h.started_at)), 0)
		FROM reconciliation_history h JOIN resources r ON r.id = h.resource_id
		WHERE h.id > $1 AND r.dispatched_at >= $2 AND r.dispatched_at <= $3`, base, from, to).Scan(&dispatched, &waitP50, &waitP99, &attP50, &attP99)
	if err != nil {
		return err
	}
	secs := func(f float64) string { return fmtDur(time.Duration(f * float64(time.Second))) }
	fmt.Printf("  in the window: the backlog's resources dispatched at %.0f/s (they queue for the workers); dispatched → lease acquired p50 %s, p99 %s; attempt (lease → completion) p50 %s, p99 %s\n",
		float64(dispatched)/to.Sub(from).Seconds(), secs(waitP50), secs(waitP99), secs(attP50), secs(attP99))
	return nil
}
