package scheduler

import (
	"testing"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/reconcilers"
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

// A child's creation whose CREATED event comes after the owner's attempt
// was read as over is the attempt's own (or one it read): it asks for no
// attempt of the owner. One made after that read, or with the owner's
// lease still held, is not known from the read.
func TestKnewOfAChildCreatedByTheAttempt(t *testing.T) {
	over := trigger.State{ID: 1, UID: "owner", TypeName: "Parent", TypeVersion: "v1", LeaseEpoch: 1, LeaseRevision: 10, ResourceVersion: 14}
	for _, tc := range []struct {
		name string
		st   trigger.State
		rv   int64
		want bool
	}{
		{"created during the attempt, its end read first", over, 12, true},
		{"committed before the attempt began", over, 9, true},
		{"created after the read", over, 15, false},
		{"revision unknown", over, 0, false},
		{"never attempted", trigger.State{ResourceVersion: 14}, 12, false},
		{"lease held", func() trigger.State { s := over; s.LeaseHolder = "w/1"; return s }(), 12, false},
	} {
		e := &entry{st: tc.st}
		if got := e.knew(tc.rv); got != tc.want {
			t.Errorf("%s: knew(%d) = %v, want %v", tc.name, tc.rv, got, tc.want)
		}
	}

	// noteCreated counts nothing for the child of an attempt read as over.
	owner := &entry{st: over}
	l := &loop{entries: map[int64]*entry{1: owner}, byUID: map[string]int64{"owner": 1},
		owns: map[reconcilers.TypeRef]reconcilers.Owned{{Name: "Parent", Version: "v1"}: {Types: map[reconcilers.TypeRef]bool{{Name: "Child", Version: "v1"}: true}}}}
	l.noteCreated(event{id: 2, typ: eventstream.Created, controller: "owner", resType: reconcilers.TypeRef{Name: "Child", Version: "v1"}, rev: 12})
	if owner.depSeq != 0 {
		t.Fatalf("the owner counted %d changes for a child its attempt created", owner.depSeq)
	}
}
