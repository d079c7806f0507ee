package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNATSRestartKeepStorage: nats-server is killed with SIGKILL under a
// create load and restarted with its storage directory. Every process's
// /readyz answers 503 naming nats within 5 s of the kill and 200 within 5 s
// of the restart; with nothing restarted by hand, creates succeed again and
// new resources reach ready within 10 s, every acknowledged create (201)
// ends ready, and a new watch hears of new changes.
func TestNATSRestartKeepStorage(t *testing.T) { testNATSRestart(t, false) }

// TestNATSRestartEmptyStorage is TestNATSRestartKeepStorage with a broker
// that comes back with an empty storage directory: every stream, consumer
// and bucket is gone and must be recreated by the services themselves
// (NO8S_EVENTS by the store's relay).
func TestNATSRestartEmptyStorage(t *testing.T) { testNATSRestart(t, true) }

// createLoad creates resources of one type through the gateway, 50 a second
// per worker, until stopped, and remembers every acknowledged one.
type createLoad struct {
	mu      sync.Mutex
	created map[int64]time.Time // resource id → when its 201 arrived
	codes   map[int]int         // status → count (0: transport error)
	stop    chan struct{}
	done    chan struct{}
}

func startCreateLoad(base, typeName string, workers int) *createLoad {
	l := &createLoad{created: map[int64]time.Time{}, codes: map[int]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			// Paced at 50 creates/s per worker: a load the reconciler keeps
			// up with on a busy machine, so that "ready within 10 s of the
			// restart" measures recovery, not the length of a backlog.
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				r := tryDo("POST", base+"/api/v1/resources", map[string]any{
					"name": fmt.Sprintf("w%d-r%d", w, i), "resource_type_name": typeName, "resource_type_version": "v1",
					"spec": map[string]any{"n": i},
				})
				var id int64
				if r.status == 201 {
					var doc struct {
						ID int64 `json:"id"`
					}
					if err := json.Unmarshal(r.body, &doc); err == nil {
						id = doc.ID
					}
				}
				l.mu.Lock()
				l.codes[r.status]++
				if id > 0 {
					l.created[id] = time.Now()
				}
				l.mu.Unlock()
				if r.status != 201 {
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(l.done)
	}()
	return l
}

func (l *createLoad) halt() {
	close(l.stop)
	<-l.done
}

// createdAfter returns the ids of resources acknowledged after at.
func (l *createLoad) createdAfter(at time.Time) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []int64
	for id, when := range l.created {
		if when.After(at) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (l *createLoad) snapshot() (ids []int64, codes map[int]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.created)), maps.Clone(l.codes)
}

