package e2e

import (
	"testing"
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
// binaries, each service its own process.
func TestSeedReadmeFlow(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()

	step := func(name, cmd string, wantStatus int) response {
		t.Helper()
		r := curl(t, base, cmd)
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
	if l := step("list types", seedListTypes, 200).list(t); len(l) != 2 {
		t.Fatalf("listed %d types, want 2", len(l))
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

	res := step("create resource", seedCreateResource, 201).json(t)
	if res["id"] != float64(1) || res["generation"] != float64(1) || res["status"] != "pending" {
		t.Fatalf("created resource: %v", res)
	}
	if got := step("get resource", seedGetResource, 200).json(t); got["name"] != "production-pg" {
		t.Fatalf("resource 1: %v", got)
	}
	if got := step("get by name", seedGetResourceByName, 200).json(t); got["id"] != float64(1) {
		t.Fatalf("by name: %v", got)
	}
	upd := step("update", seedUpdateResource, 200).json(t)
	spec := upd["spec"].(map[string]any)
	if upd["generation"] != float64(2) || spec["instance_class"] != "db.xlarge" || spec["storage_gb"] != float64(1000) {
		t.Fatalf("updated resource: %v", upd)
	}
	step("add finalizer", seedAddFinalizer, 200)
	del := step("delete", seedDeleteResource, 202).json(t)
	if del["status"] != "deleting" || del["deleted_at"] == nil {
		t.Fatalf("deleted resource: %v", del)
	}
	if got := step("get while deleting", seedGetResource, 200).json(t); got["status"] != "deleting" || got["phase"] != "Terminating" {
		t.Fatalf("resource while a finalizer remains: %v", got)
	}
	step("remove finalizer", seedRemoveFinalizer, 200)
	step("get after purge", seedGetResource, 404)
	if n := c.count(`SELECT count(*) FROM resources`); n != 0 {
		t.Fatalf("%d resource rows remain", n)
	}
	// Every change reached the outbox: CREATED, MODIFIED (spec), MODIFIED
	// (finalizer), DELETED, PURGED.
	if n := c.count(`SELECT count(*) FROM outbox WHERE resource_id = 1`); n != 5 {
		t.Fatalf("%d events for resource 1, want 5", n)
	}
}
