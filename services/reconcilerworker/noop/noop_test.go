package noop

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
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

type saved struct{ sdk.ReadWriter }

func (saved) Status() sdk.StatusWriter { return status{} }

type status struct{}

func (status) Complete(_ context.Context, c *sdk.Completion) (*sdk.Completed, error) {
	return &sdk.Completed{}, nil
}

// Every resource is ready at once; deletion needs no cleanup.
func TestNoop(t *testing.T) {
	r := &sdk.Resource{ID: 1, Name: "a", Type: sdk.Type("Widget", "v1"), Generation: 2,
		Spec: json.RawMessage(`{"anything":true}`), Finalizers: []string{sdk.Finalizer(DefaultName)}}
	rep := New("").Reconcile(context.Background(), &sdk.Attempt{Resource: r, Client: saved{}})
	if rep.Outcome != sdk.OutcomeSuccess || rep.Completion.Phase != conditions.PhaseReady || !conditions.IsTrue(rep.Completion.Conditions, conditions.Ready) {
		t.Fatalf("%+v", rep.Completion)
	}
	r.Status = sdk.StatusDeleting
	rep = New("").Reconcile(context.Background(), &sdk.Attempt{Resource: r, Client: saved{}})
	if rep.Outcome != sdk.OutcomeSuccess || len(rep.Completion.RemoveFinalizers) != 1 {
		t.Fatalf("deleting: %+v", rep.Completion)
	}
}
