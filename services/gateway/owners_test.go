package gateway

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
)

// Owner references are metadata every write may set: create, PUT and
// server-side apply replace them when given and keep them when not, a merge
// patch replaces the list (null drops it); the answer returns them; a bad
// one is refused with its path and nothing is written (issue 15: the tenant
// reconciler owns, takes over and releases children this way).
func TestOwnerReferencesOnEveryWrite(t *testing.T) {
	gadgetType.Do(func() { createType(t, "Gadget", "v1", gadgetSchema) })
	run := "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	a := createResource(t, map[string]any{"name": "owner-a" + run, "resource_type_name": "Gadget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}})
	b := createResource(t, map[string]any{"name": "owner-b" + run, "resource_type_name": "Gadget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}})
	ref := func(r resource.Resource) map[string]any {
		return map[string]any{"uid": r.UID, "resource_type_name": "Gadget", "resource_type_version": "v1", "name": r.Name, "controller": true}
	}
	owners := func(r resource.Resource) []string {
		var out []string
		for _, o := range r.OwnerReferences {
			out = append(out, o.UID)
		}
		return out
	}
	want := func(what string, r resource.Resource, uids ...string) {
		t.Helper()
		got := owners(r)
		stored := owners(decode[resource.Resource](t, do(t, http.MethodGet, "/api/v1/resources/"+strconv.FormatInt(r.ID, 10), nil).expect(t, http.StatusOK)))
		if len(got) != len(uids) || len(stored) != len(uids) {
			t.Fatalf("%s: answer %v, stored %v, want %v", what, got, stored, uids)
		}
		for i := range uids {
			if got[i] != uids[i] || stored[i] != uids[i] {
				t.Fatalf("%s: answer %v, stored %v, want %v", what, got, stored, uids)
			}
		}
	}
	child := createResource(t, map[string]any{"name": "child" + run, "resource_type_name": "Gadget", "resource_type_version": "v1",
		"spec": map[string]any{"size": 1}, "owner_references": []any{ref(a)}})
	want("create", child, a.UID)
	path := "/api/v1/resources/" + strconv.FormatInt(child.ID, 10)

	r := decode[resource.Resource](t, do(t, http.MethodPut, path, map[string]any{"spec": map[string]any{"size": 2}}).expect(t, http.StatusOK))
	want("PUT without owner_references keeps them", r, a.UID)
	r = decode[resource.Resource](t, do(t, http.MethodPut, path, map[string]any{"spec": map[string]any{"size": 2}, "owner_references": []any{ref(b)}}).expect(t, http.StatusOK))
	want("PUT replaces them", r, b.UID)
	if r.Generation != 2 {
		t.Fatalf("an owner change bumped the generation to %d", r.Generation)
	}
	r = decode[resource.Resource](t, do(t, http.MethodPatch, path, map[string]any{"owner_references": []any{ref(a), ref(b)}}, "Content-Type", mediaMergePatch).expect(t, http.StatusOK))
	want("PATCH replaces the list", r, a.UID, b.UID)
	r = decode[resource.Resource](t, do(t, http.MethodPatch, path, map[string]any{"spec": map[string]any{"size": 3}}, "Content-Type", mediaMergePatch).expect(t, http.StatusOK))
	want("PATCH without owner_references keeps them", r, a.UID, b.UID)
	r = decode[resource.Resource](t, do(t, http.MethodPatch, path, map[string]any{"owner_references": nil}, "Content-Type", mediaMergePatch).expect(t, http.StatusOK))
	want("PATCH null drops them", r)

	body := applyBody("child"+run, map[string]any{"size": 3})
	body["owner_references"] = []any{ref(a)}
	r = decode[resource.Resource](t, apply(t, "", body).expect(t, http.StatusOK))
	want("apply sets them", r, a.UID)
	delete(body, "owner_references")
	r = decode[resource.Resource](t, apply(t, "", body).expect(t, http.StatusOK))
	want("apply without owner_references keeps them", r, a.UID)
	body["owner_references"] = []any{}
	r = decode[resource.Resource](t, apply(t, "", body).expect(t, http.StatusOK))
	want("apply with [] drops them", r)
	fresh := applyBody("applied-child"+run, map[string]any{"size": 1})
	fresh["owner_references"] = []any{ref(b)}
	want("apply creates with them", decode[resource.Resource](t, apply(t, "", fresh).expect(t, http.StatusCreated)), b.UID)

	unchanged(t, func() {
		do(t, http.MethodPut, path, map[string]any{"spec": map[string]any{"size": 3}, "owner_references": []any{map[string]any{"name": "x"}}}).
			expectError(t, http.StatusBadRequest, "invalid", "/owner_references/0/uid")
		do(t, http.MethodPatch, path, map[string]any{"owner_references": "nope"}, "Content-Type", mediaMergePatch).
			expectError(t, http.StatusBadRequest, "invalid", "/owner_references")
		bad := applyBody("child"+run, map[string]any{"size": 3})
		bad["owner_references"] = []any{map[string]any{"uid": a.UID}}
		apply(t, "", bad).expectError(t, http.StatusBadRequest, "invalid", "/owner_references/0/resource_type_name")
	})
}
