package scheduler

import (
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// What an owner is reconciled for, of a change of a resource it owns.
func TestOwnerSees(t *testing.T) {
	ready := trigger.State{Generation: 2, ObservedGeneration: 2, Status: resource.StatusReady}
	with := func(f func(*trigger.State)) *trigger.State {
		s := ready
		f(&s)
		return &s
	}
	reconciling := with(func(s *trigger.State) { s.Status = resource.StatusReconciling })
	failed := with(func(s *trigger.State) { s.Status = resource.StatusFailed })
	for _, tc := range []struct {
		name    string
		old     *trigger.State
		settled string
		cur     *trigger.State
		want    bool
	}{
		{"first seen pending (its creation is the event's)", nil, "", with(func(s *trigger.State) { s.Status = resource.StatusPending }), false},
		{"first seen ready", nil, "", &ready, true},
		{"first seen deleting", nil, "", with(func(s *trigger.State) { s.Status, s.Deleting = resource.StatusDeleting, true }), true},
		{"nothing changed (a resync)", &ready, resource.StatusReady, &ready, false},
		{"a resync seen mid-attempt, ready again", reconciling, resource.StatusReady, &ready, false},
		{"a retry seen mid-attempt, failed again", reconciling, resource.StatusFailed, failed, false},
		{"spec changed", &ready, resource.StatusReady, with(func(s *trigger.State) { s.Generation = 3 }), true},
		{"an attempt started", &ready, resource.StatusReady, reconciling, false},
		{"an attempt caught up with the spec, status unchanged", with(func(s *trigger.State) { s.ObservedGeneration = 1 }), resource.StatusReady, &ready, true},
		{"failed", &ready, resource.StatusReady, failed, true},
		{"ready after failing, seen mid-attempt", reconciling, resource.StatusFailed, &ready, true},
		{"deletion started", &ready, resource.StatusReady, with(func(s *trigger.State) { s.Deleting = true }), true},
	} {
		if got := ownerSees(tc.old, tc.settled, tc.cur); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
