package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The seed README's curl examples, as written there.
const (
	seedCreateType = `curl -X POST http://localhost:8000/api/v1/resource-types \
  -H "Content-Type: application/json" \
  -d '{
    "name": "DatabaseCluster",
    "version": "v1",
    "description": "Managed database cluster",
    "schema": {
      "type": "object",
      "required": ["engine", "engine_version", "instance_class", "storage_gb"],
      "properties": {
        "engine": {
          "type": "string",
          "enum": ["postgres", "mysql", "mariadb"],
          "description": "Database engine type"
        },
        "engine_version": {
          "type": "string",
          "description": "Database engine version"
        },
        "instance_class": {
          "type": "string",
          "description": "Instance size class (e.g. db.small, db.medium, db.large)"
        },
        "storage_gb": {
          "type": "integer",
          "minimum": 10,
          "maximum": 10000,
          "description": "Storage size in GB"
        },
        "replicas": {
          "type": "integer",
          "minimum": 0,
          "maximum": 5,
          "default": 0,
          "description": "Number of read replicas"
        },
        "backup_retention_days": {
          "type": "integer",
          "minimum": 1,
          "maximum": 35,
          "default": 7,
          "description": "Number of days to retain backups"
        },
        "high_availability": {
          "type": "boolean",
          "default": false,
          "description": "Enable multi-AZ high availability"
        }
      }
    }
  }'`
	// The seed elides the v1beta1 schema as "{ ... }"; this one is a real schema.
	seedCreateTypeBeta = `curl -X POST http://localhost:8000/api/v1/resource-types \
  -H "Content-Type: application/json" \
  -d '{
    "name": "DatabaseCluster",
    "version": "v1beta1",
    "schema": { "type": "object", "properties": { "engine": { "type": "string" } } }
  }'`
	seedListTypes       = `curl http://localhost:8000/api/v1/resource-types`
	seedListTypesByName = `curl http://localhost:8000/api/v1/resource-types?name=DatabaseCluster`
	seedGetTypeByID     = `curl http://localhost:8000/api/v1/resource-types/1`
	seedGetTypeByName   = `curl http://localhost:8000/api/v1/resource-types/DatabaseCluster/v1`
	seedCreateResource  = `curl -X POST http://localhost:8000/api/v1/resources \
  -H "Content-Type: application/json" \
  -d '{
    "name": "production-pg",
    "resource_type_name": "DatabaseCluster",
    "resource_type_version": "v1",
    "spec": {
      "engine": "postgres",
      "engine_version": "16.2",
      "instance_class": "db.large",
      "storage_gb": 500,
      "replicas": 2,
      "backup_retention_days": 14,
      "high_availability": true
    }
  }'`
	seedGetResource       = `curl http://localhost:8000/api/v1/resources/1`
	seedGetResourceByName = `curl http://localhost:8000/api/v1/resources/by-name/DatabaseCluster/v1/production-pg`
	seedUpdateResource    = `curl -X PUT http://localhost:8000/api/v1/resources/1 \
  -H "Content-Type: application/json" \
  -d '{
    "spec": {
      "engine": "postgres",
      "engine_version": "16.2",
      "instance_class": "db.xlarge",
      "storage_gb": 1000,
      "replicas": 3,
      "backup_retention_days": 14,
      "high_availability": true
    }
  }'`
	seedDeleteResource = `curl -X DELETE http://localhost:8000/api/v1/resources/1`
	seedAddFinalizer   = `curl -X PUT http://localhost:8000/api/v1/resources/1/finalizers \
  -H "Content-Type: application/json" \
  -d '{"add": ["external-controller"]}'`
	seedRemoveFinalizer = `curl -X PUT http://localhost:8000/api/v1/resources/1/finalizers \
  -H "Content-Type: application/json" \
  -d '{"remove": ["external-controller"]}'`
)

// TestSeedReadmeFlow runs the seed README's examples against the real
// binaries, each service its own process, with the scheduler and the noop
// reconciler in the loop: create → ready; update → generation 2 and
// observed_generation 2; delete → cleanup, then gone once the external
// finalizer is removed.
func TestSeedReadmeFlow(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	seedFlow(t, base, curl, c.count, func() { c.startReconciler(c.storeAddrs[0], "DatabaseCluster/v1") })
}

