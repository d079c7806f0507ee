package gateway

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
)

func apply(t *testing.T, query string, body map[string]any) response {
	t.Helper()
	return do(t, http.MethodPost, "/api/v1/resources/apply"+query, body)
}

func applyBody(name string, spec map[string]any) map[string]any {
	return map[string]any{"name": name, "resource_type_name": "Gadget", "resource_type_version": "v1", "spec": spec}
}

// Server-side apply creates by name, then updates to the given spec,
// labels and annotations; applying what is stored changes nothing. Every
// run names its own resources and namespaces, so -count repeats it.
func TestApply(t *testing.T) {
	gadgetType.Do(func() { createType(t, "Gadget", "v1", gadgetSchema) })
	run := "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	applied := "applied" + run

	body := applyBody(applied, map[string]any{"size": 2})
	body["labels"] = map[string]string{"team": "a"}
	var created resource.Resource
	unchanged(t, func() {
		r := apply(t, "?dry_run=true", body).expect(t, http.StatusCreated)
		if r.Header.Get(HeaderApplyResult) != ApplyCreated || r.Header.Get("Location") != "" {
			t.Fatalf("dry-run create: %v", r.Header)
		}
	})
	r := apply(t, "", body).expect(t, http.StatusCreated)
	created = decode[resource.Resource](t, r)
	if r.Header.Get(HeaderApplyResult) != ApplyCreated || created.Generation != 1 || specOf(t, created)["tier"] != "basic" {
		t.Fatalf("created %v %s", r.Header, r.Body)
	}

	t.Run("idempotent", func(t *testing.T) {
		unchanged(t, func() {
			for range 2 {
				r := apply(t, "", body).expect(t, http.StatusOK)
				got := decode[resource.Resource](t, r)
				if r.Header.Get(HeaderApplyResult) != ApplyUnchanged || got.ResourceVersion != created.ResourceVersion || got.Generation != 1 {
					t.Fatalf("re-apply: %s %d gen %d", r.Header.Get(HeaderApplyResult), got.ResourceVersion, got.Generation)
				}
			}
			// The spec with its default written out, in another notation: the same value.
			same := applyBody(applied, map[string]any{"tier": "basic", "size": 2.0})
			if r := apply(t, "", same).expect(t, http.StatusOK); r.Header.Get(HeaderApplyResult) != ApplyUnchanged {
				t.Fatalf("by value: %s", r.Header.Get(HeaderApplyResult))
			}
		})
	})

	t.Run("updates spec, replaces given labels, keeps omitted annotations", func(t *testing.T) {
		mergePatch(t, "/api/v1/resources/"+strconv.FormatInt(created.ID, 10), `{"annotations":{"note":"kept"}}`).expect(t, http.StatusOK)
		b := applyBody(applied, map[string]any{"size": 3})
		b["labels"] = map[string]string{"team": "b"}
		unchanged(t, func() {
			if r := apply(t, "?dry_run=true", b).expect(t, http.StatusOK); r.Header.Get(HeaderApplyResult) != ApplyConfigured {
				t.Fatalf("dry-run update: %s", r.Header.Get(HeaderApplyResult))
			}
		})
		r := apply(t, "", b).expect(t, http.StatusOK)
		got := decode[resource.Resource](t, r)
		if r.Header.Get(HeaderApplyResult) != ApplyConfigured || got.Generation != 2 || specOf(t, got)["size"] != float64(3) ||
			!maps.Equal(got.Labels, map[string]string{"team": "b"}) || got.Annotations["note"] != "kept" {
			t.Fatalf("update: %s %s", r.Header.Get(HeaderApplyResult), r.Body)
		}
		// Labels only: generation stays.
		b["labels"] = map[string]string{}
		got = decode[resource.Resource](t, apply(t, "", b).expect(t, http.StatusOK))
		if got.Generation != 2 || len(got.Labels) != 0 {
			t.Fatalf("labels cleared: gen %d labels %v", got.Generation, got.Labels)
		}
	})

	t.Run("bad input writes nothing", func(t *testing.T) {
		unchanged(t, func() {
			apply(t, "", map[string]any{"name": "Bad_Name", "resource_type_name": "gadget", "resource_type_version": "1", "spec": []int{1}}).
				expectError(t, http.StatusBadRequest, "invalid", "/name", "/resource_type_name", "/resource_type_version", "/spec")
			apply(t, "", map[string]any{"name": "x", "resource_type_name": "Gadget", "resource_type_version": "v1", "spec": map[string]any{"size": 0}}).
				expectError(t, http.StatusBadRequest, "validation_failed", "/spec/size")
			apply(t, "", map[string]any{"name": "x", "resource_type_name": "Gadget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}, "status": "ready"}).
				expectError(t, http.StatusBadRequest, "", "/status")
			ns := applyBody("x", map[string]any{"size": 1})
			ns["namespace"] = "Team_A"
			apply(t, "", ns).expectError(t, http.StatusBadRequest, "invalid", "/namespace")
			ns["namespace"] = "apply-missing"
			apply(t, "", ns).expectError(t, http.StatusNotFound, "namespace_not_found", "/namespace")
			apply(t, "?dry_run=maybe", applyBody("x", map[string]any{"size": 1})).expectError(t, http.StatusBadRequest, "invalid", "/dry_run")
		})
	})

	t.Run("in a namespace", func(t *testing.T) {
		do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "apply-a" + run}).expect(t, http.StatusCreated)
		def := decode[resource.Resource](t, apply(t, "", applyBody("spaced"+run, map[string]any{"size": 1})).expect(t, http.StatusCreated))
		b := applyBody("spaced"+run, map[string]any{"size": 2})
		b["namespace"] = "apply-a" + run
		r := apply(t, "", b).expect(t, http.StatusCreated)
		inA := decode[resource.Resource](t, r)
		if r.Header.Get(HeaderApplyResult) != ApplyCreated || inA.Namespace != "apply-a"+run || inA.ID == def.ID || def.Namespace != "default" {
			t.Fatalf("apply into apply-a: %s %+v (default's: %+v)", r.Header.Get(HeaderApplyResult), inA, def)
		}
		r = apply(t, "", b).expect(t, http.StatusOK)
		if got := decode[resource.Resource](t, r); r.Header.Get(HeaderApplyResult) != ApplyUnchanged || got.ID != inA.ID {
			t.Fatalf("apply again into apply-a: %s %+v", r.Header.Get(HeaderApplyResult), got)
		}
		if got := decode[resource.Resource](t, do(t, http.MethodGet, "/api/v1/resources/"+strconv.FormatInt(def.ID, 10), nil).expect(t, http.StatusOK)); specOf(t, got)["size"] != float64(1) {
			t.Fatalf("the default namespace's resource changed: %s", got.Spec)
		}
	})

	t.Run("concurrent appliers", func(t *testing.T) {
		// Every applier succeeds, however many race: a lost race is applied
		// again against the newer state until the request's deadline.
		var wg sync.WaitGroup
		results := make([]response, 16)
		for i := range results {
			wg.Go(func() {
				results[i] = doNoFatal(http.MethodPost, "/api/v1/resources/apply", applyBody("raced"+run, map[string]any{"size": 1 + i%2}))
			})
		}
		wg.Wait()
		n := 0
		for _, r := range results {
			if r.Status != http.StatusOK && r.Status != http.StatusCreated {
				t.Fatalf("apply: %d %s", r.Status, r.Body)
			}
			if r.Header.Get(HeaderApplyResult) == ApplyCreated {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d applies created it", n)
		}
	})
}
