package tenant

import (
	"testing"
	"time"
)

// A waiting Tenant comes back just after the earliest timeout ends, or
// after ReadyPoll while a child is waited for to be gone, whichever is
// first; never sooner than a second.
func TestRecheck(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &reconciler{cfg: Config{ReadyPoll: 30 * time.Second}}
	for _, tc := range []struct {
		name string
		pr   progress
		want time.Duration
	}{
		{"a child not ready, timeout in 120 s", progress{deadline: now.Add(120 * time.Second)}, 121 * time.Second},
		{"a child not ready, timeout in 4.3 s", progress{deadline: now.Add(4300 * time.Millisecond)}, 5 * time.Second},
		{"the timeout just passed", progress{deadline: now.Add(-1500 * time.Millisecond)}, time.Second},
		{"a child going, no timeout", progress{gone: true}, 30 * time.Second},
		{"a child going, a timeout later", progress{gone: true, deadline: now.Add(time.Hour)}, 30 * time.Second},
		{"a child going, a timeout sooner", progress{gone: true, deadline: now.Add(10 * time.Second)}, 11 * time.Second},
	} {
		if got := r.recheck(now, &tc.pr); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
