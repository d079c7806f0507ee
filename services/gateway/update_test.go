package gateway

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
)

const gadgetSchema = `{"type":"object","required":["size"],"properties":{
  "size":{"type":"integer","minimum":1},
  "color":{"type":"string"},
  "shape":{"type":"object","properties":{"sides":{"type":"integer"},"name":{"type":"string"}}},
  "tier":{"type":"string","default":"basic"}}}`

var gadgetType sync.Once

func newGadget(t *testing.T, name string) (resource.Resource, string) {
	t.Helper()
	gadgetType.Do(func() { createType(t, "Gadget", "v1", gadgetSchema) })
	doc := createResource(t, map[string]any{
		"name": name, "resource_type_name": "Gadget", "resource_type_version": "v1",
		"spec":        map[string]any{"size": 1, "color": "red", "shape": map[string]any{"sides": 4, "name": "square"}},
		"labels":      map[string]string{"a": "1", "b": "2"},
		"annotations": map[string]string{"note": "hello"},
	})
	return doc, "/api/v1/resources/" + strconv.FormatInt(doc.ID, 10)
}

func mergePatch(t *testing.T, path, body string) response {
	t.Helper()
	return do(t, http.MethodPatch, path, body, "Content-Type", "application/merge-patch+json")
}

func TestPatch(t *testing.T) {
	doc, base := newGadget(t, "patched")

	t.Run("merge semantics", func(t *testing.T) {
		r := mergePatch(t, base, `{"spec":{"color":null,"size":2,"shape":{"name":null}},"labels":{"b":null,"c":"3"},"annotations":null}`).expect(t, http.StatusOK)
		got := decode[resource.Resource](t, r)
		spec := specOf(t, got)
		if _, ok := spec["color"]; ok || spec["size"] != float64(2) || spec["tier"] != "basic" {
			t.Errorf("spec %s", got.Spec)
		}
		if shape := spec["shape"].(map[string]any); shape["sides"] != float64(4) || shape["name"] != nil {
			t.Errorf("nested merge: %v", shape)
		}
		if !maps.Equal(got.Labels, map[string]string{"a": "1", "c": "3"}) || len(got.Annotations) != 0 {
			t.Errorf("labels %v annotations %v", got.Labels, got.Annotations)
		}
		if got.Generation != 2 || got.ResourceVersion <= doc.ResourceVersion {
			t.Errorf("generation %d, rv %d", got.Generation, got.ResourceVersion)
		}
		doc = got
	})
	t.Run("labels only keeps the generation", func(t *testing.T) {
		got := decode[resource.Resource](t, do(t, http.MethodPatch, base, `{"labels":{"d":"4"}}`).expect(t, http.StatusOK))
		if got.Generation != 2 || !maps.Equal(got.Labels, map[string]string{"a": "1", "c": "3", "d": "4"}) {
			t.Errorf("got %+v", got)
		}
		doc = got
	})
	t.Run("precondition", func(t *testing.T) {
		unchanged(t, func() {
			mergePatch(t, base, fmt.Sprintf(`{"resource_version":%d,"spec":{"size":9}}`, doc.ResourceVersion-1)).expectError(t, http.StatusConflict, "conflict")
		})
		got := decode[resource.Resource](t, mergePatch(t, base, fmt.Sprintf(`{"resource_version":%d,"spec":{"size":9}}`, doc.ResourceVersion)).expect(t, http.StatusOK))
		if specOf(t, got)["size"] != float64(9) || got.Generation != 3 {
			t.Errorf("got %s", got.Spec)
		}
		doc = got
	})
	t.Run("bad patches write nothing", func(t *testing.T) {
		unchanged(t, func() {
			mergePatch(t, base, `{"status":"ready"}`).expectError(t, 400, "invalid", "/status")
			mergePatch(t, base, `{"name":"x","spec":{}}`).expectError(t, 400, "invalid", "/name")
			mergePatch(t, base, `{"labels":{"a":1}}`).expectError(t, 400, "invalid", "/labels/a")
			mergePatch(t, base, `{"labels":"x"}`).expectError(t, 400, "invalid", "/labels")
			mergePatch(t, base, `{"labels":{"bad key!":"x"}}`).expectError(t, 400, "invalid", "/labels/bad key!")
			mergePatch(t, base, `{"spec":[1]}`).expectError(t, 400, "invalid", "/spec")
			mergePatch(t, base, `{"resource_version":"x"}`).expectError(t, 400, "invalid", "/resource_version")
			mergePatch(t, base, `{"spec":{"size":null}}`).expectError(t, 400, "validation_failed", "/spec/size")
			mergePatch(t, base, `{"spec":{"size":0}}`).expectError(t, 400, "validation_failed", "/spec/size")
			mergePatch(t, base, `{"spec":null}`).expectError(t, 400, "validation_failed", "/spec/size")
			mergePatch(t, base, `[{"op":"add"}]`).expectError(t, 400, "invalid")
			mergePatch(t, base, `{"spec":`).expectError(t, 400, "malformed_json")
			do(t, http.MethodPatch, base, `{"spec":{"size":3}}`, "Content-Type", "application/strategic-merge-patch+json").
				expectError(t, 415, "unsupported_media_type")
		})
	})
	t.Run("plain JSON content type", func(t *testing.T) {
		got := decode[resource.Resource](t, do(t, http.MethodPatch, base, `{"spec":{"color":"blue"}}`).expect(t, http.StatusOK))
		if specOf(t, got)["color"] != "blue" {
			t.Errorf("spec %s", got.Spec)
		}
	})
	t.Run("concurrent patches all land", func(t *testing.T) {
		// More patchers than a small fixed retry count would survive: each
		// lost race is merged again until the request's deadline.
		const concurrentPatchers = 12
		var wg sync.WaitGroup
		errs := make(chan string, concurrentPatchers)
		for i := range concurrentPatchers {
			wg.Go(func() {
				r := doNoFatal(http.MethodPatch, base, fmt.Sprintf(`{"labels":{"w%d":"x"}}`, i))
				if r.Status != http.StatusOK {
					errs <- fmt.Sprintf("patch %d: %d %s", i, r.Status, r.Body)
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		got := decode[resource.Resource](t, do(t, http.MethodGet, base, nil).expect(t, 200))
		for i := range concurrentPatchers {
			if got.Labels[fmt.Sprintf("w%d", i)] != "x" {
				t.Errorf("label w%d lost: %v", i, got.Labels)
			}
		}
	})
}

func TestPut(t *testing.T) {
	doc, base := newGadget(t, "put")
	t.Run("keeps labels and annotations when not given", func(t *testing.T) {
		got := decode[resource.Resource](t, do(t, http.MethodPut, base, `{"spec":{"size":5}}`).expect(t, http.StatusOK))
		if !maps.Equal(got.Labels, doc.Labels) || !maps.Equal(got.Annotations, doc.Annotations) {
			t.Errorf("labels %v annotations %v, want %v %v", got.Labels, got.Annotations, doc.Labels, doc.Annotations)
		}
		spec := specOf(t, got)
		if _, ok := spec["color"]; ok || spec["size"] != float64(5) || spec["tier"] != "basic" || got.Generation != 2 {
			t.Errorf("spec not replaced: %s (generation %d)", got.Spec, got.Generation)
		}
		doc = got
	})
	t.Run("same spec writes nothing", func(t *testing.T) {
		unchanged(t, func() {
			got := decode[resource.Resource](t, do(t, http.MethodPut, base, `{"spec":{"size":5}}`).expect(t, http.StatusOK))
			if got.ResourceVersion != doc.ResourceVersion {
				t.Errorf("rv %d, want %d", got.ResourceVersion, doc.ResourceVersion)
			}
		})
	})
	t.Run("replaces labels when given", func(t *testing.T) {
		got := decode[resource.Resource](t, do(t, http.MethodPut, base, `{"spec":{"size":5},"labels":{"only":"this"},"annotations":{}}`).expect(t, http.StatusOK))
		if !maps.Equal(got.Labels, map[string]string{"only": "this"}) || len(got.Annotations) != 0 || got.Generation != 2 {
			t.Errorf("got %+v", got)
		}
		doc = got
	})
	t.Run("stale resource_version", func(t *testing.T) {
		unchanged(t, func() {
			do(t, http.MethodPut, base, fmt.Sprintf(`{"spec":{"size":6},"resource_version":%d}`, doc.ResourceVersion-1)).expectError(t, http.StatusConflict, "conflict")
		})
		got := decode[resource.Resource](t, do(t, http.MethodPut, base, fmt.Sprintf(`{"spec":{"size":6},"resource_version":%d}`, doc.ResourceVersion)).expect(t, http.StatusOK))
		if got.Generation != 3 {
			t.Errorf("generation %d", got.Generation)
		}
		doc = got
	})
	t.Run("stale finalizer and delete preconditions", func(t *testing.T) {
		unchanged(t, func() {
			do(t, http.MethodPut, base+"/finalizers", fmt.Sprintf(`{"add":["x"],"resource_version":%d}`, doc.ResourceVersion-1)).expectError(t, http.StatusConflict, "conflict")
			do(t, http.MethodDelete, base+"?resource_version="+strconv.FormatInt(doc.ResourceVersion-1, 10), nil).expectError(t, http.StatusConflict, "conflict")
		})
		got := decode[resource.Resource](t, do(t, http.MethodDelete, base+"?resource_version="+strconv.FormatInt(doc.ResourceVersion, 10), nil).expect(t, http.StatusAccepted))
		if got.Status != "deleting" {
			t.Errorf("status %q", got.Status)
		}
		// Only the reconciler's finalizer: purged once its cleanup ran.
		cleanupAndWaitGone(t, got)
	})
}

func TestDryRun(t *testing.T) {
	doc, base := newGadget(t, "dry")
	unchanged(t, func() {
		r := do(t, http.MethodPost, "/api/v1/resources?dry_run=true", map[string]any{
			"name": "dry-new", "resource_type_name": "Gadget", "resource_type_version": "v1", "spec": map[string]any{"size": 2},
		}).expect(t, http.StatusCreated)
		got := decode[resource.Resource](t, r)
		if got.Name != "dry-new" || specOf(t, got)["tier"] != "basic" || got.Status != "pending" || r.Header.Get("Location") != "" {
			t.Errorf("dry-run create: %s", r.Body)
		}
		do(t, http.MethodPost, "/api/v1/resources?dry_run=true", map[string]any{
			"name": "dry-new", "resource_type_name": "Gadget", "resource_type_version": "v1", "spec": map[string]any{"size": 0},
		}).expectError(t, 400, "validation_failed", "/spec/size")

		got = decode[resource.Resource](t, do(t, http.MethodPut, base+"?dry_run=true", `{"spec":{"size":7},"labels":{}}`).expect(t, http.StatusOK))
		if got.Generation != 2 || specOf(t, got)["size"] != float64(7) || len(got.Labels) != 0 {
			t.Errorf("dry-run put: %+v", got)
		}
		got = decode[resource.Resource](t, mergePatch(t, base+"?dry_run=true", `{"spec":{"size":8}}`).expect(t, http.StatusOK))
		if got.Generation != 2 || specOf(t, got)["size"] != float64(8) {
			t.Errorf("dry-run patch: %+v", got)
		}
		got = decode[resource.Resource](t, do(t, http.MethodPut, base+"/finalizers?dry_run=true", `{"add":["x.io/y"]}`).expect(t, http.StatusOK))
		if len(got.Finalizers) != len(doc.Finalizers)+1 {
			t.Errorf("dry-run finalizers: %+v", got)
		}
		got = decode[resource.Resource](t, do(t, http.MethodDelete, base+"?dry_run=true", nil).expect(t, http.StatusAccepted))
		if got.Status != "deleting" {
			t.Errorf("dry-run delete: %+v", got)
		}
		do(t, http.MethodDelete, base+"?dry_run=false&resource_version=1", nil).expectError(t, http.StatusConflict, "conflict")

		typ := decode[resource.Type](t, do(t, http.MethodPost, "/api/v1/resource-types?dry_run=true", `{"name":"DryType","version":"v1","schema":{"type":"object"}}`).expect(t, http.StatusCreated))
		if typ.Name != "DryType" {
			t.Errorf("dry-run type: %+v", typ)
		}
		do(t, http.MethodGet, "/api/v1/resource-types/DryType/v1", nil).expectError(t, 404, "not_found")
		do(t, http.MethodPost, "/api/v1/resource-types?dry_run=true", `{"name":"DryType","version":"v1","schema":{"type":"nope"}}`).expectError(t, 400, "invalid_schema")
		gadget := decode[resource.Type](t, do(t, http.MethodGet, "/api/v1/resource-types/Gadget/v1", nil).expect(t, 200))
		gpath := "/api/v1/resource-types/" + strconv.FormatInt(gadget.ID, 10)
		typ = decode[resource.Type](t, do(t, http.MethodPut, gpath+"?dry_run=true", `{"description":"dry"}`).expect(t, http.StatusOK))
		if typ.Description != "dry" {
			t.Errorf("dry-run type update: %+v", typ)
		}
		do(t, http.MethodDelete, gpath+"?dry_run=true", nil).expectError(t, 409, "in_use")
	})
	got := decode[resource.Resource](t, do(t, http.MethodGet, base, nil).expect(t, 200))
	if got.ResourceVersion != doc.ResourceVersion || got.Status != "pending" || !slices.Equal(got.Finalizers, doc.Finalizers) {
		t.Errorf("dry runs changed the resource: %+v", got)
	}
}

// A schema change between admission's cached compile and the write makes
// the store answer schema_changed; the gateway admits again with the new
// schema.
func TestSchemaChangedRetry(t *testing.T) {
	typ := createType(t, "Evolving", "v1", `{"type":"object","properties":{"size":{"type":"integer","default":1}}}`)
	first := createResource(t, map[string]any{"name": "first", "resource_type_name": "Evolving", "resource_type_version": "v1", "spec": map[string]any{}})
	if specOf(t, first)["size"] != float64(1) {
		t.Fatalf("spec %s", first.Spec)
	}
	do(t, http.MethodPut, "/api/v1/resource-types/"+strconv.FormatInt(typ.ID, 10),
		`{"schema":{"type":"object","properties":{"size":{"type":"integer","default":2},"mode":{"type":"string","default":"fast"}}}}`).expect(t, 200)
	second := createResource(t, map[string]any{"name": "second", "resource_type_name": "Evolving", "resource_type_version": "v1", "spec": map[string]any{}})
	if s := specOf(t, second); s["size"] != float64(2) || s["mode"] != "fast" {
		t.Fatalf("created against the old schema: %s", second.Spec)
	}
	do(t, http.MethodPut, "/api/v1/resource-types/"+strconv.FormatInt(typ.ID, 10),
		`{"schema":{"type":"object","properties":{"size":{"type":"integer","default":2},"mode":{"type":"string","default":"slow"}}}}`).expect(t, 200)
	got := decode[resource.Resource](t, do(t, http.MethodPut, "/api/v1/resources/"+strconv.FormatInt(first.ID, 10), `{"spec":{"size":5}}`).expect(t, 200))
	if s := specOf(t, got); s["mode"] != "slow" {
		t.Fatalf("updated against the old schema: %s", got.Spec)
	}
}
