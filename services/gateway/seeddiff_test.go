package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
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

// PUT of an admission webhook updates the fields it gives and keeps the
// rest (the seed); PATCH takes a JSON merge patch. Refused changes write
// nothing.
func TestWebhookPartialUpdateAndPatch(t *testing.T) {
	w := register(t, map[string]any{
		"name": "partial.example.com", "webhook_url": "http://127.0.0.1:1/admit", "webhook_type": "validating",
		"operations": []string{"CREATE", "UPDATE"}, "resource_type_name": "PartialTarget", "resource_type_version": "v1",
		"ordering": 5, "timeout_seconds": 7,
	})
	path := "/api/v1/admission-webhooks/" + strconv.FormatInt(w.ID, 10)
	get := func() webhookJSON { return decode[webhookJSON](t, do(t, http.MethodGet, path, nil).expect(t, 200)) }

	up := decode[webhookJSON](t, do(t, http.MethodPut, path, `{"failure_policy":"Ignore"}`).expect(t, 200))
	if up.FailurePolicy != "Ignore" || up.Name != w.Name || up.WebhookURL != w.WebhookURL || up.WebhookType != "validating" ||
		!slices.Equal(up.Operations, []string{"CREATE", "UPDATE"}) || up.Ordering != 5 || up.TimeoutSeconds != 7 ||
		up.ResourceTypeName == nil || *up.ResourceTypeName != "PartialTarget" || up.ResourceVersion <= w.ResourceVersion {
		t.Fatalf("partial PUT: %+v", up)
	}
	up = decode[webhookJSON](t, do(t, http.MethodPut, path, `{"resource_type_version":null,"operations":["DELETE"]}`).expect(t, 200))
	if up.ResourceTypeVersion != nil || !slices.Equal(up.Operations, []string{"DELETE"}) || up.FailurePolicy != "Ignore" || up.Ordering != 5 {
		t.Fatalf("PUT clearing a field: %+v", up)
	}
	// A whole GET body still works, with resource_version as a precondition.
	var back map[string]any
	_ = json.Unmarshal(do(t, http.MethodGet, path, nil).Body, &back)
	back["ordering"] = 6
	up = decode[webhookJSON](t, do(t, http.MethodPut, path, back).expect(t, 200))
	if up.Ordering != 6 {
		t.Fatalf("full PUT: %+v", up)
	}

	pm := decode[webhookJSON](t, do(t, http.MethodPatch, path, `{"ordering":9,"resource_type_name":null,"timeout_seconds":3}`,
		"Content-Type", "application/merge-patch+json").expect(t, 200))
	if pm.Ordering != 9 || pm.ResourceTypeName != nil || pm.TimeoutSeconds != 3 || pm.FailurePolicy != "Ignore" || pm.Name != w.Name {
		t.Fatalf("PATCH: %+v", pm)
	}
	if dry := decode[webhookJSON](t, do(t, http.MethodPatch, path+"?dry_run=true", `{"ordering":1}`, "Content-Type", "application/merge-patch+json").expect(t, 200)); dry.Ordering != 1 {
		t.Fatalf("dry-run PATCH answered %+v", dry)
	}

	before := get()
	for _, tc := range []struct {
		method, body, ct string
		status           int
		code             string
		paths            []string
	}{
		{http.MethodPut, `{"name":""}`, "", 400, "invalid", []string{"/name"}},
		{http.MethodPut, `{"webhook_type":"sideways","timeout_seconds":0}`, "", 400, "invalid", []string{"/webhook_type", "/timeout_seconds"}},
		{http.MethodPut, `{"bogus":1}`, "", 400, "invalid", []string{"/bogus"}},
		{http.MethodPut, `{"ordering":"x"}`, "", 400, "invalid", []string{"/ordering"}},
		{http.MethodPut, `{"id":999999,"ordering":1}`, "", 400, "invalid", []string{"/id"}},
		{http.MethodPut, `{"resource_version":1,"ordering":1}`, "", 409, "conflict", nil},
		{http.MethodPut, `[]`, "", 400, "invalid", nil},
		{http.MethodPatch, `{"name":null}`, "application/merge-patch+json", 400, "invalid", []string{"/name"}},
		{http.MethodPatch, `{"operations":"CREATE"}`, "application/merge-patch+json", 400, "invalid", []string{"/operations"}},
		{http.MethodPatch, `{"ordering":1,"ordering":2}`, "application/merge-patch+json", 400, "malformed_json", []string{"/ordering"}},
		{http.MethodPatch, `{"ordering":1}`, "text/plain", 415, "unsupported_media_type", nil},
		{http.MethodPatch, `{"resource_version":1,"ordering":1}`, "application/merge-patch+json", 409, "conflict", nil},
	} {
		var headers []string
		if tc.ct != "" {
			headers = []string{"Content-Type", tc.ct}
		}
		do(t, tc.method, path, tc.body, headers...).expectError(t, tc.status, tc.code, tc.paths...)
	}
	if after := get(); after.ResourceVersion != before.ResourceVersion || after.Ordering != before.Ordering {
		t.Fatalf("a refused change was written: %+v → %+v", before, after)
	}
	do(t, http.MethodPatch, "/api/v1/admission-webhooks/999999", `{"ordering":1}`, "Content-Type", "application/merge-patch+json").expectError(t, 404, "not_found")
	do(t, http.MethodPut, "/api/v1/admission-webhooks/999999", `{"ordering":1}`).expectError(t, 404, "not_found")
	waitWebhooks(t)
}
