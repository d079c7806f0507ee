package noop

import (
	"encoding/json"
	"testing"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/testkit"
)

func TestParseTypes(t *testing.T) {
	got, err := ParseTypes(" DatabaseCluster/v1, Widget/v2beta1 ,")
	if err != nil || len(got) != 2 || got[0] != sdk.Type("DatabaseCluster", "v1") || got[1] != sdk.Type("Widget", "v2beta1") {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "Widget", "widget/v1", "Widget/1"} {
		if _, err := ParseTypes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Every resource is ready at once; deletion needs no cleanup.
func TestNoop(t *testing.T) {
	r := &sdk.Resource{ID: 1, Name: "a", Type: sdk.Type("Widget", "v1"), Generation: 2,
		Spec: json.RawMessage(`{"anything":true}`), Finalizers: []string{names.ReconcilerFinalizer(DefaultName)}}
	got := testkit.Reconcile(t.Context(), New(""), r)
	if got.Outcome != lifecycle.OutcomeSuccess || got.Phase != conditions.PhaseReady || !conditions.IsTrue(got.Conditions, conditions.Ready) {
		t.Fatalf("%+v", got)
	}
	r.Status = client.StatusDeleting
	got = testkit.Reconcile(t.Context(), New(""), r)
	if got.Outcome != lifecycle.OutcomeSuccess || len(got.RemoveFinalizers) != 1 {
		t.Fatalf("deleting: %+v", got)
	}
}
