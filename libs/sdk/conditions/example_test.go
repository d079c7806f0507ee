package conditions_test

import (
	"fmt"
	"time"

	"github.com/no8s/no8s/libs/sdk/conditions"
)

func ExampleSet() {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var list []conditions.Condition
	list = conditions.Set(list, conditions.Condition{Type: "DatabaseExists", Status: conditions.False, Reason: "Creating", ObservedGeneration: 1}, t0)
	// Same status an hour later: the transition time stays.
	list = conditions.Set(list, conditions.Condition{Type: "DatabaseExists", Status: conditions.False, Reason: "StillCreating", ObservedGeneration: 1}, t0.Add(time.Hour))
	c, _ := conditions.Find(list, "DatabaseExists")
	fmt.Println(c.Reason, c.LastTransitionTime.Format(time.Kitchen))
	// True two hours later: it moves.
	list = conditions.Set(list, conditions.Condition{Type: "DatabaseExists", Status: conditions.True, Reason: "Created", ObservedGeneration: 2}, t0.Add(2*time.Hour))
	c, _ = conditions.Find(list, "DatabaseExists")
	fmt.Println(c.Reason, c.LastTransitionTime.Format(time.Kitchen), len(list))
	// Output:
	// StillCreating 12:00PM
	// Created 2:00PM 1
}

func ExamplePhase() {
	list := []conditions.Condition{{Type: "DatabaseExists", Status: conditions.True}, {Type: "RoleExists", Status: conditions.False, Reason: "Denied"}}
	ready := conditions.DeriveReady(list, 2)
	list = conditions.Set(list, ready, time.Now())
	fmt.Println(ready.Status, ready.Reason)
	fmt.Println(conditions.Phase(false, list), conditions.Phase(true, list))
	// Output:
	// False Denied
	// Progressing Terminating
}
