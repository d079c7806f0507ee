package gateway

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/subjects"
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

// DELETE takes propagation_policy (Background, Foreground, Orphan; any
// case): Foreground and Orphan hold the resource deleting with their
// finalizer; a bad value is a 400 naming the parameter and writes nothing;
// the queue input takes the same policy in its header.
func TestDeletePropagationPolicy(t *testing.T) {
	gadgetType.Do(func() { createType(t, "Gadget", "v1", gadgetSchema) })
	run := "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	gadget := func(name string) resource.Resource {
		return createResource(t, map[string]any{"name": name + run, "resource_type_name": "Gadget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}})
	}
	path := func(r resource.Resource) string { return "/api/v1/resources/" + strconv.FormatInt(r.ID, 10) }
	// What this test holds deleting goes at the end: identities are off
	// here, so anyone may remove the propagation finalizers.
	var held []resource.Resource
	t.Cleanup(func() {
		for _, r := range held {
			do(t, http.MethodPut, path(r)+"/finalizers", map[string]any{"remove": []string{lifecycle.FinalizerForeground, lifecycle.FinalizerOrphan}}).expect(t, http.StatusOK)
		}
	})

	bad := gadget("bad-policy")
	unchanged(t, func() {
		for _, v := range []string{"Cascade", "none", "true"} {
			e := do(t, http.MethodDelete, path(bad)+"?propagation_policy="+v, nil).expectError(t, http.StatusBadRequest, "invalid", "/propagation_policy")
			if !strings.Contains(e.Detail, "Background, Foreground or Orphan") {
				t.Fatalf("%s: detail %q", v, e.Detail)
			}
		}
		// A dry run with a policy stores nothing.
		d := decode[resource.Resource](t, do(t, http.MethodDelete, path(bad)+"?propagation_policy=Orphan&dry_run=true", nil).expect(t, http.StatusAccepted))
		if !slices.Contains(d.Finalizers, lifecycle.FinalizerOrphan) {
			t.Fatalf("dry run answer %+v", d)
		}
	})

	for i, c := range []struct{ value, finalizer string }{
		{"Foreground", lifecycle.FinalizerForeground}, {"foreground", lifecycle.FinalizerForeground}, {"Orphan", lifecycle.FinalizerOrphan},
	} {
		r := gadget("held-" + strconv.Itoa(i))
		d := decode[resource.Resource](t, do(t, http.MethodDelete, path(r)+"?propagation_policy="+c.value, nil).expect(t, http.StatusAccepted))
		stored := decode[resource.Resource](t, do(t, http.MethodGet, path(r), nil).expect(t, http.StatusOK))
		held = append(held, r)
		for _, got := range []resource.Resource{d, stored} {
			if got.Status != "deleting" || !slices.Contains(got.Finalizers, c.finalizer) {
				t.Fatalf("%s: %+v, want deleting with %s", c.value, got, c.finalizer)
			}
		}
	}
	bg := gadget("background")
	d := decode[resource.Resource](t, do(t, http.MethodDelete, path(bg)+"?propagation_policy=Background", nil).expect(t, http.StatusAccepted))
	if slices.Contains(d.Finalizers, lifecycle.FinalizerForeground) || slices.Contains(d.Finalizers, lifecycle.FinalizerOrphan) {
		t.Fatalf("background added a propagation finalizer: %+v", d)
	}

	// The queue input: the policy in its header.
	viaInput := gadget("by-input")
	unchanged(t, func() {
		a := request(t, subjects.InputRequestDelete, gadgetDocIn(viaInput.Name), subjects.InputPropagationPolicyHeader, "sideways")
		if a.Status != http.StatusBadRequest || !strings.Contains(string(a.Body), `"path":"/headers/`+subjects.InputPropagationPolicyHeader+`"`) {
			t.Fatalf("bad header: %d %s", a.Status, a.Body)
		}
	})
	a := request(t, subjects.InputRequestDelete, gadgetDocIn(viaInput.Name), subjects.InputPropagationPolicyHeader, "orphan")
	got := decode[resource.Resource](t, response{Body: a.Body})
	held = append(held, viaInput)
	if a.Status != http.StatusAccepted || got.Status != "deleting" || !slices.Contains(got.Finalizers, lifecycle.FinalizerOrphan) {
		t.Fatalf("orphan delete by the queue input: %d %s", a.Status, a.Body)
	}
}

// gadgetDocIn is a queue input document naming the Gadget name.
func gadgetDocIn(name string) string {
	return "kind: Resource\ntype: Gadget/v1\nmetadata:\n  name: " + name + "\nspec:\n  size: 1\n"
}
