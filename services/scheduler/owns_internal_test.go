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
	for _, tc := range []struct {
		name     string
		old, cur *trigger.State
		want     bool
	}{
		{"first seen pending (its creation is the event's)", nil, with(func(s *trigger.State) { s.Status = resource.StatusPending }), false},
		{"first seen ready", nil, &ready, true},
		{"first seen deleting", nil, with(func(s *trigger.State) { s.Status, s.Deleting = resource.StatusDeleting, true }), true},
		{"nothing changed (a resync)", &ready, &ready, false},
		{"spec changed", &ready, with(func(s *trigger.State) { s.Generation = 3 }), true},
		{"an attempt started", &ready, with(func(s *trigger.State) { s.Status = resource.StatusReconciling }), false},
		{"an attempt caught up with the spec, status unchanged", with(func(s *trigger.State) { s.ObservedGeneration = 1 }), &ready, true},
		{"failed", &ready, with(func(s *trigger.State) { s.Status = resource.StatusFailed }), true},
		{"deletion started", &ready, with(func(s *trigger.State) { s.Deleting = true }), true},
	} {
		if got := ownerSees(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
