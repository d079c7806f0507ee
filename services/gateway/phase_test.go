package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/services/internal/resource"
)

// serveEngine registers name/v1 with a schema that types nothing and runs an
// SDK engine whose one step is do.
func serveEngine(t *testing.T, name string, do func(context.Context, *sdk.Request[map[string]any]) (sdk.Result, error)) {
	t.Helper()
	createTypeUnserved(t, name, "v1", looseSchema)
	env.mu.Lock()
	defer env.mu.Unlock()
	startWorker(t, name, "v1", sdk.New[map[string]any]("engine-"+strings.ToLower(name), sdk.StepFuncs[map[string]any]{StepName: "only", DoFunc: do}))
}

// reconcileUntil dispatches r and waits until its document satisfies done.
func reconcileUntil(t *testing.T, r resource.Resource, done func(resource.Resource) bool) resource.Resource {
	t.Helper()
	reconcileNow(t, r)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := decode[resource.Resource](t, do(t, http.MethodGet, resourcePath(r), nil).expect(t, 200))
		if done(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("resource %d: not there after its reconcile: %+v", r.ID, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A failed attempt still sets observed_generation (seed 004); the failure is
// in the conditions and the status.
func TestObservedGenerationOnFailure(t *testing.T) {
	serveEngine(t, "FailingThing", func(context.Context, *sdk.Request[map[string]any]) (sdk.Result, error) {
		return sdk.Result{}, errors.New("the backend said no")
	})
	r := createResource(t, map[string]any{"name": "fails", "resource_type_name": "FailingThing", "resource_type_version": "v1", "spec": map[string]any{"a": 1}})
	got := reconcileUntil(t, r, func(d resource.Resource) bool { return d.Status == resource.StatusFailed })
	if got.ObservedGeneration != got.Generation || got.Phase != "Progressing" {
		t.Fatalf("after a failed attempt: observed_generation %d (generation %d), phase %s", got.ObservedGeneration, got.Generation, got.Phase)
	}
	var ready *resource.Condition
	for i := range got.Conditions {
		if got.Conditions[i].Type == "Ready" {
			ready = &got.Conditions[i]
		}
	}
	if ready == nil || ready.Status != "False" || ready.Reason != conditions.ReasonReconcileError || ready.ObservedGeneration != got.Generation {
		t.Fatalf("Ready condition %+v", ready)
	}
	// A spec change is a new generation to observe.
	up := decode[resource.Resource](t, do(t, http.MethodPut, resourcePath(r), map[string]any{"spec": map[string]any{"a": 2}}).expect(t, 200))
	got = reconcileUntil(t, up, func(d resource.Resource) bool {
		return d.Status == resource.StatusFailed && d.ObservedGeneration == up.Generation
	})
	if got.Generation != 2 {
		t.Fatalf("generation %d", got.Generation)
	}
}

// A reconciler reports a partial failure while still serving with
// sdk.Degraded: the phase is Degraded (seed 003), the attempt is a failure
// (retried with backoff) and its generation is observed; a later success
// makes it Ready.
func TestDegradedPhase(t *testing.T) {
	var healthy atomic.Bool
	serveEngine(t, "PartlyThing", func(_ context.Context, req *sdk.Request[map[string]any]) (sdk.Result, error) {
		req.SetCondition("RelaysConnected", conditions.StatusOf(healthy.Load()), "Probe", "relay b is down")
		if !healthy.Load() {
			return sdk.Result{}, sdk.Degradedf("1 of 2 relays connected")
		}
		return sdk.Result{}, nil
	})
	r := createResource(t, map[string]any{"name": "partly", "resource_type_name": "PartlyThing", "resource_type_version": "v1", "spec": map[string]any{}})
	got := reconcileUntil(t, r, func(d resource.Resource) bool { return d.Status == resource.StatusFailed })
	if got.Phase != resource.PhaseDegraded || got.ObservedGeneration != got.Generation || !strings.Contains(got.StatusMessage, "1 of 2 relays") {
		t.Fatalf("after a partial failure: phase %s, observed_generation %d/%d, message %q", got.Phase, got.ObservedGeneration, got.Generation, got.StatusMessage)
	}
	for _, c := range got.Conditions {
		if c.Type == "Ready" && (c.Status != "False" || c.Reason != conditions.ReasonDegraded) {
			t.Fatalf("Ready condition %+v", c)
		}
	}
	// A label change (no reconcile) keeps the phase.
	got = decode[resource.Resource](t, do(t, http.MethodPatch, resourcePath(r), `{"labels":{"a":"b"}}`, "Content-Type", "application/merge-patch+json").expect(t, 200))
	if got.Phase != resource.PhaseDegraded {
		t.Fatalf("phase after a label change: %s", got.Phase)
	}
	healthy.Store(true)
	got = reconcileUntil(t, r, func(d resource.Resource) bool { return d.Status == resource.StatusReady })
	if got.Phase != resource.PhaseReady {
		t.Fatalf("after a success: phase %s", got.Phase)
	}
}
