package gateway

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
)

// looseSchema types only "name", so any other spec field is stored as sent.
const looseSchema = `{"type":"object","properties":{"name":{"type":"string"}}}`

func resourcePath(r resource.Resource) string {
	return "/api/v1/resources/" + strconv.FormatInt(r.ID, 10)
}

// A NUL anywhere in a body, a path or a query is refused with its location;
// nothing is written.
func TestNULIsRefused(t *testing.T) {
	createType(t, "NulCheck", "v1", looseSchema)
	existing := createResource(t, map[string]any{"name": "nul-existing", "resource_type_name": "NulCheck", "resource_type_version": "v1", "spec": map[string]any{}})
	base := resourcePath(existing)
	typeID := strconv.FormatInt(decode[resource.Type](t, do(t, http.MethodGet, "/api/v1/resource-types/NulCheck/v1", nil).expect(t, 200)).ID, 10)
	unchanged(t, func() {
		do(t, http.MethodPost, "/api/v1/resources", `{"name":"nul-a","resource_type_name":"NulCheck","resource_type_version":"v1","spec":{"s":"a\u0000b"}}`).
			expectError(t, 400, "invalid", "/spec/s")
		do(t, http.MethodPost, "/api/v1/resources", `{"name":"nul-a","resource_type_name":"NulCheck","resource_type_version":"v1","spec":{"deep":[{"x":"\u0000"}]}}`).
			expectError(t, 400, "invalid", "/spec/deep/0/x")
		do(t, http.MethodPost, "/api/v1/resources", `{"name":"nul-a","resource_type_name":"NulCheck","resource_type_version":"v1","spec":{},"annotations":{"note":"x\u0000"}}`).
			expectError(t, 400, "invalid", "/annotations/note")
		do(t, http.MethodPut, base, `{"spec":{"s":"\u0000"}}`).expectError(t, 400, "invalid", "/spec/s")
		do(t, http.MethodPatch, base, `{"spec":{"s":"\u0000"}}`, "Content-Type", "application/merge-patch+json").expectError(t, 400, "invalid", "/spec/s")
		do(t, http.MethodPatch, base, `{"annotations":{"a":"\u0000"}}`, "Content-Type", "application/merge-patch+json").expectError(t, 400, "invalid", "/annotations/a")
		do(t, http.MethodPost, "/api/v1/resource-types", `{"name":"NulType","version":"v1","description":"a\u0000","schema":{"type":"object"}}`).
			expectError(t, 400, "invalid", "/description")
		do(t, http.MethodPost, "/api/v1/resource-types", `{"name":"NulType","version":"v1","schema":{"type":"object","properties":{"a":{"type":"string","default":"\u0000"}}}}`).
			expectError(t, 400, "invalid", "/schema/properties/a/default")
		do(t, http.MethodPut, "/api/v1/resource-types/"+typeID, `{"description":"\u0000"}`).expectError(t, 400, "invalid", "/description")

		do(t, http.MethodGet, "/api/v1/resources?label_selector=app%3Dx%00y", nil).expectError(t, 400, "invalid", "/label_selector")
		do(t, http.MethodGet, "/api/v1/resources?resource_type=Nul%00Check", nil).expectError(t, 400, "invalid", "/resource_type")
		do(t, http.MethodGet, "/api/v1/resource-types?name=Nul%00", nil).expectError(t, 400, "invalid", "/name")
		do(t, http.MethodGet, "/api/v1/resources/by-name/NulCheck/v1/nul%00existing", nil).expectError(t, 400, "invalid", "/name")
		do(t, http.MethodGet, "/api/v1/resource-types/Nul%00Check/v1", nil).expectError(t, 400, "invalid", "/id")
		do(t, http.MethodGet, "/api/v1/resources?label_selector=%ff", nil).expectError(t, 400, "invalid", "/label_selector")
	})
	if n := countResources(t, "NulCheck"); n != 1 {
		t.Fatalf("%d NulCheck resources, want 1", n)
	}
}

