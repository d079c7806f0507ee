package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestHttpSourceAdmission: HttpSource/v1 exists from the first start with
// its defaults; admission refuses, before anything is stored and naming
// the field, a URL with user info or one the outbound rule refuses, an
// inline header value, a reserved header, an unknown or built-in target,
// two name mappings or none, a template that does not parse, a bad
// pointer, the reserved label, all of them when several are wrong at once;
// and an update that changes the target.
func TestHttpSourceAdmission(t *testing.T) {
	do(t, http.MethodGet, "/api/v1/resource-types/HttpSource/v1", nil).expect(t, http.StatusOK)
	serveType(t, "HttpSource", "v1")
	createType(t, "Feed", "v1", `{"type":"object","properties":{"image":{"type":"string"},"replicas":{"type":"integer","default":1}}}`)
	createType(t, "Other", "v1", `{"type":"object"}`)
	body := func(edit func(spec map[string]any)) map[string]any {
		spec := map[string]any{
			"url": "http://127.0.0.1:9/items", "target": map[string]any{"typeName": "Feed", "typeVersion": "v1"},
			"namePointer": "/id", "spec": map[string]any{"image": "{{ .image }}"},
			"headers": map[string]any{"Authorization": map[string]any{"env": "NO8S_REGISTRY_TOKEN"}},
		}
		if edit != nil {
			edit(spec)
		}
		return map[string]any{"name": "feed", "resource_type_name": "HttpSource", "resource_type_version": "v1", "spec": spec}
	}
	for _, c := range []struct {
		edit func(spec map[string]any)
		path string
		msg  string
	}{
		{func(s map[string]any) { s["url"] = "https://u:p@example.com/" }, "/spec/url", "user info"},
		{func(s map[string]any) { s["url"] = "http://169.254.169.254/" }, "/spec/url", "link-local"},
		{func(s map[string]any) { s["url"] = "ftp://example.com/" }, "/spec/url", ""},
		{func(s map[string]any) { s["headers"] = map[string]any{"Authorization": "Bearer inline"} }, "/spec/headers/Authorization", ""},
		{func(s map[string]any) { s["headers"] = map[string]any{"If-None-Match": map[string]any{"env": "X"}} }, "/spec/headers/If-None-Match", "set by the poll"},
		{func(s map[string]any) { s["target"] = map[string]any{"typeName": "Nope", "typeVersion": "v1"} }, "/spec/target", "does not exist"},
		{func(s map[string]any) { s["target"] = map[string]any{"typeName": "Tenant", "typeVersion": "v1"} }, "/spec/target/typeName", "built-in"},
		{func(s map[string]any) { s["nameTemplate"] = "{{ .id }}" }, "/spec/nameTemplate", "not both"},
		{func(s map[string]any) { delete(s, "namePointer") }, "/spec/nameTemplate", "is required"},
		{func(s map[string]any) { s["spec"] = map[string]any{"image": "{{ .image"} }, "/spec/spec/image", "does not parse"},
		{func(s map[string]any) { s["itemsPointer"] = "/a~x" }, "/spec/itemsPointer", "~"},
		{func(s map[string]any) { s["labels"] = map[string]any{"httpsource.no8s.io/source": "x"} }, "/spec/labels/httpsource.no8s.io~1source", "registry-sync"},
		{func(s map[string]any) { s["timeoutSeconds"] = 600 }, "/spec/timeoutSeconds", ""},
		{func(s map[string]any) { s["url"] = "http://127.0.0.1:10/items" }, "/spec/headers/Authorization", "docs/design/tenants.md#credential-grants"}, // granted for another origin
	} {
		e := do(t, http.MethodPost, "/api/v1/resources", body(c.edit)).expectError(t, http.StatusBadRequest, "validation_failed", c.path)
		if c.msg != "" && !strings.Contains(fmt.Sprint(e.Errors), c.msg) {
			t.Errorf("%s: %+v, want %q", c.path, e.Errors, c.msg)
		}
	}
	// Several problems at once: every one is reported.
	e := do(t, http.MethodPost, "/api/v1/resources", body(func(s map[string]any) {
		s["url"] = "http://169.254.169.254/"
		s["itemsPointer"] = "/a~x"
		s["target"] = map[string]any{"typeName": "Nope", "typeVersion": "v1"}
		s["headers"] = map[string]any{"If-None-Match": map[string]any{"env": "X"}}
	})).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/url", "/spec/itemsPointer", "/spec/target", "/spec/headers/If-None-Match")
	if len(e.Errors) != 4 || !strings.Contains(e.Detail, "4 problems") {
		t.Errorf("want the 4 problems: %+v", e)
	}
	// A header refused by the static checks is not checked again for its grant.
	e = do(t, http.MethodPost, "/api/v1/resources", body(func(s map[string]any) {
		s["headers"] = map[string]any{"Authorization": "Bearer inline"}
	})).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/headers/Authorization")
	if len(e.Errors) != 1 {
		t.Errorf("want one problem: %+v", e)
	}
	if n := countResources(t, "HttpSource"); n != 0 {
		t.Fatalf("%d sources stored by refused requests", n)
	}
	created := createResource(t, body(nil))
	spec := specOf(t, created)
	if spec["interval"] != "1m" || spec["timeoutSeconds"] != float64(10) || spec["itemsPointer"] != "" {
		t.Fatalf("defaults not applied: %v", spec)
	}
	do(t, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", created.ID), map[string]any{"spec": map[string]any{
		"target": map[string]any{"typeName": "Other", "typeVersion": "v1"}}}).expectError(t, http.StatusBadRequest, "validation_failed", "/spec/target")
	do(t, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", created.ID), map[string]any{"spec": map[string]any{"interval": "5m"}}).expect(t, http.StatusOK)
}
