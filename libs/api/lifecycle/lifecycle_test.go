package lifecycle

import (
	"testing"
	"time"
)

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

func TestMerge(t *testing.T) {
	list, changed := Merge(nil, []Condition[string]{{Type: "A", Status: "False"}}, 3, t0)
	if !changed || len(list) != 1 || list[0].ObservedGeneration != 3 || !list[0].LastTransitionTime.Equal(t0) {
		t.Fatalf("new condition: %+v %v", list, changed)
	}
	same, changed := Merge(list, []Condition[string]{{Type: "A", Status: "False", ObservedGeneration: 3, LastTransitionTime: t1}}, 3, t1)
	if changed || !same[0].LastTransitionTime.Equal(t0) {
		t.Fatalf("unchanged condition: %+v %v", same, changed)
	}
	moved, changed := Merge(list, []Condition[string]{{Type: "A", Status: "True", Reason: "Done"}}, 4, t1)
	if !changed || !moved[0].LastTransitionTime.Equal(t1) || moved[0].ObservedGeneration != 4 || list[0].Status != "False" {
		t.Fatalf("status change: %+v %v (input %+v)", moved, changed, list)
	}
	kept, _ := Merge(list, []Condition[string]{{Type: "A", Status: "False", Message: "m"}}, 0, t1)
	if kept[0].ObservedGeneration != 0 || !kept[0].LastTransitionTime.Equal(t0) || kept[0].Message != "m" {
		t.Fatalf("generation 0 / same status: %+v", kept)
	}
	bad, _ := Merge(nil, []Condition[Status]{{Type: "B", Status: "yes"}}, 0, t0)
	if bad[0].Status != Unknown {
		t.Fatalf("invalid status stored as %q", bad[0].Status)
	}
}

func TestPhaseOf(t *testing.T) {
	for _, tc := range []struct {
		f    PhaseFacts
		want string
	}{
		{PhaseFacts{Deleting: true, Degraded: true, Succeeded: true}, PhaseTerminating},
		{PhaseFacts{Degraded: true, Succeeded: true}, PhaseDegraded},
		{PhaseFacts{Statuses: []Status{True}}, PhaseProgressing},
		{PhaseFacts{Succeeded: true, Statuses: []Status{True, Unknown}}, PhaseProgressing},
		{PhaseFacts{Succeeded: true, Statuses: []Status{True, True}}, PhaseReady},
		{PhaseFacts{Succeeded: true}, PhaseReady},
	} {
		if got := PhaseOf(tc.f); got != tc.want {
			t.Errorf("PhaseOf(%+v) = %s, want %s", tc.f, got, tc.want)
		}
	}
	if s := Statuses([]Condition[string]{{Status: "True"}, {Status: "False"}}); len(s) != 2 || s[1] != False {
		t.Errorf("Statuses = %v", s)
	}
}
