package e2e

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// TestSchedulerFailoverProcesses: scheduler processes elect one leader;
// kill -9 of the leader hands the lease to the standby within lease +
// renew, with a new epoch; a SIGTERM releases the lease at once.
func TestSchedulerFailoverProcesses(t *testing.T) {
	c := newCluster(t)
	c.startStore("")
	leader := func() (holder string, epoch int64, live bool) {
		t.Helper()
		err := c.pool.QueryRow(t.Context(), `SELECT holder, epoch, coalesce(lease_expires_at > now(), false) FROM scheduler_state`).
			Scan(&holder, &epoch, &live)
		if err != nil {
			t.Fatal(err)
		}
		return holder, epoch, live
	}
	holding := func(want string) func() error {
		return func() error {
			if h, _, live := leader(); h != want || !live {
				return fmt.Errorf("leader %q (live %v), want %q", h, live, want)
			}
			return nil
		}
	}
	a := c.startScheduler(c.storeAddrs[0], "sched-a", 2*time.Second)
	waitFor(t, 10*time.Second, "sched-a leads", holding("sched-a"))
	b := c.startScheduler(c.storeAddrs[0], "sched-b", 2*time.Second)
	_, epochA, _ := leader()

	a.kill9()
	killed := time.Now()
	waitFor(t, 10*time.Second, "sched-b takes over", holding("sched-b"))
	if took := time.Since(killed); took > 4*time.Second {
		t.Fatalf("takeover took %v with a 2s lease", took)
	}
	if _, epochB, _ := leader(); epochB <= epochA {
		t.Fatalf("epoch %d after %d", epochB, epochA)
	}
	// A graceful stop releases the lease.
	b.stop(syscall.SIGTERM, 10*time.Second)
	if h, _, live := leader(); h != "sched-b" || live {
		t.Fatalf("after SIGTERM: leader %q, lease live %v", h, live)
	}
}

// TestSchedulerFailoverUnderLoad is HARD-PARTS 3 with real processes and
// the noop reconciler in the loop, while resources are created and changed
// without pause: kill -9 of the leader → the standby takes over and nothing
// stays pending; then the new leader is stopped (SIGSTOP) past its lease, a
// third scheduler takes over, and once resumed (SIGCONT) the stopped one
// publishes no work item: every item on no8s.reconcile.> after that carries
// a newer epoch.
func TestSchedulerFailoverUnderLoad(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Busy", "version": "v1",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Busy/v1")
	leader := func() (holder string, epoch int64) {
		t.Helper()
		if err := c.pool.QueryRow(t.Context(), `SELECT holder, epoch FROM scheduler_state WHERE lease_expires_at > now()`).Scan(&holder, &epoch); err != nil {
			return "", 0
		}
		return holder, epoch
	}
	leads := func(want string) func() error {
		return func() error {
			if h, _ := leader(); h != want {
				return fmt.Errorf("leader %q, want %q", h, want)
			}
			return nil
		}
	}

	// Every work item published, with its scheduler epoch and arrival.
	type seen struct {
		epoch int64
		at    time.Time
	}
	var mu sync.Mutex
	var items []seen
	_, nc := c.jetstream()
	sub, err := nc.Subscribe("no8s.reconcile.>", func(m *nats.Msg) {
		var wi reconcilev1.WorkItem
		if proto.Unmarshal(m.Data, &wi) == nil && wi.GetResourceId() > 0 {
			mu.Lock()
			items = append(items, seen{wi.GetSchedulerEpoch(), time.Now()})
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	a := c.startScheduler(c.storeAddrs[0], "sched-a", 2*time.Second)
	waitFor(t, 10*time.Second, "sched-a leads", leads("sched-a"))
	b := c.startScheduler(c.storeAddrs[0], "sched-b", 2*time.Second)

	// Load: creates and spec changes, 8 clients, until stopped.
	var created atomic.Int64
	var ids sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%3 == 2 {
					if v, ok := ids.Load(fmt.Sprintf("w%d-%d", w, i-1)); ok {
						tryDo("PATCH", fmt.Sprintf("%s/api/v1/resources/%d", base, v.(int64)), map[string]any{"spec": map[string]any{"n": i}})
					}
					continue
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				r := tryDo("POST", base+"/api/v1/resources", map[string]any{"name": name, "resource_type_name": "Busy", "resource_type_version": "v1", "spec": map[string]any{"n": 0}})
				var doc struct {
					ID int64 `json:"id"`
				}
				if r.status == 201 && json.Unmarshal(r.body, &doc) == nil {
					ids.Store(name, doc.ID)
					created.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	_, epochA := leader()
	a.kill9()
	killed := time.Now()
	waitFor(t, 10*time.Second, "sched-b takes over", leads("sched-b"))
	t.Logf("kill -9 of the leader (epoch %d): sched-b leads after %s", epochA, time.Since(killed).Round(10*time.Millisecond))
	_, epochB := leader()
	time.Sleep(1500 * time.Millisecond)

	// SIGSTOP the leader past its lease; a third scheduler takes over.
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	c.startScheduler(c.storeAddrs[0], "sched-c", 2*time.Second)
	waitFor(t, 10*time.Second, "sched-c takes over", leads("sched-c"))
	_, epochC := leader()
	time.Sleep(time.Until(stopped.Add(4 * time.Second)))
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	t.Logf("sched-b (epoch %d) stopped for %s; sched-c leads at epoch %d", epochB, resumed.Sub(stopped).Round(10*time.Millisecond), epochC)
	time.Sleep(2 * time.Second) // the resumed one runs while the load goes on
	close(stop)
	wg.Wait()

	waitFor(t, 60*time.Second, "nothing pending", func() error {
		var pending int
		if err := c.pool.QueryRow(t.Context(), `SELECT count(*) FROM resources WHERE status <> 'ready' OR observed_generation <> generation`).Scan(&pending); err != nil {
			return err
		}
		if pending > 0 {
			return fmt.Errorf("%d of %d resources not ready at their generation", pending, created.Load())
		}
		return nil
	})
	if epochA >= epochB || epochB >= epochC {
		t.Fatalf("epochs %d, %d, %d", epochA, epochB, epochC)
	}
	mu.Lock()
	defer mu.Unlock()
	perEpoch := map[int64]int{}
	for _, it := range items {
		perEpoch[it.epoch]++
		if it.epoch <= epochB && it.at.After(resumed.Add(50*time.Millisecond)) {
			t.Errorf("a work item of epoch %d was published %s after sched-b resumed", it.epoch, it.at.Sub(resumed))
		}
	}
	t.Logf("%d resources created; work items per scheduler epoch: %v", created.Load(), perEpoch)
	if perEpoch[epochC] == 0 {
		t.Fatalf("the new leader dispatched nothing: %v", perEpoch)
	}
	if h, _ := leader(); h != "sched-c" {
		t.Fatalf("leader after the resumed one came back: %q", h)
	}
}
