package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/reconcilers"
	"github.com/no8s/no8s/services/internal/resource"
)

// reconcileClient talks to the stack's WorkerService directly, as a worker
// does.
func reconcileClient() reconcilev1.WorkerServiceClient {
	return reconcilev1.NewWorkerServiceClient(env.conns["worker"])
}

// attempt runs one reconcile attempt on a resource as a worker would.
func attempt(t *testing.T, id int64, outcome reconcilev1.Outcome, msg string, outputs string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rc := reconcileClient()
	l, err := rc.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: id, Holder: "test-worker"})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	req := &reconcilev1.CompleteReconcileRequest{ResourceId: id, LeaseEpoch: l.GetLeaseEpoch(), Outcome: outcome, StatusMessage: msg,
		History: &reconcilev1.HistoryEntry{ErrorMessage: msg, ResourcesUpdated: 1, Reason: reconcilev1.Reason_REASON_MANUAL}}
	if outputs != "" {
		req.Outputs = []byte(outputs)
	}
	if _, err := rc.CompleteReconcile(ctx, req); err != nil {
		t.Fatalf("complete: %v", err)
	}
}

func TestReconcileEndpoints(t *testing.T) {
	createType(t, "Reconciled", "v1", `{"type":"object"}`)
	r := createResource(t, map[string]any{"name": "g1", "resource_type_name": "Reconciled", "resource_type_version": "v1", "spec": map[string]any{}})
	base := fmt.Sprintf("/api/v1/resources/%d", r.ID)

	// Manual trigger: 202 with the resource, a new revision.
	trig := decode[resource.Resource](t, do(t, http.MethodPost, base+"/reconcile", nil).expect(t, http.StatusAccepted))
	if trig.ID != r.ID || trig.ResourceVersion <= r.ResourceVersion {
		t.Fatalf("trigger answer %+v", trig)
	}
	do(t, http.MethodPost, "/api/v1/resources/999999/reconcile", nil).expectError(t, http.StatusNotFound, "not_found")
	do(t, http.MethodPost, "/api/v1/resources/x/reconcile", nil).expectError(t, http.StatusBadRequest, "invalid", "/id")

	// Outputs before any reconcile: an empty object.
	if got := string(do(t, http.MethodGet, base+"/outputs", nil).expect(t, http.StatusOK).Body); got != `{"outputs":{}}` {
		t.Fatalf("outputs %s", got)
	}
	// History: empty array, then newest first and paged.
	if got := string(do(t, http.MethodGet, base+"/history", nil).expect(t, http.StatusOK).Body); got != `[]` {
		t.Fatalf("empty history %s", got)
	}
	attempt(t, r.ID, reconcilev1.Outcome_OUTCOME_ERROR, "boom", "")
	attempt(t, r.ID, reconcilev1.Outcome_OUTCOME_SUCCESS, "", `{"host":"db","port":5432}`)
	attempt(t, r.ID, reconcilev1.Outcome_OUTCOME_SUCCESS, "", "")
	h := decode[[]historyDoc](t, do(t, http.MethodGet, base+"/history", nil).expect(t, http.StatusOK))
	if len(h) != 3 || !h[0].Success || h[2].Success || h[2].ErrorMessage == nil || *h[2].ErrorMessage != "boom" ||
		h[0].ErrorMessage != nil || h[0].LeaseEpoch != 3 || h[0].Reason != "manual" || h[0].ResourcesUpdated != 1 || h[0].ReconcileTime.IsZero() {
		t.Fatalf("history %+v", h)
	}
	page := decode[[]historyDoc](t, do(t, http.MethodGet, fmt.Sprintf("%s/history?limit=1&before=%d", base, h[0].ID), nil).expect(t, http.StatusOK))
	if len(page) != 1 || page[0].ID != h[1].ID {
		t.Fatalf("page %+v", page)
	}
	do(t, http.MethodGet, base+"/history?limit=501", nil).expectError(t, http.StatusBadRequest, "invalid", "/limit")
	do(t, http.MethodGet, base+"/history?before=-1", nil).expectError(t, http.StatusBadRequest, "invalid", "/before")
	do(t, http.MethodGet, "/api/v1/resources/999999/history", nil).expectError(t, http.StatusNotFound, "not_found")
	if got := string(do(t, http.MethodGet, base+"/outputs", nil).expect(t, http.StatusOK).Body); got != `{"outputs":{"host":"db","port":5432}}` {
		t.Fatalf("outputs %s", got)
	}
	got := decode[resource.Resource](t, do(t, http.MethodGet, base, nil).expect(t, http.StatusOK))
	if got.Status != resource.StatusReady || got.ObservedGeneration != 1 || got.LastReconcileTime == nil {
		t.Fatalf("resource after reconciles: %+v", got)
	}
	do(t, http.MethodGet, "/api/v1/resources/999999/outputs", nil).expectError(t, http.StatusNotFound, "not_found")
}

