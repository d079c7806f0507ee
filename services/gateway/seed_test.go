package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
)

// databaseClusterSchema is the seed README's DatabaseCluster schema.
const databaseClusterSchema = `{
  "type": "object",
  "required": ["engine", "engine_version", "instance_class", "storage_gb"],
  "properties": {
    "engine": {"type": "string", "enum": ["postgres", "mysql", "mariadb"], "description": "Database engine type"},
    "engine_version": {"type": "string", "description": "Database engine version"},
    "instance_class": {"type": "string", "description": "Instance size class (e.g. db.small, db.medium, db.large)"},
    "storage_gb": {"type": "integer", "minimum": 10, "maximum": 10000, "description": "Storage size in GB"},
    "replicas": {"type": "integer", "minimum": 0, "maximum": 5, "default": 0, "description": "Number of read replicas"},
    "backup_retention_days": {"type": "integer", "minimum": 1, "maximum": 35, "default": 7, "description": "Number of days to retain backups"},
    "high_availability": {"type": "boolean", "default": false, "description": "Enable multi-AZ high availability"}
  }
}`

// The seed README's resource-type and resource curl flows, in order.
func TestSeedFlow(t *testing.T) {
	var v1, v1beta1 resource.Type
	t.Run("create resource types", func(t *testing.T) {
		v1 = createType(t, "DatabaseCluster", "v1", databaseClusterSchema)
		if v1.ID <= 0 || v1.Name != "DatabaseCluster" || v1.Version != "v1" || v1.Description != "DatabaseCluster v1" || v1.ResourceVersion <= 0 {
			t.Fatalf("created type: %+v", v1)
		}
		if v1.CreatedAt.IsZero() || v1.UpdatedAt.IsZero() {
			t.Errorf("timestamps missing: %+v", v1)
		}
		var schema map[string]any
		if err := json.Unmarshal(v1.Schema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("schema not returned: %s", v1.Schema)
		}
		v1beta1 = createType(t, "DatabaseCluster", "v1beta1", `{"type":"object","properties":{"engine":{"type":"string"}}}`)
		createType(t, "OtherThing", "v1", `{"type":"object"}`)
	})
	t.Run("list and filter by name", func(t *testing.T) {
		all := decode[[]resource.Type](t, do(t, http.MethodGet, "/api/v1/resource-types", nil).expect(t, http.StatusOK))
		if len(all) < 3 {
			t.Fatalf("listed %d types, want at least 3", len(all))
		}
		byName := decode[[]resource.Type](t, do(t, http.MethodGet, "/api/v1/resource-types?name=DatabaseCluster", nil).expect(t, http.StatusOK))
		if len(byName) != 2 || byName[0].Version != "v1" || byName[1].Version != "v1beta1" {
			t.Fatalf("filtered list: %+v", byName)
		}
		none := do(t, http.MethodGet, "/api/v1/resource-types?name=NoSuchType", nil).expect(t, http.StatusOK)
		if string(none.Body) != "[]" {
			t.Fatalf("empty list body %s, want []", none.Body)
		}
	})
	t.Run("get by id and by name and version", func(t *testing.T) {
		got := decode[resource.Type](t, do(t, http.MethodGet, "/api/v1/resource-types/"+strconv.FormatInt(v1.ID, 10), nil).expect(t, http.StatusOK))
		if got.ID != v1.ID || got.Name != "DatabaseCluster" || got.Version != "v1" {
			t.Fatalf("by id: %+v", got)
		}
		got = decode[resource.Type](t, do(t, http.MethodGet, "/api/v1/resource-types/DatabaseCluster/v1beta1", nil).expect(t, http.StatusOK))
		if got.ID != v1beta1.ID {
			t.Fatalf("by name: %+v", got)
		}
		do(t, http.MethodGet, "/api/v1/resource-types/999999", nil).expectError(t, http.StatusNotFound, "not_found")
		do(t, http.MethodGet, "/api/v1/resource-types/DatabaseCluster/v9", nil).expectError(t, http.StatusNotFound, "not_found")
		do(t, http.MethodGet, "/api/v1/resource-types/DatabaseCluster", nil).expectError(t, http.StatusBadRequest, "invalid", "/id")
	})

	var id int64
	base := func() string { return "/api/v1/resources/" + strconv.FormatInt(id, 10) }
	t.Run("create resource", func(t *testing.T) {
		r := do(t, http.MethodPost, "/api/v1/resources", `{
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
		  }`).expect(t, http.StatusCreated)
		doc := decode[resource.Resource](t, r)
		id = doc.ID
		if id <= 0 || doc.UID == "" || doc.Name != "production-pg" || doc.Status != "pending" || doc.Generation != 1 || doc.ResourceVersion <= 0 {
			t.Fatalf("created: %s", r.Body)
		}
		if loc := r.Header.Get("Location"); loc != base() {
			t.Errorf("Location %q, want %q", loc, base())
		}
		spec := specOf(t, doc)
		if spec["storage_gb"] != float64(500) || spec["replicas"] != float64(2) || spec["high_availability"] != true {
			t.Errorf("spec: %s", doc.Spec)
		}
	})
	t.Run("defaults applied", func(t *testing.T) {
		doc := createResource(t, map[string]any{
			"name": "staging-pg", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1",
			"spec": map[string]any{"engine": "mysql", "engine_version": "8.0", "instance_class": "db.small", "storage_gb": 20},
		})
		spec := specOf(t, doc)
		if spec["replicas"] != float64(0) || spec["backup_retention_days"] != float64(7) || spec["high_availability"] != false {
			t.Errorf("defaults not applied: %s", doc.Spec)
		}
		do(t, http.MethodDelete, "/api/v1/resources/"+strconv.FormatInt(doc.ID, 10), nil).expect(t, http.StatusAccepted)
	})
	t.Run("get by id and by name", func(t *testing.T) {
		byID := decode[resource.Resource](t, do(t, http.MethodGet, base(), nil).expect(t, http.StatusOK))
		byName := decode[resource.Resource](t, do(t, http.MethodGet, "/api/v1/resources/by-name/DatabaseCluster/v1/production-pg", nil).expect(t, http.StatusOK))
		if byID.ID != id || byName.ID != id || byName.UID != byID.UID {
			t.Fatalf("by id %+v, by name %+v", byID, byName)
		}
		for _, f := range []string{"labels", "annotations", "owner_references", "conditions", "finalizers", "outputs", "phase", "observed_generation", "deleted_at", "last_reconcile_time"} {
			var m map[string]any
			_ = json.Unmarshal(do(t, http.MethodGet, base(), nil).Body, &m)
			if _, ok := m[f]; !ok {
				t.Errorf("document lacks %q", f)
			}
		}
		do(t, http.MethodGet, "/api/v1/resources/by-name/DatabaseCluster/v1/nope", nil).expectError(t, http.StatusNotFound, "not_found")
	})
	t.Run("update to generation 2", func(t *testing.T) {
		r := do(t, http.MethodPut, base(), `{
		    "spec": {
		      "engine": "postgres",
		      "engine_version": "16.2",
		      "instance_class": "db.xlarge",
		      "storage_gb": 1000,
		      "replicas": 3,
		      "backup_retention_days": 14,
		      "high_availability": true
		    }
		  }`).expect(t, http.StatusOK)
		doc := decode[resource.Resource](t, r)
		if doc.Generation != 2 || specOf(t, doc)["instance_class"] != "db.xlarge" {
			t.Fatalf("updated: %s", r.Body)
		}
	})
	t.Run("delete with a finalizer", func(t *testing.T) {
		// The resource carries its reconciler's finalizer from creation.
		doc := decode[resource.Resource](t, do(t, http.MethodPut, base()+"/finalizers", `{"add": ["external-controller"]}`).expect(t, http.StatusOK))
		if fmt.Sprint(doc.Finalizers) != "[reconciler.no8s.io/noop-databasecluster-v1 external-controller]" {
			t.Fatalf("finalizers %v", doc.Finalizers)
		}
		doc = decode[resource.Resource](t, do(t, http.MethodDelete, base(), nil).expect(t, http.StatusAccepted))
		if doc.Status != "deleting" || doc.DeletedAt == nil || doc.Phase != "Terminating" {
			t.Fatalf("deleted: %+v", doc)
		}
		// The reconciler's cleanup removes its own finalizer; the external
		// one keeps the resource deleting.
		reconcileNow(t, doc)
		deadline := time.Now().Add(10 * time.Second)
		for {
			doc = decode[resource.Resource](t, do(t, http.MethodGet, base(), nil).expect(t, http.StatusOK))
			if fmt.Sprint(doc.Finalizers) == "[external-controller]" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cleanup did not remove the reconciler's finalizer: %+v", doc)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if doc.Status != "deleting" || doc.Phase != "Terminating" {
			t.Fatalf("after cleanup: %+v", doc)
		}
	})
	t.Run("spec change while deleting", func(t *testing.T) {
		unchanged(t, func() {
			do(t, http.MethodPut, base(), map[string]any{"spec": map[string]any{
				"engine": "postgres", "engine_version": "17", "instance_class": "db.xlarge", "storage_gb": 1000,
			}}).expectError(t, http.StatusConflict, "deleting")
			do(t, http.MethodPatch, base(), `{"spec":{"storage_gb":2000}}`, "Content-Type", "application/merge-patch+json").
				expectError(t, http.StatusConflict, "deleting")
			do(t, http.MethodPut, base()+"/finalizers", `{"add": ["late-comer"]}`).expectError(t, http.StatusConflict, "")
		})
	})
	t.Run("remove the finalizer", func(t *testing.T) {
		doc := decode[resource.Resource](t, do(t, http.MethodPut, base()+"/finalizers", `{"remove": ["external-controller"]}`).expect(t, http.StatusOK))
		if len(doc.Finalizers) != 0 || doc.ID != id {
			t.Fatalf("final document: %+v", doc)
		}
		do(t, http.MethodGet, base(), nil).expectError(t, http.StatusNotFound, "not_found")
		do(t, http.MethodGet, "/api/v1/resources/by-name/DatabaseCluster/v1/production-pg", nil).expectError(t, http.StatusNotFound, "not_found")
	})
	t.Run("delete types", func(t *testing.T) {
		do(t, http.MethodDelete, "/api/v1/resource-types/"+strconv.FormatInt(v1beta1.ID, 10), nil).expect(t, http.StatusNoContent)
		do(t, http.MethodGet, "/api/v1/resource-types/"+strconv.FormatInt(v1beta1.ID, 10), nil).expectError(t, http.StatusNotFound, "not_found")
		do(t, http.MethodDelete, "/api/v1/resource-types/"+strconv.FormatInt(v1beta1.ID, 10), nil).expectError(t, http.StatusNotFound, "not_found")
	})
}
