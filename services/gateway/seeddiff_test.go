package gateway

import (
	"net/http"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
)

// An empty schema is an object with any fields (the seed accepts it).
func TestEmptySchemaAccepted(t *testing.T) {
	typ := createType(t, "AnyFields", "v1", `{}`)
	if string(typ.Schema) != `{}` {
		t.Errorf("schema stored as %s", typ.Schema)
	}
	r := createResource(t, map[string]any{"name": "any", "resource_type_name": "AnyFields", "resource_type_version": "v1",
		"spec": map[string]any{"a": 1, "b": []any{"x", map[string]any{"c": true}}}})
	if got := specOf(t, r); got["a"] != float64(1) {
		t.Fatalf("spec %s", r.Spec)
	}
	got := decode[resource.Resource](t, do(t, http.MethodPatch, resourcePath(r), `{"spec":{"d":"e"}}`, "Content-Type", "application/merge-patch+json").expect(t, 200))
	if specOf(t, got)["d"] != "e" {
		t.Fatalf("spec %s", got.Spec)
	}
	// The top level still describes objects: a spec must be one.
	unchanged(t, func() {
		do(t, http.MethodPost, "/api/v1/resources", map[string]any{"name": "any-2", "resource_type_name": "AnyFields", "resource_type_version": "v1", "spec": []int{1}}).
			expectError(t, 400, "invalid", "/spec")
		do(t, http.MethodPost, "/api/v1/resource-types", `{"name":"NotObject","version":"v1","schema":{"type":"string"}}`).
			expectError(t, 400, "invalid_schema", "/schema/type")
	})
}
