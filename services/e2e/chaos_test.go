package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/store/outbox/outboxtest"
)

// TestChaosKill9 is issue 8's chaos run: writes (creates and patches) are
// offered at a fixed rate while, round after round, the store, admission,
// the gateway, the scheduler, the reconciler and nats-server are each killed
// with SIGKILL at a random moment and restarted (one at a time, in random
// order). Afterwards every acknowledged write is present, every resource is
// ready at its latest generation, the stream equals the outbox, and no two
// attempts on one resource overlap in history.
//
// make test runs one round; make stress (NO8S_STRESS=1) runs three.
func TestChaosKill9(t *testing.T) {
	rounds := rounds(1, 3)
	const rate = 250 // writes offered per second
	c := newCluster(t)
	storeAddr := freeAddr(t)
	c.startStore(storeAddr)
	admAddr := freeAddr(t)
	// Its probes on a free port too: the default one (7102) may be taken on a
	// shared machine.
	admHealth := c.healthAddr("admission-chaos")
	startAdmission := func() *proc {
		p := start(t, "admission", filepath.Join(binDir, "no8s-admission"), append([]string{"--listen", admAddr, "--store-addr", storeAddr, "--nats-url", c.natsURL,
			"--health-listen", admHealth}, c.identityArgs(identity.Admission)...))
		waitTCP(t, admAddr, p)
		return p
	}
	gwAddr := freeAddr(t)
	base := "http://" + gwAddr
	procs := map[string]*proc{"admission": startAdmission()}
	procs["gateway"] = c.startGatewayAt(gwAddr, storeAddr, admAddr)
	procs["store"] = c.stores[0]
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Chaos", "version": "v1",
		"schema":           map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}},
		"reconcile_policy": map[string]any{"backoff_base_seconds": 1, "backoff_max_seconds": 2}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	procs["scheduler"] = c.startScheduler(storeAddr, "sched", 0)
	procs["reconciler"] = c.startReconciler(storeAddr, "Chaos/v1")
	procs["nats"] = c.nats
	restart := map[string]func() *proc{
		"store":      func() *proc { return c.startStore(storeAddr) },
		"admission":  startAdmission,
		"gateway":    func() *proc { return c.startGatewayAt(gwAddr, storeAddr, admAddr) },
		"scheduler":  func() *proc { return c.startScheduler(storeAddr, "sched", 0) },
		"reconciler": func() *proc { return c.startReconciler(storeAddr, "Chaos/v1") },
		"nats":       func() *proc { c.startNATS(); return c.nats },
	}

	load := newChaosLoad(base)
	ctx, stopLoad := context.WithCancel(t.Context())
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); load.run(ctx, rate) }()

	began := time.Now()
	kills := 0
	for round := range rounds {
		order := []string{"store", "admission", "gateway", "scheduler", "reconciler", "nats"}
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, name := range order {
			time.Sleep(time.Duration(300+rand.IntN(1200)) * time.Millisecond)
			procs[name].kill9()
			kills++
			time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
			downAt := time.Now()
			procs[name] = restart[name]()
			t.Logf("round %d: killed and restarted %-10s (back in %s)", round+1, name, time.Since(downAt).Round(time.Millisecond))
		}
	}
	time.Sleep(2 * time.Second) // load on the healed system too
	stopLoad()
	<-loadDone
	loadTime := time.Since(began)

	// Every resource converges: ready at its latest generation.
	settleStart := time.Now()
	waitFor(t, 120*time.Second, "every resource ready at its latest generation", func() error {
		n := c.count(`SELECT count(*) FROM resources WHERE status <> 'ready' OR observed_generation IS DISTINCT FROM generation`)
		if n > 0 {
			return fmt.Errorf("%d resources not ready at their latest generation", n)
		}
		return nil
	})
	converged := time.Since(settleStart)

	// Every acknowledged write is there.
	load.mu.Lock()
	defer load.mu.Unlock()
	for id, gen := range load.acked {
		var got int64
		if err := c.pool.QueryRow(t.Context(), `SELECT generation FROM resources WHERE id = $1`, id).Scan(&got); err != nil {
			t.Errorf("acknowledged resource %d: %v", id, err)
			continue
		}
		if got < gen {
			t.Errorf("resource %d: generation %d, but generation %d was acknowledged", id, got, gen)
		}
	}

	// The stream equals the outbox, each change once and in order.
	waitFor(t, 60*time.Second, "the relay to publish everything", func() error {
		var last, published int64
		if err := c.pool.QueryRow(t.Context(), `SELECT coalesce(pg_sequence_last_value('revision_seq'), 0), r.published_revision FROM relay_state r`).Scan(&last, &published); err != nil {
			return err
		}
		if published < last {
			return fmt.Errorf("published %d of %d", published, last)
		}
		return nil
	})
	js, _ := c.jetstream()
	stream, err := js.Stream(t.Context(), eventstream.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.CheckStreamMatchesOutbox(t, t.Context(), c.backend(), stream)
	attempts, _ := checkNoOverlap(t, c.pool)

	offered := load.offered.Load()
	var failures []string
	for k, v := range load.failures {
		failures = append(failures, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(failures)
	t.Logf("chaos: %d rounds, %d kill -9s in %s; offered %d writes (%.0f/s), acknowledged %d creates and %d patches (%.0f/s), refused or failed %d %v",
		rounds, kills, loadTime.Round(time.Millisecond), offered, float64(offered)/loadTime.Seconds(),
		load.creates, load.patches, float64(load.creates+load.patches)/loadTime.Seconds(), load.failed, failures)
	t.Logf("chaos: %d resources, %d outbox events, %d reconcile attempts; all ready %s after the load stopped",
		c.count(`SELECT count(*) FROM resources`), c.count(`SELECT count(*) FROM outbox`), attempts, converged.Round(time.Millisecond))
	if rate := float64(offered) / loadTime.Seconds(); rate < 200 {
		t.Errorf("offered %.0f writes/s, want at least 200", rate)
	}
}

// chaosLoad offers creates and patches at a fixed rate (open loop: a write
// that finds every worker busy is counted as offered and failed) and
// remembers what was acknowledged.
type chaosLoad struct {
	base    string
	client  *http.Client
	offered atomic.Int64

	mu       sync.Mutex
	acked    map[int64]int64 // resource id → newest acknowledged generation
	ids      []int64
	creates  int
	patches  int
	failed   int
	failures map[string]int
}

func newChaosLoad(base string) *chaosLoad {
	return &chaosLoad{base: base, acked: map[int64]int64{}, failures: map[string]int{},
		client: &http.Client{Timeout: 5 * time.Second, Transport: withAdminToken(&http.Transport{MaxIdleConnsPerHost: 64})}}
}

func (l *chaosLoad) run(ctx context.Context, rate int) {
	tokens := make(chan struct{}, 256)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			n := 0
			for range tokens {
				n++
				l.write(ctx, rng, fmt.Sprintf("c%02d-%d", w, n))
			}
		}()
	}
	// Open loop: rate × elapsed writes are offered whatever the answers
	// take; a late tick offers every write that fell due meanwhile.
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	start := time.Now()
	var due int64
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		for now := int64(time.Since(start).Seconds() * float64(rate)); due < now; due++ {
			l.offered.Add(1)
			select {
			case tokens <- struct{}{}:
			default:
				l.fail("overloaded")
			}
		}
	}
	close(tokens)
	wg.Wait()
}