// Numbers a double cannot hold are refused; numbers it can hold are stored
// so that the resource stays readable, patchable, replaceable and deletable.
func TestNumberRange(t *testing.T) {
	createType(t, "NumberCheck", "v1", looseSchema)
	unchanged(t, func() {
		for _, n := range []string{"1e400", "-1e400", "1e-400", "2e-324", "0e-2000"} {
			do(t, http.MethodPost, "/api/v1/resources", `{"name":"num-a","resource_type_name":"NumberCheck","resource_type_version":"v1","spec":{"n":`+n+`}}`).
				expectError(t, 400, "invalid", "/spec/n")
		}
	})
	for i, n := range []string{"1e300", "-1.7976931348623157e308", "5e-324", "1.5e-300"} {
		name := fmt.Sprintf("num-ok-%d", i)
		r := do(t, http.MethodPost, "/api/v1/resources", `{"name":"`+name+`","resource_type_name":"NumberCheck","resource_type_version":"v1","spec":{"n":`+n+`}}`).expect(t, 201)
		doc := decode[resource.Resource](t, r)
		path := resourcePath(doc)
		do(t, http.MethodGet, path, nil).expect(t, 200)
		got := decode[resource.Resource](t, do(t, http.MethodPatch, path, `{"spec":{"m":1}}`, "Content-Type", "application/merge-patch+json").expect(t, 200))
		if got.Generation != 2 {
			t.Errorf("%s: patch: generation %d", n, got.Generation)
		}
		got = decode[resource.Resource](t, do(t, http.MethodPut, path, `{"spec":{"n":`+n+`}}`).expect(t, 200))
		if got.Generation != 3 {
			t.Errorf("%s: put: generation %d", n, got.Generation)
		}
		do(t, http.MethodDelete, path, nil).expect(t, 202)
		cleanupAndWaitGone(t, doc)
	}
}

// A schema with numbers that PostgreSQL writes back in another notation
// still compiles once stored: creates of its type work.
func TestSchemaNumbersSurviveStorage(t *testing.T) {
	for i, schema := range []string{
		`{"type":"object","properties":{"n":{"type":"number","maximum":1e300}}}`,
		`{"type":"object","properties":{"n":{"type":"number","multipleOf":1e-300}}}`,
		`{"type":"object","properties":{"n":{"type":"number","minimum":-1.5e200,"default":2.5e-5}}}`,
	} {
		name := fmt.Sprintf("SchemaNumbers%d", i)
		createType(t, name, "v1", schema)
		r := do(t, http.MethodPost, "/api/v1/resources", map[string]any{"name": "a", "resource_type_name": name, "resource_type_version": "v1", "spec": map[string]any{"n": 0}})
		r.expect(t, 201)
		do(t, http.MethodPost, "/api/v1/resources", map[string]any{"name": "b", "resource_type_name": name, "resource_type_version": "v1", "spec": map[string]any{"n": "x"}}).
			expectError(t, 400, "validation_failed", "/spec/n")
	}
	unchanged(t, func() {
		do(t, http.MethodPost, "/api/v1/resource-types", `{"name":"SchemaNumbersBad","version":"v1","schema":{"type":"object","properties":{"n":{"maximum":1e400}}}}`).
			expectError(t, 400, "", "/schema/properties/n/maximum")
	})
}

