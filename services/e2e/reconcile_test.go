package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/worker"
)

// runWorker runs rec with the SDK's worker runtime in the test process,
// against the cluster's NATS and the worker address of the store process at
// storeAddr, until the test ends; it waits until the reconciler is
// registered. With identities on it holds the credentials of
// reconciler/<rec's name> claiming types.
func (c *cluster) runWorker(rec worker.Reconciler, storeAddr string, types ...sdk.TypeRef) *worker.Worker {
	c.t.Helper()
	_, nc := c.jetstream()
	claimed := make([]string, len(types))
	for i, t := range types {
		claimed[i] = t.String()
	}
	conn := c.dialStore(c.t, c.workerAddr(storeAddr), "--reconciler", rec.Name(), "--types", strings.Join(claimed, ","))
	w, err := worker.New(rec, worker.Config{Types: types, NATS: nc, Store: conn},
		worker.WithLease(3*time.Second), worker.WithShutdownGrace(time.Second, time.Second), worker.WithFetchWait(time.Second))
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			c.t.Errorf("worker %s: %v", rec.Name(), err)
		}
	}()
	c.t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(c.t, 10*time.Second, "worker "+rec.Name()+" ready", func() error {
		if !w.Ready() {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	return w
}

// tryDo is do for goroutines other than the test's own: it never fails the
// test; a transport error is status 0.
func tryDo(method, url string, body any) response {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return response{}
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		return response{}
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return response{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// historyEntry is one row of GET .../history.
type historyEntry struct {
	ID            int64     `json:"id"`
	Generation    int64     `json:"generation"`
	Success       bool      `json:"success"`
	ErrorMessage  *string   `json:"error_message"`
	StartedAt     time.Time `json:"started_at"`
	DurationMS    int64     `json:"duration_ms"`
	ReconcileTime time.Time `json:"reconcile_time"`
	LeaseEpoch    int64     `json:"lease_epoch"`
	Holder        string    `json:"holder"`
	Reason        string    `json:"reason"`
}

// history returns a resource's history, oldest first.
func history(t *testing.T, base string, id int64) []historyEntry {
	t.Helper()
	r := do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/history?limit=500", base, id), nil)
	if r.status != 200 {
		t.Fatalf("history of %d: %d %s", id, r.status, r.body)
	}
	var h []historyEntry
	if err := json.Unmarshal(r.body, &h); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(h)
	return h
}

// TestReconcileRetriesAndAnnotations: a reconciler (an SDK Func in this
// process, on the real worker runtime) against real processes. A failing
// one is retried with gaps that grow as the type's tiny backoff policy says
// (1 s doubling, capped at 4 s); a terminal error is not retried; an
// ignored resource gets no attempt; the reconcile annotation causes exactly
// one forced attempt and is removed.
func TestReconcileRetriesAndAnnotations(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Flaky", "version": "v1",
		"schema":           map[string]any{"type": "object", "properties": map[string]any{"mode": map[string]any{"type": "string"}}},
		"reconcile_policy": map[string]any{"backoff_base_seconds": 1, "backoff_max_seconds": 4}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	type spec struct {
		Mode string `json:"mode"`
	}
	var mu sync.Mutex
	forced := map[string]int{}
	attempts := map[string]int{}
	engine := sdk.New("flaky", sdk.Func[spec](func(ctx context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
		mu.Lock()
		attempts[req.Resource.Name]++
		if req.Force {
			forced[req.Resource.Name]++
		}
		mu.Unlock()
		switch {
		case req.Deleting():
			return sdk.Result{}, nil
		case req.Spec.Mode == "fail":
			return sdk.Result{}, fmt.Errorf("the backend said no")
		case req.Spec.Mode == "terminal":
			return sdk.Result{}, sdk.Terminalf("this spec can never work")
		}
		return sdk.Result{}, nil
	}))
	c.runWorker(engine, c.storeAddrs[0], sdk.Type("Flaky", "v1"))
	create := func(name, mode string, annotations map[string]string) int64 {
		t.Helper()
		r := do(t, "POST", base+"/api/v1/resources", map[string]any{"name": name, "resource_type_name": "Flaky", "resource_type_version": "v1",
			"spec": map[string]any{"mode": mode}, "annotations": annotations})
		if r.status != 201 {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
		return int64(r.json(t)["id"].(float64))
	}
	flaky := create("flaky", "fail", nil)
	doomed := create("doomed", "terminal", nil)
	ignored := create("ignored", "ok", map[string]string{"no8s.io/operation": "ignore"})
	fine := create("fine", "ok", nil)
	start := time.Now()

	// Retries: 1 s, 2 s, 4 s, 4 s apart (±10 % jitter).
	var h []historyEntry
	waitFor(t, 30*time.Second, "five failed attempts", func() error {
		if h = history(t, base, flaky); len(h) < 5 {
			return fmt.Errorf("%d attempts", len(h))
		}
		return nil
	})
	var gaps []time.Duration
	for i := 1; i < len(h); i++ {
		gaps = append(gaps, h[i].StartedAt.Sub(h[i-1].ReconcileTime))
		if h[i].Success || h[i].ErrorMessage == nil || !strings.Contains(*h[i].ErrorMessage, "the backend said no") || h[i].Reason != "retry" {
			t.Fatalf("attempt %d: %+v", i, h[i])
		}
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		if g := gaps[i]; g < want*85/100 || g > want*12/10+time.Second {
			t.Fatalf("gap %d is %s, want about %s (gaps %v)", i, g, want, gaps)
		}
	}
	t.Logf("gaps between failed attempts: %v", gaps)
	if r := getResource(t, base, flaky); r["status"] != "failed" || r["phase"] != "Progressing" || condition(r, "Ready")["reason"] != "ReconcileError" {
		t.Fatalf("failing resource: %s", brief(r))
	}

	// Terminal: one attempt, however long we wait.
	if hd := history(t, base, doomed); len(hd) != 1 || hd[0].Success {
		t.Fatalf("terminal error: %d attempts %+v", len(hd), hd)
	}
	if r := getResource(t, base, doomed); r["status"] != "failed" || condition(r, "Ready")["reason"] != "TerminalError" {
		t.Fatalf("terminal resource: %s", brief(r))
	}
	// Ignored: no attempt at all.
	mu.Lock()
	n := attempts["ignored"]
	mu.Unlock()
	if hi := history(t, base, ignored); len(hi) != 0 || n != 0 {
		t.Fatalf("ignored resource: %d history rows, %d attempts", len(hi), n)
	}
	if r := getResource(t, base, ignored); r["status"] != "pending" {
		t.Fatalf("ignored resource: %s", brief(r))
	}
	t.Logf("after %s: terminal 1 attempt, ignored 0", time.Since(start).Round(100*time.Millisecond))

	// The reconcile annotation: one forced attempt, then it is gone.
	waitResource(t, base, fine, "ready", func(r map[string]any) bool { return r["status"] == "ready" })
	before := len(history(t, base, fine))
	if r := do(t, "PATCH", fmt.Sprintf("%s/api/v1/resources/%d", base, fine), map[string]any{"annotations": map[string]any{"no8s.io/operation": "reconcile"}}); r.status != 200 {
		t.Fatalf("annotate: %d %s", r.status, r.body)
	}
	waitResource(t, base, fine, "annotation removed", func(r map[string]any) bool {
		_, ok := r["annotations"].(map[string]any)["no8s.io/operation"]
		return !ok
	})
	time.Sleep(time.Second) // no second attempt follows
	hf := history(t, base, fine)
	mu.Lock()
	f := forced["fine"]
	mu.Unlock()
	if len(hf) != before+1 || hf[len(hf)-1].Reason != "annotation" || f != 1 {
		t.Fatalf("reconcile annotation: %d attempts (reason %q), %d forced", len(hf)-before, hf[len(hf)-1].Reason, f)
	}
	// A spec change brings the terminal one back.
	if r := do(t, "PATCH", fmt.Sprintf("%s/api/v1/resources/%d", base, doomed), map[string]any{"spec": map[string]any{"mode": "ok"}}); r.status != 200 {
		t.Fatalf("fix spec: %d %s", r.status, r.body)
	}
	waitResource(t, base, doomed, "ready at generation 2", func(r map[string]any) bool {
		return r["status"] == "ready" && r["observed_generation"] == float64(2)
	})
}

// TestReconcileExclusion is HARD-PARTS 2 with real processes: two replicas
// of the noop reconciler (each attempt sleeps 1–20 ms; 2 % stall for 6 s,
// ignoring cancellation, past the 1 s timeout and the 3 s lease) and many
// triggers (manual and spec changes) on many resources, with the scheduler
// in the loop; one replica is killed with kill -9 midway and restarted.
// Afterwards every resource is ready at its latest generation, no two
// attempts on one resource overlap in history, lease epochs only grow, and
// the stalled attempts' late writes were refused for their stale epoch (one
// such refusal is provoked deterministically by a replica that always
// stalls).
func TestReconcileExclusion(t *testing.T) {
	resources, triggers := 100, 1000
	if stress() {
		resources, triggers = 300, 5000
	}
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Contended", "version": "v1",
		"schema":           map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}},
		"reconcile_policy": map[string]any{"timeout_seconds": 1, "backoff_base_seconds": 1, "backoff_max_seconds": 2}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	replica := func(name string) *proc {
		return c.startReconcilerArgs(name, c.storeAddrs[0], nil, "noop", "--types", "Contended/v1", "--lease", "3s",
			"--delay", "1ms-20ms", "--stall-fraction", "0.02", "--stall", "6s")
	}
	a, b := replica("a"), replica("b")

	ids := make([]int64, resources)
	for i := range resources {
		r := do(t, "POST", base+"/api/v1/resources", map[string]any{"name": fmt.Sprintf("r%03d", i), "resource_type_name": "Contended",
			"resource_type_version": "v1", "spec": map[string]any{"n": 0}})
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		ids[i] = int64(r.json(t)["id"].(float64))
	}
	// Every replica and the scheduler at work before the triggers start.
	waitFor(t, 30*time.Second, "first reconciles", func() error {
		if n := c.count(`SELECT count(*) FROM resources WHERE status <> 'ready'`); n > 0 {
			return fmt.Errorf("%d resources not ready", n)
		}
		return nil
	})
	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for sent.Add(1) <= int64(triggers) {
				id := ids[rng.IntN(len(ids))]
				var r response
				if rng.IntN(3) == 0 {
					r = tryDo("PATCH", fmt.Sprintf("%s/api/v1/resources/%d", base, id), map[string]any{"spec": map[string]any{"n": rng.IntN(1 << 20)}})
				} else {
					r = tryDo("POST", fmt.Sprintf("%s/api/v1/resources/%d/reconcile", base, id), nil)
				}
				if r.status != 200 && r.status != 202 {
					failed.Add(1)
				}
				time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond) // spread over seconds
			}
		}()
	}
	// kill -9 one replica mid-run; its items come back after the lease.
	time.Sleep(2 * time.Second)
	a.kill9()
	t.Log("replica a killed with kill -9")
	wg.Wait()
	a = replica("a2")
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d triggers failed", n, triggers)
	}
	t.Logf("%d triggers sent", triggers)

	waitFor(t, 90*time.Second, "every resource ready at its latest generation", func() error {
		var pending int
		err := c.pool.QueryRow(t.Context(), `SELECT count(*) FROM resources WHERE status <> 'ready' OR observed_generation <> generation
			OR reconcile_requested_at IS NOT NULL`).Scan(&pending)
		if err != nil {
			return err
		}
		if pending > 0 {
			return fmt.Errorf("%d resources not settled", pending)
		}
		return nil
	})
	// A stall that always meets a newer lease, so that a late write is
	// refused in every run, not only when a random stall happens to be
	// re-triggered: both replicas stop (their own stalled attempts die with
	// them); a replica whose every attempt stalls takes one resource; once
	// its lease has expired the resource is triggered again and leased anew;
	// the stalled attempt wakes and presents its old epoch.
	a.stop(syscall.SIGTERM, 10*time.Second)
	b.stop(syscall.SIGTERM, 10*time.Second)
	s := c.startReconcilerArgs("s", c.storeAddrs[0], nil, "noop", "--types", "Contended/v1", "--lease", "3s",
		"--delay", "1ms-2ms", "--stall-fraction", "1", "--stall", "6s")
	x := ids[0]
	trigger := func() { tryDo("POST", fmt.Sprintf("%s/api/v1/resources/%d/reconcile", base, x), nil) }
	trigger()
	// How soon s gets x does not matter to what is checked below (the
	// stalled attempt's late write refused); asked again every 2 s and
	// waited for past the scheduler's 30 s item check, since a trigger
	// that arrives while the replicas change hands was seen once in CI not
	// to reach s within 20 s (issue note: a dispatch to a fresh replica).
	var stalledEpoch int64
	asked := time.Now()
	waitFor(t, 45*time.Second, "the stalling replica to lease the resource", func() error {
		err := c.pool.QueryRow(t.Context(), `SELECT lease_epoch FROM resources WHERE id = $1 AND lease_holder LIKE '%/s'`, x).Scan(&stalledEpoch)
		if err != nil {
			if time.Since(asked) > 2*time.Second {
				trigger()
				asked = time.Now()
			}
			return fmt.Errorf("not leased by s yet: %w", err)
		}
		return nil
	})
	waitFor(t, 20*time.Second, "a newer lease after the stalled one expired", func() error {
		if c.count(`SELECT count(*) FROM resources WHERE id = $1 AND lease_epoch > $2`, x, stalledEpoch) > 0 {
			return nil
		}
		trigger()
		return fmt.Errorf("still at lease epoch %d", stalledEpoch)
	})
	waitFor(t, 20*time.Second, "the stalled attempt's late write to be refused", func() error {
		data, _ := os.ReadFile(s.log.Name())
		if strings.Contains(string(data), "saving the result failed") && strings.Contains(string(data), "stale_epoch") {
			return nil
		}
		return fmt.Errorf("no refused late write in s's log yet")
	})
	// Stop s before reading history: its later stalls must not land meanwhile.
	s.kill9()

	attempts, holders := checkNoOverlap(t, c.pool)
	// The stalled attempts' late writes: refused for their stale epoch.
	refused := 0
	for _, p := range []*proc{a, b, s} {
		data, _ := os.ReadFile(p.log.Name())
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "saving the result failed") && strings.Contains(line, "stale_epoch") {
				refused++
			}
		}
	}
	t.Logf("%d resources, %d triggers, %d attempts in history by %v, %d late writes refused for a stale epoch",
		resources, triggers, attempts, holders, refused)
	if refused == 0 {
		t.Errorf("no stalled attempt's late write was refused (%d attempts)", attempts)
	}
}