func (l *chaosLoad) write(ctx context.Context, rng *rand.Rand, name string) {
	l.mu.Lock()
	var id int64
	if len(l.ids) > 0 && rng.IntN(2) == 0 {
		id = l.ids[rng.IntN(len(l.ids))]
	}
	l.mu.Unlock()
	var req *http.Request
	if id == 0 {
		body, _ := json.Marshal(map[string]any{"name": name, "resource_type_name": "Chaos", "resource_type_version": "v1", "spec": map[string]any{"n": 0}})
		req, _ = http.NewRequestWithContext(context.WithoutCancel(ctx), "POST", l.base+"/api/v1/resources", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		body, _ := json.Marshal(map[string]any{"spec": map[string]any{"n": rng.IntN(1 << 20)}})
		req, _ = http.NewRequestWithContext(context.WithoutCancel(ctx), "PATCH", fmt.Sprintf("%s/api/v1/resources/%d", l.base, id), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	resp, err := l.client.Do(req)
	if err != nil {
		l.fail(errClass(err))
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := http.StatusOK
	if id == 0 {
		want = http.StatusCreated
	}
	if resp.StatusCode != want {
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(b, &p)
		l.fail(fmt.Sprintf("%d %s", resp.StatusCode, p.Code))
		return
	}
	var r struct {
		ID         int64 `json:"id"`
		Generation int64 `json:"generation"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.ID == 0 {
		l.fail("unreadable answer")
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if id == 0 {
		l.creates++
		l.ids = append(l.ids, r.ID)
	} else {
		l.patches++
	}
	l.acked[r.ID] = max(l.acked[r.ID], r.Generation)
}

func (l *chaosLoad) fail(class string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed++
	l.failures[class]++
}

// errClass names a transport error briefly for the figures.
func errClass(err error) string {
	s := err.Error()
	for _, k := range []string{"connection refused", "connection reset", "timeout", "EOF"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	return "transport"
}
