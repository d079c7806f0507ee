package testkit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/testkit"
	"github.com/no8s/no8s/libs/sdk/worker"
)

// One reconcile at a time per resource, across replicas, at the SDK's scale: two worker replicas, a reconciler that
// sleeps randomly and sometimes stalls past its lease (ignoring its
// context), many manual triggers on many resources, the scheduler in the
// loop. From history: no two attempts on one resource overlap, and lease
// epochs only grow.
func TestNoOverlappingAttempts(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const resources, triggers = 60, 240
	env := testkit.Start(t, testkit.WithLease(3*time.Second))
	env.CreateType(t, widget.Name, widget.Version, widgetSchema)

	var running sync.Map // resource id -> *atomic.Int32
	var overlaps, stalls atomic.Int32
	engine := sdk.New("widgets", sdk.Func[probeSpec](func(ctx context.Context, req *sdk.Request[probeSpec]) (sdk.Result, error) {
		if rand.IntN(100) < 2 && stalls.Add(1) <= 4 {
			// Stuck past the 1 s timeout and the 3 s lease: this attempt
			// keeps running after a newer one took over (its write will be
			// refused), so it stays out of the in-process overlap count.
			time.Sleep(4 * time.Second)
			return sdk.Result{}, nil
		}
		v, _ := running.LoadOrStore(req.Resource.ID, new(atomic.Int32))
		n := v.(*atomic.Int32)
		if n.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer n.Add(-1)
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		return sdk.Result{}, nil
	}))
	opts := []worker.Option{worker.WithMaxTimeout(time.Second), worker.WithMaxConcurrency(8)}
	env.RunWorker(t, engine, []sdk.TypeRef{widget}, append(opts, worker.WithReplicaID("a"))...)
	env.RunWorker(t, engine, []sdk.TypeRef{widget}, append(opts, worker.WithReplicaID("b"))...)

	var all []*sdk.Resource
	for i := range resources {
		all = append(all, env.CreateResource(t, widget, fmt.Sprintf("r%03d", i), map[string]any{}))
	}
	for range triggers {
		env.Trigger(t, all[rand.IntN(len(all))])
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
	}
	for _, r := range all {
		env.WaitFor(t, r, testkit.Ready(), 60*time.Second)
	}
	time.Sleep(5 * time.Second) // let stalled attempts finish and try their late writes

	holders := map[string]int{}
	attempts := 0
	for _, r := range all {
		h := env.History(t, r)
		slices.Reverse(h) // oldest first
		attempts += len(h)
		for i, e := range h {
			holders[e.GetHolder()]++
			if i == 0 {
				continue
			}
			prev := h[i-1]
			prevEnd := prev.GetStartedAt().AsTime().Add(time.Duration(prev.GetDurationMs()) * time.Millisecond)
			if e.GetStartedAt().AsTime().Before(prevEnd) {
				t.Errorf("%s: attempt %d (epoch %d, %s) started %s before the previous one (epoch %d, %s) ended",
					r.Name, e.GetId(), e.GetLeaseEpoch(), e.GetHolder(), prevEnd.Sub(e.GetStartedAt().AsTime()), prev.GetLeaseEpoch(), prev.GetHolder())
			}
			if e.GetLeaseEpoch() <= prev.GetLeaseEpoch() {
				t.Errorf("%s: epoch %d after %d", r.Name, e.GetLeaseEpoch(), prev.GetLeaseEpoch())
			}
		}
	}
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d attempts ran while another attempt on the same resource was still running in this process", n)
	}
	t.Logf("%d attempts recorded, %d stalls, holders %v", attempts, min(stalls.Load(), 4), holders)
	if len(holders) < 2 {
		t.Errorf("both replicas should have worked: %v", holders)
	}
}