// statuses returns the status of every resource of a type, by id.
func statuses(t *testing.T, base, typeName string) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	cont := ""
	for {
		url := base + "/api/v1/resources?resource_type=" + typeName + "&limit=1000"
		if cont != "" {
			url += "&continue=" + cont
		}
		r := tryDo("GET", url, nil)
		if r.status != 200 {
			return nil
		}
		var items []struct {
			ID     int64  `json:"id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(r.body, &items); err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, it := range items {
			out[it.ID] = it.Status
		}
		cont = r.header.Get("X-Continue-Token")
		if cont == "" {
			return out
		}
	}
}

// probesAnswer checks that every process's /readyz answers status and, for
// a 503, names failed among the failed dependencies.
func (c *cluster) probesAnswer(status int, failed string) func() error {
	return func() error {
		for name, url := range c.probes {
			r := tryDo("GET", url, nil)
			if r.status != status {
				return fmt.Errorf("%s: %d %s", name, r.status, r.body)
			}
			if status == 503 {
				var doc struct {
					Status string   `json:"status"`
					Failed []string `json:"failed"`
				}
				if err := json.Unmarshal(r.body, &doc); err != nil || doc.Status != "unavailable" || !slices.Contains(doc.Failed, failed) {
					return fmt.Errorf("%s: %d %s", name, r.status, r.body)
				}
			}
		}
		return nil
	}
}

func testNATSRestart(t *testing.T, emptyStorage bool) {
	c := newCluster(t)
	base := c.startAll()
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Load", "version": "v1",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startScheduler(c.storeAddrs[0], "sched-a", 0)
	c.startReconciler(c.storeAddrs[0], "Load/v1")

	load := startCreateLoad(base, "Load", 2)
	stopped := false
	defer func() {
		if !stopped {
			load.halt()
		}
	}()
	waitFor(t, 10*time.Second, "creates before the restart", func() error {
		if n := len(load.createdAfter(time.Time{})); n < 20 {
			return fmt.Errorf("%d created", n)
		}
		return nil
	})

	waitFor(t, 5*time.Second, "every process ready", c.probesAnswer(200, ""))
	t.Logf("probed: %v", slices.Sorted(maps.Keys(c.probes)))

	c.nats.kill9()
	t.Logf("nats-server killed (SIGKILL)")
	waitFor(t, 5*time.Second, "every process unready, naming nats", c.probesAnswer(503, "nats"))
	time.Sleep(time.Second)
	if emptyStorage {
		c.natsDir = t.TempDir()
	}
	c.startNATS()
	restarted := time.Now()
	t.Logf("nats-server restarted (empty storage: %v)", emptyStorage)
	waitFor(t, 5*time.Second, "every process ready again", c.probesAnswer(200, ""))
	t.Logf("every process ready %v after the restart", time.Since(restarted).Round(time.Millisecond))

	// Creates resume, and a resource created after the restart is
	// reconciled, within 10 s, with nothing restarted by hand.
	waitFor(t, 10*time.Second, "a resource created after the restart becomes ready", func() error {
		ids := load.createdAfter(restarted)
		if len(ids) == 0 {
			_, codes := load.snapshot()
			return fmt.Errorf("no create acknowledged since the restart (statuses so far %v)", codes)
		}
		st := statuses(t, base, "Load")
		for _, id := range ids {
			if st[id] == "ready" {
				return nil
			}
		}
		return fmt.Errorf("%d created since the restart, none ready yet", len(ids))
	})
	t.Logf("creates and reconciles resumed %v after the restart", time.Since(restarted).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	load.halt()
	stopped = true

	// No acknowledged write is lost: every 201 ends ready.
	ids, codes := load.snapshot()
	t.Logf("%d resources acknowledged; statuses %v", len(ids), codes)
	waitFor(t, 20*time.Second, "every acknowledged resource ready", func() error {
		st := statuses(t, base, "Load")
		var notReady []string
		for _, id := range ids {
			if st[id] != "ready" {
				notReady = append(notReady, fmt.Sprintf("%d:%s", id, st[id]))
			}
		}
		if len(notReady) > 0 {
			return fmt.Errorf("%d of %d not ready, e.g. %v", len(notReady), len(ids), notReady[:min(5, len(notReady))])
		}
		return nil
	})
	if r := do(t, "GET", base+"/api/v1/reconcilers", nil); r.status != 200 || len(r.list(t)) == 0 {
		t.Fatalf("reconcilers after the restart: %d %s", r.status, r.body)
	}

	// Watches work again: one opened now hears of a resource created after
	// it. (With an empty broker this needs the store's relay to recreate
	// NO8S_EVENTS and publish again.)
	attempt := 0
	waitFor(t, 10*time.Second, "a watch hears of a resource created after the restart", func() error {
		attempt++
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		w, _, err := dialWatch(ctx, base+"/api/v1/events?resource_type=Load", -1, false, 256)
		if err != nil {
			return err
		}
		defer w.close()
		name := fmt.Sprintf("watched-%d", attempt)
		if r := tryDo("POST", base+"/api/v1/resources", map[string]any{
			"name": name, "resource_type_name": "Load", "resource_type_version": "v1", "spec": map[string]any{"n": 0},
		}); r.status != 201 {
			return fmt.Errorf("create %s: %d %s", name, r.status, r.body)
		}
		for ev := range w.events {
			if ev.name == "CREATED" && strings.Contains(string(ev.data), `"resource_name":"`+name+`"`) {
				return nil
			}
		}
		return fmt.Errorf("no CREATED event for %s within 3 s (watch ended: %v)", name, w.err)
	})
}
