package main

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSetReady checks the one status change a reconcile makes: Ready True at
// the object's generation, other conditions kept, and the transition time of
// a Ready that was already True kept too.
func TestSetReady(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "a", "generation": int64(3)},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "False"},
			map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(2), "lastTransitionTime": "2026-01-01T00:00:00Z"},
		}},
	}}
	now := time.Date(2026, 12, 5, 16, 0, 0, 0, time.UTC)
	if err := setReady(obj, "Reconciled", now); err != nil {
		t.Fatal(err)
	}
	conds, _, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil || len(conds) != 2 {
		t.Fatalf("conditions %v (%v): want Synced and Ready", conds, err)
	}
	if c := conds[0].(map[string]any); c["type"] != "Synced" || c["status"] != "False" {
		t.Errorf("other condition changed: %v", c)
	}
	ready := conds[1].(map[string]any)
	if ready["type"] != "Ready" || ready["status"] != "True" || ready["observedGeneration"] != int64(3) || ready["reason"] != "Reconciled" {
		t.Errorf("Ready = %v, want True at generation 3", ready)
	}
	if ready["lastTransitionTime"] != "2026-01-01T00:00:00Z" {
		t.Errorf("lastTransitionTime = %v, want the earlier transition kept", ready["lastTransitionTime"])
	}

	fresh := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "b", "generation": int64(1)}}}
	if err := setReady(fresh, "Reconciled", now); err != nil {
		t.Fatal(err)
	}
	conds, _, _ = unstructured.NestedSlice(fresh.Object, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]any)["lastTransitionTime"] != "2026-12-05T16:00:00Z" || conds[0].(map[string]any)["observedGeneration"] != int64(1) {
		t.Errorf("a first Ready: %v", conds)
	}
}