// seedFlow runs the seed README's examples against the API at base, each
// command line through send (curl: with the administrator's token). count
// reads the store's database; startReconciler starts the noop reconciler
// for DatabaseCluster/v1 (the flow first checks that creates are refused
// without one).
func seedFlow(t *testing.T, base string, send func(t *testing.T, base, cmdline string) response, count func(query string, args ...any) int, startReconciler func()) {
	t.Helper()
	step := func(name, cmd string, wantStatus int) response {
		t.Helper()
		r := send(t, base, cmd)
		if r.status != wantStatus {
			t.Fatalf("%s: status %d, want %d: %s", name, r.status, wantStatus, r.body)
		}
		return r
	}
	typ := step("create type", seedCreateType, 201).json(t)
	if typ["id"] != float64(1) || typ["name"] != "DatabaseCluster" || typ["version"] != "v1" {
		t.Fatalf("created type: %v", typ)
	}
	step("create v1beta1", seedCreateTypeBeta, 201)
	// The list holds the built-in types too (negative ids) besides the user's.
	if l := step("list types", seedListTypes, 200).list(t); len(slices.DeleteFunc(l, func(x map[string]any) bool { return x["id"].(float64) < 0 })) != 2 {
		t.Fatalf("listed %d user types, want 2", len(l))
	}
	if l := step("list by name", seedListTypesByName, 200).list(t); len(l) != 2 {
		t.Fatalf("listed %d DatabaseCluster types, want 2", len(l))
	}
	if got := step("get type by id", seedGetTypeByID, 200).json(t); got["version"] != "v1" {
		t.Fatalf("type 1: %v", got)
	}
	if got := step("get type by name", seedGetTypeByName, 200).json(t); got["id"] != float64(1) {
		t.Fatalf("DatabaseCluster/v1: %v", got)
	}

	// The live-reconciler rule: refused until a reconciler serves the type.
	if e := step("create without a reconciler", seedCreateResource, 400).json(t); e["code"] != "no_reconciler" {
		t.Fatalf("without a reconciler: %v", e)
	}
	if n := count(`SELECT count(*) FROM resources`); n != 0 {
		t.Fatalf("a refused create wrote %d rows", n)
	}
	startReconciler()

	res := step("create resource", seedCreateResource, 201).json(t)
	if res["generation"] != float64(1) || res["status"] != "pending" || fmt.Sprint(res["finalizers"]) != "[reconciler.no8s.io/noop]" {
		t.Fatalf("created resource: %v", res)
	}
	// The seed's body names no namespace: the resource is in default.
	if res["namespace"] != "default" {
		t.Fatalf("the seed's resource landed in namespace %v, want default", res["namespace"])
	}
	id := int64(res["id"].(float64))
	seed := func(cmd string) string {
		return strings.ReplaceAll(cmd, "resources/1", fmt.Sprintf("resources/%d", id))
	}
	ready := waitResource(t, base, id, "ready, observed_generation 1", func(r map[string]any) bool {
		return r["status"] == "ready" && r["phase"] == "Ready" && r["observed_generation"] == float64(1)
	})
	if cond := condition(ready, "Ready"); cond == nil || cond["status"] != "True" || cond["observed_generation"] != float64(1) {
		t.Fatalf("Ready condition of a ready resource: %v", ready["conditions"])
	}
	if got := step("get resource", seed(seedGetResource), 200).json(t); got["name"] != "production-pg" {
		t.Fatalf("resource: %v", got)
	}
	if got := step("get by name", seedGetResourceByName, 200).json(t); got["id"] != float64(id) || got["namespace"] != "default" {
		t.Fatalf("by name: %v", got)
	}
	upd := step("update", seed(seedUpdateResource), 200).json(t)
	spec := upd["spec"].(map[string]any)
	if upd["generation"] != float64(2) || spec["instance_class"] != "db.xlarge" || spec["storage_gb"] != float64(1000) {
		t.Fatalf("updated resource: %v", upd)
	}
	waitResource(t, base, id, "ready, observed_generation 2", func(r map[string]any) bool {
		return r["status"] == "ready" && r["generation"] == float64(2) && r["observed_generation"] == float64(2)
	})

	step("add finalizer", seed(seedAddFinalizer), 200)
	del := step("delete", seed(seedDeleteResource), 202).json(t)
	if del["status"] != "deleting" || del["deleted_at"] == nil {
		t.Fatalf("deleted resource: %v", del)
	}
	// The reconciler's cleanup runs and removes its own finalizer; the
	// external one keeps the resource deleting.
	waitResource(t, base, id, "cleanup done, external finalizer left", func(r map[string]any) bool {
		return r["status"] == "deleting" && r["phase"] == "Terminating" && fmt.Sprint(r["finalizers"]) == "[external-controller]"
	})
	attempts := count(`SELECT count(*) FROM reconciliation_history WHERE resource_id = $1`, id)
	time.Sleep(time.Second)
	if got := step("get while deleting", seed(seedGetResource), 200).json(t); got["status"] != "deleting" || got["phase"] != "Terminating" {
		t.Fatalf("resource while a finalizer remains: %v", got)
	}
	if n := count(`SELECT count(*) FROM reconciliation_history WHERE resource_id = $1`, id); n != attempts {
		t.Fatalf("%d more attempts on a deleting resource whose cleanup is done", n-attempts)
	}
	step("remove finalizer", seed(seedRemoveFinalizer), 200)
	step("get after purge", seed(seedGetResource), 404)
	if n := count(`SELECT count(*) FROM resources`); n != 0 {
		t.Fatalf("%d resource rows remain", n)
	}
	// Every change reached the outbox, a successful reconcile as RECONCILED.
	for _, e := range []struct {
		typ  string
		want int
	}{{"CREATED", 1}, {"RECONCILED", 3}, {"DELETED", 1}, {"PURGED", 1}} {
		if n := count(`SELECT count(*) FROM outbox WHERE resource_id = $1 AND event_type = $2`, id, e.typ); n < e.want {
			t.Errorf("%d %s events for the resource, want at least %d", n, e.typ, e.want)
		}
	}

	// Without an external finalizer, a delete ends with the resource gone.
	r := do(t, "POST", base+"/api/v1/resources", map[string]any{"name": "short-lived", "resource_type_name": "DatabaseCluster",
		"resource_type_version": "v1", "spec": map[string]any{"engine": "mysql", "engine_version": "8", "instance_class": "db.small", "storage_gb": 10}})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id2 := int64(r.json(t)["id"].(float64))
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", base, id2), nil); r.status != 202 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	waitGone(t, base, id2)

	// A namespace that does not exist is a 404 naming it, in every mode
	// (this flow also runs on no8s dev), and nothing is written.
	r = do(t, "POST", base+"/api/v1/resources", map[string]any{"namespace": "nowhere", "name": "lost", "resource_type_name": "DatabaseCluster",
		"resource_type_version": "v1", "spec": map[string]any{"engine": "mysql", "engine_version": "8", "instance_class": "db.small", "storage_gb": 10}})
	if e := r.json(t); r.status != 404 || e["code"] != "namespace_not_found" || !strings.Contains(fmt.Sprint(e["detail"]), `"nowhere"`) {
		t.Fatalf("create in a missing namespace: %d %s", r.status, r.body)
	}
	if n := count(`SELECT count(*) FROM resources`); n != 0 {
		t.Fatalf("%d resource rows after the flow", n)
	}
}

