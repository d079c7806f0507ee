package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestTenantTypesAdmission: the built-in tenant types exist from the first
// start; admission refuses, before anything is stored, a template whose
// registry is missing, whose dependIds form a cycle (named), or whose
// resource rendered with a sample row misses a field its target type
// requires (named by resource id and path), every problem of a template
// with several at once; a registry whose datasource
// host the outbound rule refuses; and any Tenant write that is not
// registry-sync's.
func TestTenantTypesAdmission(t *testing.T) {
	for _, n := range []string{"TenantRegistry", "TenantTemplate", "Tenant"} {
		do(t, http.MethodGet, "/api/v1/resource-types/"+n+"/v1", nil).expect(t, http.StatusOK)
		serveType(t, n, "v1")
	}
	createType(t, "WebApp", "v1", `{"type":"object","required":["image","replicas"],"properties":{"image":{"type":"string"},"replicas":{"type":"integer"}}}`)
	registry := map[string]any{"name": "customers", "resource_type_name": "TenantRegistry", "resource_type_version": "v1", "spec": map[string]any{
		"source":             map[string]any{"type": "mysql", "host": "127.0.0.1", "database": "crm", "table": "tenants", "passwordRef": map[string]any{"env": "REGISTRY_PW"}},
		"valueMappings":      map[string]any{"uid": "id", "hostOrUrl": "url", "activate": "active"},
		"extraValueMappings": map[string]any{"image": "image"},
	}}
	reg := createResource(t, registry)
	if spec := specOf(t, reg); spec["syncInterval"] != "1m" {
		t.Fatalf("defaults not applied: %v", spec)
	}
	bad := map[string]any{"name": "meta", "resource_type_name": "TenantRegistry", "resource_type_version": "v1", "spec": map[string]any{
		"source":        map[string]any{"type": "mysql", "host": "169.254.169.254", "database": "crm", "query": "SELECT 1"},
		"valueMappings": map[string]any{"uid": "id", "hostOrUrl": "url", "activate": "active"},
	}}
	do(t, http.MethodPost, "/api/v1/resources", bad).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/source/host")
	bad["spec"].(map[string]any)["source"] = map[string]any{"type": "mysql", "host": "127.0.0.1", "database": "crm", "table": "t",
		"usernameRef": map[string]any{"env": "REGISTRY_USER"}} // not granted
	e := do(t, http.MethodPost, "/api/v1/resources", bad).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/source/usernameRef")
	if !strings.Contains(e.Errors[0].Message, "not granted") || !strings.Contains(e.Errors[0].Message, "--credential-grants") {
		t.Fatalf("a credential not granted: %+v", e)
	}
	bad["spec"].(map[string]any)["source"] = map[string]any{"type": "postgres", "host": "127.0.0.1", "database": "crm",
		"query": "SELECT id, url, active FROM tenants; COMMIT; INSERT INTO proof(note) VALUES ('x'); SELECT 1"}
	e = do(t, http.MethodPost, "/api/v1/resources", bad).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/source/query")
	if !strings.Contains(e.Errors[0].Message, "more than one statement") {
		t.Fatalf("the COMMIT trick: %+v", e)
	}
	bad["spec"].(map[string]any)["source"] = map[string]any{"type": "mysql", "host": "db", "database": "crm"}
	do(t, http.MethodPost, "/api/v1/resources", bad).expect(t, http.StatusBadRequest) // neither table nor query
	bad["spec"] = map[string]any{"source": map[string]any{"type": "mysql", "host": "db", "database": "crm", "table": "t"}, "valueMappings": map[string]any{"uid": "id"}}
	do(t, http.MethodPost, "/api/v1/resources", bad).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/valueMappings/activate", "/spec/valueMappings/hostOrUrl")

	res := func(id string, depends []string, spec map[string]any) map[string]any {
		r := map[string]any{"id": id, "typeName": "WebApp", "typeVersion": "v1", "nameTemplate": "{{ .uid }}-" + id, "spec": spec}
		if depends != nil {
			r["dependIds"] = depends
		}
		return r
	}
	good := map[string]any{"image": "{{ default \"nginx\" .image }}", "replicas": 1}
	tpl := func(name, registry string, rs ...map[string]any) map[string]any {
		return map[string]any{"name": name, "resource_type_name": "TenantTemplate", "resource_type_version": "v1",
			"spec": map[string]any{"registryId": registry, "resources": rs}}
	}
	created := createResource(t, tpl("web", "customers", res("app", nil, good), res("db", []string{"app"}, good)))
	var spec struct {
		Resources []map[string]any `json:"resources"`
	}
	decodeInto(t, created.Spec, &spec)
	if spec.Resources[0]["creationPolicy"] != "WhenNeeded" || spec.Resources[0]["waitForReady"] != true || spec.Resources[0]["timeoutSeconds"] != float64(300) {
		t.Fatalf("TResource defaults: %v", spec.Resources[0])
	}

	e = do(t, http.MethodPost, "/api/v1/resources", tpl("cyclic", "customers", res("a", []string{"c"}, good), res("b", []string{"a"}, good), res("c", []string{"b"}, good))).
		expectError(t, http.StatusBadRequest, "validation_failed", "/spec/resources/0/dependIds")
	if !strings.Contains(e.Errors[0].Message, "dependency cycle: a -> c -> b -> a") {
		t.Fatalf("cycle not named: %+v", e)
	}
	e = do(t, http.MethodPost, "/api/v1/resources", tpl("missing", "customers", res("app", nil, map[string]any{"image": "x"}))).
		expectError(t, http.StatusBadRequest, "validation_failed", "/spec/resources/0/spec/replicas")
	if !strings.Contains(e.Errors[0].Message, `resource "app"`) {
		t.Fatalf("resource id not named: %+v", e)
	}
	do(t, http.MethodPost, "/api/v1/resources", tpl("orphan", "nope", res("app", nil, good))).
		expectError(t, http.StatusBadRequest, "validation_failed", "/spec/registryId")
	// A template references the registry of its own namespace.
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "tenants-other"}).expect(t, http.StatusCreated)
	elsewhere := tpl("elsewhere", "customers", res("app", nil, good))
	elsewhere["namespace"] = "tenants-other"
	do(t, http.MethodPost, "/api/v1/resources", elsewhere).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/registryId")
	do(t, http.MethodPost, "/api/v1/resources", tpl("dup", "customers", res("app", nil, good), res("app", nil, good))).
		expectError(t, http.StatusBadRequest, "validation_failed", "/spec/resources/1/id")
	do(t, http.MethodPost, "/api/v1/resources", tpl("parse", "customers", map[string]any{"id": "x", "typeName": "WebApp", "typeVersion": "v1",
		"nameTemplate": "{{ .uid", "spec": good})).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/resources/0/nameTemplate")
	do(t, http.MethodPost, "/api/v1/resources", tpl("typo", "customers", res("app", nil, map[string]any{"image": "{{ .imag }}", "replicas": 1}))).
		expectError(t, http.StatusBadRequest, "validation_failed", "/spec/resources/0/spec/image")
	// Several bad resources in one document: every problem is reported at
	// its path, once (a text that does not parse is not reported again by
	// its render), as the schema validator reports every field.
	e = do(t, http.MethodPost, "/api/v1/resources", tpl("many", "customers",
		map[string]any{"id": "a", "typeName": "WebApp", "typeVersion": "v1", "nameTemplate": "{{ .uid", "spec": good},
		map[string]any{"id": "b", "typeName": "WebApp", "typeVersion": "v1", "nameTemplate": "{{ .uid }}-b", "dependIds": []string{"nope"},
			"labelsTemplate": map[string]any{"tier": "{{ .tierr }}"}, "spec": map[string]any{"image": "{{ .imag }}", "replicas": 1}},
		map[string]any{"id": "c", "typeName": "Nope", "typeVersion": "v1", "nameTemplate": "{{ .uid }}-c", "spec": good},
		res("d", nil, map[string]any{"image": "x"}),
	)).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/resources/0/nameTemplate", "/spec/resources/1/dependIds/0",
		"/spec/resources/1/labelsTemplate/tier", "/spec/resources/1/spec/image", "/spec/resources/2/typeName", "/spec/resources/3/spec/replicas")
	if len(e.Errors) != 6 || !strings.Contains(e.Detail, "6 problems") {
		t.Fatalf("want the 6 problems, each once: %+v", e)
	}
	if n := countResources(t, "TenantTemplate"); n != 1 {
		t.Fatalf("%d templates stored", n)
	}
	// Tenants are registry-sync's.
	do(t, http.MethodPost, "/api/v1/resources", map[string]any{"name": "x", "resource_type_name": "Tenant", "resource_type_version": "v1",
		"spec": map[string]any{"registryId": "customers", "templateRef": "web", "uid": "x", "values": map[string]any{}, "resources": []any{}}}).
		expectError(t, http.StatusForbidden, "denied")
}

func decodeInto(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}