// Invalid UTF-8, lone surrogates and duplicate keys are refused in every
// body, naming the location; nothing is written.
func TestStrictJSONBodies(t *testing.T) {
	createType(t, "StrictCheck", "v1", looseSchema)
	existing := createResource(t, map[string]any{"name": "strict-existing", "resource_type_name": "StrictCheck", "resource_type_version": "v1", "spec": map[string]any{"n": 1}})
	base := resourcePath(existing)
	typeID := strconv.FormatInt(decode[resource.Type](t, do(t, http.MethodGet, "/api/v1/resource-types/StrictCheck/v1", nil).expect(t, 200)).ID, 10)
	hookBefore := do(t, http.MethodGet, "/api/v1/admission-webhooks", nil).expect(t, 200).Body
	create := func(spec string) string {
		return `{"name":"strict-a","resource_type_name":"StrictCheck","resource_type_version":"v1","spec":` + spec + `}`
	}
	unchanged(t, func() {
		do(t, http.MethodPost, "/api/v1/resources", create(`{"s":"\ud800"}`)).expectError(t, 400, "malformed_json", "/spec/s")
		do(t, http.MethodPost, "/api/v1/resources", create(`{"s":"\udc00x"}`)).expectError(t, 400, "malformed_json", "/spec/s")
		do(t, http.MethodPost, "/api/v1/resources", create("{\"s\":\"a\xffb\"}")).expectError(t, 400, "malformed_json", "/spec/s")
		do(t, http.MethodPost, "/api/v1/resources", create(`{"n":1,"n":2}`)).expectError(t, 400, "malformed_json", "/spec/n")
		do(t, http.MethodPost, "/api/v1/resources", `{"name":"strict-a","name":"strict-b","resource_type_name":"StrictCheck","resource_type_version":"v1","spec":{}}`).
			expectError(t, 400, "malformed_json", "/name")
		do(t, http.MethodPost, "/api/v1/resources", `{"name":"strict-a","resource_type_name":"StrictCheck","resource_type_version":"v1","spec":{},"labels":{"a":"x","a":"y"}}`).
			expectError(t, 400, "malformed_json", "/labels/a")
		do(t, http.MethodPut, base, `{"spec":{"n":1,"n":2}}`).expectError(t, 400, "malformed_json", "/spec/n")
		do(t, http.MethodPut, base, `{"spec":{"s":"\ud83d"}}`).expectError(t, 400, "malformed_json", "/spec/s")
		do(t, http.MethodPatch, base, `{"spec":{"n":1,"n":2}}`, "Content-Type", "application/merge-patch+json").expectError(t, 400, "malformed_json", "/spec/n")
		do(t, http.MethodPatch, base, "{\"spec\":{\"s\":\"\xc3\"}}", "Content-Type", "application/merge-patch+json").expectError(t, 400, "malformed_json", "/spec/s")
		do(t, http.MethodPut, base+"/finalizers", `{"add":["a"],"add":["b"]}`).expectError(t, 400, "malformed_json", "/add")
		do(t, http.MethodPost, "/api/v1/resource-types", `{"name":"StrictType","version":"v1","schema":{"type":"object","type":"string"}}`).
			expectError(t, 400, "malformed_json", "/schema/type")
		do(t, http.MethodPost, "/api/v1/resource-types", `{"name":"StrictType","version":"v1","description":"\udfff","schema":{"type":"object"}}`).
			expectError(t, 400, "malformed_json", "/description")
		do(t, http.MethodPut, "/api/v1/resource-types/"+typeID, `{"description":"a","description":"b"}`).expectError(t, 400, "malformed_json", "/description")
		do(t, http.MethodPost, "/api/v1/admission-webhooks", `{"name":"strict.example.com","name":"x.example.com","webhook_url":"http://127.0.0.1:1/x","webhook_type":"validating","operations":["CREATE"]}`).
			expectError(t, 400, "malformed_json", "/name")
	})
	if after := do(t, http.MethodGet, "/api/v1/admission-webhooks", nil).expect(t, 200).Body; string(after) != string(hookBefore) {
		t.Fatalf("webhooks changed:\n%s\n%s", hookBefore, after)
	}
	got := decode[resource.Resource](t, do(t, http.MethodGet, base, nil).expect(t, 200))
	if string(got.Spec) != `{"n":1}` || strings.ContainsRune(string(got.Spec), '\uFFFD') {
		t.Fatalf("spec %s", got.Spec)
	}
}

// An equal spec in another notation is no change: no new generation or
// revision.
func TestEqualSpecInOtherNotation(t *testing.T) {
	createType(t, "NotationCheck", "v1", looseSchema)
	r := createResource(t, map[string]any{"name": "notation", "resource_type_name": "NotationCheck", "resource_type_version": "v1",
		"spec": map[string]any{"n": 100, "f": 0.5, "list": []any{1, 2}}})
	path := resourcePath(r)
	unchanged(t, func() {
		for _, body := range []string{
			`{"spec":{"n":1e2,"f":0.5,"list":[1,2]}}`,
			`{"spec":{"list":[1.0,2E0],"f":5e-1,"n":100.00}}`,
		} {
			got := decode[resource.Resource](t, do(t, http.MethodPut, path, body).expect(t, 200))
			if got.Generation != r.Generation || got.ResourceVersion != r.ResourceVersion {
				t.Errorf("PUT %s: generation %d→%d, resource_version %d→%d", body, r.Generation, got.Generation, r.ResourceVersion, got.ResourceVersion)
			}
		}
		got := decode[resource.Resource](t, do(t, http.MethodPatch, path, `{"spec":{"n":10e1}}`, "Content-Type", "application/merge-patch+json").expect(t, 200))
		if got.Generation != r.Generation || got.ResourceVersion != r.ResourceVersion {
			t.Errorf("PATCH: generation %d→%d", r.Generation, got.Generation)
		}
	})
	got := decode[resource.Resource](t, do(t, http.MethodPut, path, `{"spec":{"n":101,"f":0.5,"list":[1,2]}}`).expect(t, 200))
	if got.Generation != r.Generation+1 {
		t.Fatalf("a real change: generation %d", got.Generation)
	}
}