// getResource reads a resource through the API (nil when 404).
func getResource(t *testing.T, base string, id int64) map[string]any {
	t.Helper()
	r := do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", base, id), nil)
	switch r.status {
	case 200:
		return r.json(t)
	case 404:
		return nil
	}
	t.Fatalf("get resource %d: %d %s", id, r.status, r.body)
	return nil
}

// waitResource polls a resource until ok says so (30 s at most).
func waitResource(t *testing.T, base string, id int64, what string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	var last map[string]any
	waitFor(t, 30*time.Second, fmt.Sprintf("resource %d %s", id, what), func() error {
		last = getResource(t, base, id)
		if last != nil && ok(last) {
			return nil
		}
		return fmt.Errorf("resource is %v", brief(last))
	})
	return last
}

// waitGone polls until the resource is gone.
func waitGone(t *testing.T, base string, id int64) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("resource %d gone", id), func() error {
		if r := getResource(t, base, id); r != nil {
			return fmt.Errorf("resource is %v", brief(r))
		}
		return nil
	})
}

// brief is the part of a resource document worth printing when waiting.
func brief(r map[string]any) string {
	if r == nil {
		return "gone"
	}
	return fmt.Sprintf("status=%v phase=%v generation=%v observed=%v finalizers=%v message=%q",
		r["status"], r["phase"], r["generation"], r["observed_generation"], r["finalizers"], r["status_message"])
}

// condition returns a resource's condition of type typ.
func condition(r map[string]any, typ string) map[string]any {
	list, _ := r["conditions"].([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}
