package scheduler

import (
	"testing"
	"time"

	"github.com/no8s/no8s/services/scheduler/trigger"
)

// TestWalkCountsQueuedItemsAndStatuses: an item counts as queued from its
// dispatch until a worker takes its lease; every tracked type has a
// depth, 0 included; resources count by type and lifecycle status.
func TestWalkCountsQueuedItemsAndStatuses(t *testing.T) {
	now := time.Now()
	st := func(id int64, typ, status string) trigger.State {
		return trigger.State{ID: id, TypeName: typ, TypeVersion: "v1", Status: status}
	}
	taken := st(3, "Widget", "reconciling")
	taken.LeaseHolder, taken.LeaseExpiresAt, taken.LeaseEpoch = "w/1", now.Add(time.Minute), 2
	deleting := st(5, "Gadget", "ready")
	deleting.Deleting = true
	entries := map[int64]*entry{
		1: {st: st(1, "Widget", "pending"), flight: &flight{sent: true, at: now.Add(-30 * time.Second), baseEpoch: 0}},
		2: {st: st(2, "Widget", "pending"), flight: &flight{sent: true, at: now.Add(-10 * time.Second), baseEpoch: 0}},
		3: {st: taken, flight: &flight{sent: true, at: now.Add(-time.Minute), baseEpoch: 1}},
		4: {st: st(4, "Widget", "ready"), flight: &flight{sent: false, at: now}},
		5: {st: deleting},
		6: {st: st(6, "Gadget", "")},
	}
	s := walk(entries, now)
	if s.queued["Widget/v1"] != 2 || !s.oldest["Widget/v1"].Equal(now.Add(-30*time.Second)) {
		t.Errorf("Widget/v1 queued %d, oldest %v; want 2 dispatched 30 s ago", s.queued["Widget/v1"], now.Sub(s.oldest["Widget/v1"]))
	}
	if n, ok := s.queued["Gadget/v1"]; !ok || n != 0 {
		t.Errorf("Gadget/v1 queued %d (present %v), want a depth of 0", n, ok)
	}
	want := map[[2]string]int{
		{"Widget/v1", "pending"}: 2, {"Widget/v1", "reconciling"}: 1, {"Widget/v1", "ready"}: 1,
		{"Gadget/v1", "deleting"}: 1, {"Gadget/v1", "pending"}: 1,
	}
	if len(s.resources) != len(want) {
		t.Errorf("resources %v, want %v", s.resources, want)
	}
	for k, n := range want {
		if s.resources[k] != n {
			t.Errorf("resources %v = %d, want %d", k, s.resources[k], n)
		}
	}
	if got := snapshotInterval(1_000_000); got != 22*time.Second {
		t.Errorf("walk interval at a million resources %s, want 22s", got)
	}
}
