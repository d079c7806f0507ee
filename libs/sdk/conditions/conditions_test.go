package conditions_test

import (
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk/conditions"
)

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 = t0.Add(time.Minute)
	t2 = t1.Add(time.Minute)
)

func TestSetUniqueByType(t *testing.T) {
	var list []conditions.Condition
	list = conditions.Set(list, conditions.Condition{Type: "A", Status: conditions.False}, t0)
	list = conditions.Set(list, conditions.Condition{Type: "B", Status: conditions.True}, t0)
	list = conditions.Set(list, conditions.Condition{Type: "A", Status: conditions.True}, t1)
	if len(list) != 2 {
		t.Fatalf("want 2 conditions, got %d: %+v", len(list), list)
	}
	a, _ := conditions.Find(list, "A")
	if a.Status != conditions.True || !a.LastTransitionTime.Equal(t1) {
		t.Fatalf("A = %+v", a)
	}
}

func TestTransitionTimeMovesOnlyOnStatusChange(t *testing.T) {
	list := conditions.Set(nil, conditions.Condition{Type: "A", Status: conditions.False, Reason: "Waiting", ObservedGeneration: 1}, t0)
	// Same status, new reason, message and generation: the time stays.
	list = conditions.Set(list, conditions.Condition{Type: "A", Status: conditions.False, Reason: "StillWaiting", Message: "m", ObservedGeneration: 2}, t1)
	a, _ := conditions.Find(list, "A")
	if !a.LastTransitionTime.Equal(t0) {
		t.Fatalf("transition time moved without a status change: %v", a.LastTransitionTime)
	}
	if a.Reason != "StillWaiting" || a.Message != "m" || a.ObservedGeneration != 2 {
		t.Fatalf("fields not updated: %+v", a)
	}
	// A caller-supplied time is ignored.
	list = conditions.Set(list, conditions.Condition{Type: "A", Status: conditions.False, LastTransitionTime: t2}, t2)
	if a, _ := conditions.Find(list, "A"); !a.LastTransitionTime.Equal(t0) {
		t.Fatalf("caller time used: %v", a.LastTransitionTime)
	}
	list = conditions.Set(list, conditions.Condition{Type: "A", Status: conditions.True}, t2)
	if a, _ := conditions.Find(list, "A"); !a.LastTransitionTime.Equal(t2) {
		t.Fatalf("transition time did not move on a status change: %v", a.LastTransitionTime)
	}
}

func TestSetDoesNotModifyInput(t *testing.T) {
	list := conditions.Set(nil, conditions.Condition{Type: "A", Status: conditions.False}, t0)
	_ = conditions.Set(list, conditions.Condition{Type: "A", Status: conditions.True}, t1)
	if list[0].Status != conditions.False {
		t.Fatal("Set modified its input")
	}
}

func TestInvalidStatusIsUnknown(t *testing.T) {
	list := conditions.Set(nil, conditions.Condition{Type: "A", Status: "yes"}, t0)
	if list[0].Status != conditions.Unknown {
		t.Fatalf("status %q", list[0].Status)
	}
}

func TestInitializeKeepsExisting(t *testing.T) {
	list := conditions.Set(nil, conditions.Condition{Type: "A", Status: conditions.True}, t0)
	list = conditions.Initialize(list, 3, t1, "A", "B")
	a, _ := conditions.Find(list, "A")
	b, _ := conditions.Find(list, "B")
	if a.Status != conditions.True || b.Status != conditions.Unknown || b.ObservedGeneration != 3 || !b.LastTransitionTime.Equal(t1) {
		t.Fatalf("A=%+v B=%+v", a, b)
	}
}

func TestDeriveReadyAndPhase(t *testing.T) {
	var list []conditions.Condition
	r := conditions.DeriveReady(list, 1)
	if r.Status != conditions.True {
		t.Fatalf("no conditions: Ready %+v", r)
	}
	list = conditions.Set(list, conditions.Condition{Type: "DatabaseExists", Status: conditions.True}, t0)
	list = conditions.Set(list, conditions.Condition{Type: "RoleExists", Status: conditions.False, Reason: "CreateFailed", Message: "permission denied"}, t0)
	list = conditions.Set(list, conditions.Condition{Type: "Synced", Status: conditions.Unknown}, t0)
	r = conditions.DeriveReady(list, 4)
	if r.Status != conditions.False || r.Reason != "CreateFailed" || r.ObservedGeneration != 4 {
		t.Fatalf("Ready %+v", r)
	}
	if r.Message != "not True: RoleExists, Synced (RoleExists: permission denied)" {
		t.Fatalf("message %q", r.Message)
	}
	list = conditions.Set(list, r, t0)
	if p := conditions.Phase(false, list); p != conditions.PhaseProgressing {
		t.Fatalf("phase %s", p)
	}
	if p := conditions.Phase(true, list); p != conditions.PhaseTerminating {
		t.Fatalf("phase while deleting %s", p)
	}
	list = conditions.Set(list, conditions.Condition{Type: "RoleExists", Status: conditions.True}, t1)
	list = conditions.Set(list, conditions.Condition{Type: "Synced", Status: conditions.True}, t1)
	list = conditions.Set(list, conditions.DeriveReady(list, 4), t1)
	if p := conditions.Phase(false, list); p != conditions.PhaseReady {
		t.Fatalf("phase %s, conditions %+v", p, list)
	}
	// Ready itself False makes the phase Progressing even if the rest are True.
	list = conditions.Set(list, conditions.Condition{Type: conditions.Ready, Status: conditions.False, Reason: "ReconcileError"}, t2)
	if p := conditions.Phase(false, list); p != conditions.PhaseProgressing {
		t.Fatalf("phase %s", p)
	}
}

func TestNormalize(t *testing.T) {
	list := []conditions.Condition{
		{Type: "B", Status: conditions.True},
		{Type: "A", Status: "bogus"},
		{Type: conditions.Ready, Status: conditions.False},
		{Type: "B", Status: conditions.False},
	}
	got := conditions.Normalize(list)
	if len(got) != 3 || got[0].Type != conditions.Ready || got[1].Type != "A" || got[1].Status != conditions.Unknown || got[2].Status != conditions.False {
		t.Fatalf("%+v", got)
	}
}

func TestPhaseOf(t *testing.T) {
	T, F, U := conditions.True, conditions.False, conditions.Unknown
	for _, tc := range []struct {
		facts conditions.PhaseFacts
		want  string
	}{
		{conditions.PhaseFacts{Deleting: true, Degraded: true, Succeeded: true}, conditions.PhaseTerminating},
		{conditions.PhaseFacts{Degraded: true, Statuses: []conditions.Status{T}}, conditions.PhaseDegraded},
		{conditions.PhaseFacts{Succeeded: true, Statuses: []conditions.Status{T, T}}, conditions.PhaseReady},
		{conditions.PhaseFacts{Succeeded: true}, conditions.PhaseReady},
		{conditions.PhaseFacts{Succeeded: true, Statuses: []conditions.Status{T, U}}, conditions.PhaseProgressing},
		{conditions.PhaseFacts{Succeeded: true, Statuses: []conditions.Status{F}}, conditions.PhaseProgressing},
		{conditions.PhaseFacts{Statuses: []conditions.Status{T}}, conditions.PhaseProgressing},
		{conditions.PhaseFacts{}, conditions.PhaseProgressing},
	} {
		if got := conditions.PhaseOf(tc.facts); got != tc.want {
			t.Errorf("PhaseOf(%+v) = %s, want %s", tc.facts, got, tc.want)
		}
	}
}
