package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestBadInputWritesNothing sends each kind of bad input through the real
// gateway and checks the status, the error code, the field paths, and that
// no row changed in PostgreSQL.
func TestBadInputWritesNothing(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	curl(t, base, seedCreateType)
	// The noop reconciler serves DatabaseCluster/v1 (the live-reconciler
	// rule); no scheduler runs, so nothing changes behind the test's back.
	c.startReconciler(c.storeAddrs[0], "DatabaseCluster/v1")
	if r := do(t, "POST", base+"/api/v1/resource-types", `{"name":"Orphan","version":"v1","schema":{"type":"object"}}`); r.status != 201 {
		t.Fatalf("create Orphan: %d %s", r.status, r.body)
	}
	if r := curl(t, base, seedCreateResource); r.status != 201 {
		t.Fatalf("create production-pg: %d %s", r.status, r.body)
	}
	// A resource that is being deleted (held by a finalizer).
	held := do(t, "POST", base+"/api/v1/resources", `{"name":"held","resource_type_name":"DatabaseCluster","resource_type_version":"v1",
		"finalizers":["example.com/hold"],"spec":{"engine":"mysql","engine_version":"8","instance_class":"db.small","storage_gb":10}}`)
	if held.status != 201 {
		t.Fatalf("create held: %d %s", held.status, held.body)
	}
	heldID := int64(held.json(t)["id"].(float64))
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", base, heldID), nil); r.status != 202 {
		t.Fatalf("delete held: %d %s", r.status, r.body)
	}

	spec := func(fields string) string {
		return `{"name":"bad-one","resource_type_name":"DatabaseCluster","resource_type_version":"v1","spec":{` + fields + `}}`
	}
	valid := `"engine":"postgres","engine_version":"16","instance_class":"db.small","storage_gb":20`
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
		paths                    []string
	}{
		{"wrong type", "POST", "/api/v1/resources", spec(`"engine":"postgres","engine_version":"16","instance_class":"db.small","storage_gb":"lots"`), 400, "validation_failed", []string{"/spec/storage_gb"}},
		{"enum miss", "POST", "/api/v1/resources", spec(`"engine":"oracle","engine_version":"16","instance_class":"db.small","storage_gb":20`), 400, "validation_failed", []string{"/spec/engine"}},
		{"below minimum", "POST", "/api/v1/resources", spec(`"engine":"postgres","engine_version":"16","instance_class":"db.small","storage_gb":5`), 400, "validation_failed", []string{"/spec/storage_gb"}},
		{"missing required", "POST", "/api/v1/resources", spec(``), 400, "validation_failed", []string{"/spec/engine", "/spec/engine_version", "/spec/instance_class", "/spec/storage_gb"}},
		{"unknown type", "POST", "/api/v1/resources", `{"name":"x","resource_type_name":"Nope","resource_type_version":"v1","spec":{}}`, 400, "unknown_type", []string{"/resource_type_name"}},
		{"no live reconciler", "POST", "/api/v1/resources", `{"name":"x","resource_type_name":"Orphan","resource_type_version":"v1","spec":{}}`, 400, "no_reconciler", []string{"/resource_type_name"}},
		{"unknown version", "POST", "/api/v1/resources", `{"name":"x","resource_type_name":"DatabaseCluster","resource_type_version":"v9","spec":{}}`, 400, "unknown_type", []string{"/resource_type_name"}},
		{"malformed JSON", "POST", "/api/v1/resources", `{"name": "x", "spec": {`, 400, "malformed_json", nil},
		{"body over 1 MiB", "POST", "/api/v1/resources", spec(`"pad":"` + strings.Repeat("p", 1<<20) + `"`), 413, "too_large", nil},
		{"name not DNS-1123", "POST", "/api/v1/resources", strings.Replace(spec(valid), "bad-one", "Bad_Name", 1), 400, "invalid", []string{"/name"}},
		{"duplicate name", "POST", "/api/v1/resources", strings.Replace(spec(valid), "bad-one", "production-pg", 1), 409, "name_taken", []string{"/name"}},
		{"invalid schema", "POST", "/api/v1/resource-types", `{"name":"Broken","version":"v1","schema":{"type":"object","properties":{"a":{"type":"strnig"}}}}`, 400, "invalid_schema", nil},
		{"spec change while deleting", "PUT", fmt.Sprintf("/api/v1/resources/%d", heldID), `{"spec":{"engine":"mysql","engine_version":"9","instance_class":"db.small","storage_gb":10}}`, 409, "deleting", nil},
		{"finalizer added while deleting", "PUT", fmt.Sprintf("/api/v1/resources/%d/finalizers", heldID), `{"add":["example.com/late"]}`, 409, "finalizer_not_allowed", nil},
	}
	counts := func() string {
		return fmt.Sprintf("types=%d resources=%d outbox=%d", c.count(`SELECT count(*) FROM resource_types`),
			c.count(`SELECT count(*) FROM resources`), c.count(`SELECT count(*) FROM outbox`))
	}
	before := counts()
	for _, tc := range cases {
		r := do(t, tc.method, base+tc.path, tc.body)
		if r.status != tc.status {
			t.Errorf("%s: status %d, want %d: %.300s", tc.name, r.status, tc.status, r.body)
			continue
		}
		body := r.json(t)
		if body["code"] != tc.code || body["detail"] == "" {
			t.Errorf("%s: code %v detail %q, want code %s", tc.name, body["code"], body["detail"], tc.code)
		}
		var got []string
		if errs, ok := body["errors"].([]any); ok {
			for _, e := range errs {
				got = append(got, e.(map[string]any)["path"].(string))
			}
		}
		for _, p := range tc.paths {
			if !slices.Contains(got, p) {
				t.Errorf("%s: error paths %v lack %s", tc.name, got, p)
			}
		}
		if after := counts(); after != before {
			t.Fatalf("%s wrote to the database: %s, before %s", tc.name, after, before)
		}
	}
}