// checkNoOverlap reads the whole reconciliation history and fails the test
// when two attempts on one resource overlap in time or a later attempt holds
// a lease epoch that is not greater. It returns the number of attempts and
// how many each holder (worker replica) made.
func checkNoOverlap(t *testing.T, pool *pgxpool.Pool) (int, map[string]int) {
	t.Helper()
	attempts, holders := 0, map[string]int{}
	rows, err := pool.Query(t.Context(), `SELECT resource_id, started_at, duration_ms, lease_epoch, holder FROM reconciliation_history
		ORDER BY resource_id, started_at`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id, duration, epoch int64
		started             time.Time
		holder              string
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.id, &x.started, &x.duration, &x.epoch, &x.holder)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range all {
		attempts++
		if _, h, ok := strings.Cut(x.holder, "/"); ok {
			holders[h]++
		} else {
			holders[x.holder]++
		}
		if i == 0 || all[i-1].id != x.id {
			continue
		}
		prev := all[i-1]
		end := prev.started.Add(time.Duration(prev.duration) * time.Millisecond)
		if x.started.Before(end) {
			t.Errorf("resource %d: the attempt at epoch %d (%s) started %s before the one at epoch %d (%s) ended",
				x.id, x.epoch, x.holder, end.Sub(x.started), prev.epoch, prev.holder)
		}
		if x.epoch <= prev.epoch {
			t.Errorf("resource %d: epoch %d after %d", x.id, x.epoch, prev.epoch)
		}
	}
	return attempts, holders
}