func TestReconcilePolicyOnTypes(t *testing.T) {
	r := do(t, http.MethodPost, "/api/v1/resource-types", map[string]any{
		"name": "Policed", "version": "v1", "schema": map[string]any{"type": "object"},
		"reconcile_policy": map[string]any{"resync_seconds": 10, "backoff_base_seconds": 2},
	}).expect(t, http.StatusCreated)
	typ := decode[resource.Type](t, r)
	want := resource.ReconcilePolicy{ResyncSeconds: 10, BackoffBaseSeconds: 2, BackoffMaxSeconds: 61440, TimeoutSeconds: 300}
	if typ.ReconcilePolicy != want {
		t.Fatalf("policy %+v, want %+v", typ.ReconcilePolicy, want)
	}
	// A type without a policy reads with the defaults.
	plain := createType(t, "Unpoliced", "v1", `{"type":"object"}`)
	if plain.ReconcilePolicy != (resource.ReconcilePolicy{}).WithDefaults() {
		t.Fatalf("default policy %+v", plain.ReconcilePolicy)
	}
	path := fmt.Sprintf("/api/v1/resource-types/%d", typ.ID)
	up := decode[resource.Type](t, do(t, http.MethodPut, path, map[string]any{
		"reconcile_policy": map[string]any{"timeout_seconds": 60},
	}).expect(t, http.StatusOK))
	if up.ReconcilePolicy != (resource.ReconcilePolicy{TimeoutSeconds: 60}).WithDefaults() {
		t.Fatalf("updated policy %+v", up.ReconcilePolicy)
	}
	// A description-only update keeps it.
	kept := decode[resource.Type](t, do(t, http.MethodPut, path, map[string]any{"description": "x"}).expect(t, http.StatusOK))
	if kept.ReconcilePolicy != up.ReconcilePolicy {
		t.Fatalf("policy lost: %+v", kept.ReconcilePolicy)
	}
	unchanged(t, func() {
		for _, c := range []struct {
			policy map[string]any
			path   string
		}{
			{map[string]any{"resync_seconds": 0}, "/reconcile_policy/resync_seconds"},
			{map[string]any{"backoff_base_seconds": -5}, "/reconcile_policy/backoff_base_seconds"},
			{map[string]any{"backoff_base_seconds": 100, "backoff_max_seconds": 50}, "/reconcile_policy/backoff_max_seconds"},
			{map[string]any{"timeout_seconds": 3601}, "/reconcile_policy/timeout_seconds"},
			{map[string]any{"resync_seconds": "often"}, "/reconcile_policy/resync_seconds"},
			{map[string]any{"bogus": 1}, ""},
		} {
			var paths []string
			if c.path != "" {
				paths = append(paths, c.path)
			}
			do(t, http.MethodPut, path, map[string]any{"reconcile_policy": c.policy}).expectError(t, http.StatusBadRequest, "", paths...)
			do(t, http.MethodPost, "/api/v1/resource-types", map[string]any{
				"name": "Bad", "version": "v1", "schema": map[string]any{"type": "object"}, "reconcile_policy": c.policy,
			}).expectError(t, http.StatusBadRequest, "", paths...)
		}
	})
}

func TestListReconcilers(t *testing.T) {
	ctx := t.Context()
	if _, err := env.js.KeyValue(ctx, subjects.RegistryBucket); errors.Is(err, jetstream.ErrBucketNotFound) {
		if got := string(do(t, http.MethodGet, "/api/v1/reconcilers", nil).expect(t, http.StatusOK).Body); got != `[]` {
			t.Fatalf("no registry: %s", got)
		}
	}
	kv, err := env.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.RegistryBucket, TTL: subjects.RegistryTTL, Storage: jetstream.MemoryStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = env.js.KeyValue(ctx, subjects.RegistryBucket)
	}
	if err != nil {
		t.Fatal(err)
	}
	put := func(k, v string) {
		if _, err := kv.PutString(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	put("type.Gizmo.v1", "gizmo")
	put("type.Gizmo.v2", "gizmo")
	put("replica.gizmo.a", `{"name":"gizmo","replica":"a","types":[{"name":"Gizmo","version":"v1"},{"name":"Gizmo","version":"v2"}],"started_at":"2026-01-01T00:00:00Z"}`)
	put("replica.gizmo.b", `{"name":"gizmo","replica":"b","types":[{"name":"Gizmo","version":"v1"},{"name":"Gizmo","version":"v2"}],"started_at":"2026-01-01T00:00:00Z"}`)
	put("replica.noop.x", `{"name":"noop","replica":"x","types":["Thing/v1"]}`)
	t.Cleanup(func() {
		for _, k := range []string{"type.Gizmo.v1", "type.Gizmo.v2", "replica.gizmo.a", "replica.gizmo.b", "replica.noop.x"} {
			_ = kv.Purge(context.Background(), k)
		}
	})
	all := decode[[]reconcilers.Reconciler](t, do(t, http.MethodGet, "/api/v1/reconcilers", nil).expect(t, http.StatusOK))
	var got []reconcilers.Reconciler // the stack's own noop-* and engine-* reconcilers aside
	for _, r := range all {
		if !strings.HasPrefix(r.Name, "noop-") && !strings.HasPrefix(r.Name, "engine-") {
			got = append(got, r)
		}
	}
	if len(got) != 2 || got[0].Name != "gizmo" || got[0].Replicas != 2 || !got[0].Live || len(got[0].Types) != 2 ||
		got[0].Types[1] != (reconcilers.TypeRef{Name: "Gizmo", Version: "v2"}) || got[1].Name != "noop" || got[1].Types[0].Name != "Thing" {
		t.Fatalf("reconcilers %+v", got)
	}
}
