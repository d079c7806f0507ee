package composerun

import (
	"context"
	"fmt"
	"net/http"
)

// Fill leaves resources of every kind the flow makes, for a later run on
// the same volumes (the upgrade check): a DatabaseCluster, a TenantRegistry
// with its template, Tenants and WebApps, and an HttpSource with its
// WebApps, every one ready.
func (f *Flow) Fill(ctx context.Context) error {
	if err := f.init(); err != nil {
		return err
	}
	for _, s := range []step{
		{"fill: a resource", []string{"gateway (published port 8000)", "reconciler-noop"}, func(ctx context.Context) error {
			if err := f.createType(ctx, databaseClusterType()); err != nil {
				return err
			}
			id, err := f.createResource(ctx, map[string]any{"name": "before-upgrade", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1",
				"spec": map[string]any{"engine": "postgres", "storage_gb": 100}})
			if err != nil {
				return err
			}
			return f.waitReady(ctx, id, nil)
		}},
		{"fill: tenant-registry", []string{"registry-sync", "reconciler-tenant", "reconciler-noop", "postgres"}, f.tenants},
		{"fill: http-source", []string{"registry-sync", "reconciler-noop"}, f.httpSource},
	} {
		if err := f.run(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// Upgraded checks, on a run of the new release over the volumes Fill
// filled: the earlier resources are read and ready, an update of each kind
// is reconciled, the registry and the source still sync (a new row, a new
// item), and a new resource reaches Ready.
func (f *Flow) Upgraded(ctx context.Context) error {
	if err := f.init(); err != nil {
		return err
	}
	return f.run(ctx, step{"upgraded", []string{"migrate", "store", "every service"}, func(ctx context.Context) error {
		r, err := f.expect(ctx, http.StatusOK, http.MethodGet, "/api/v1/resources/by-name/DatabaseCluster/v1/before-upgrade", nil)
		if err != nil {
			return err
		}
		id := int64(r["id"].(float64))
		if r["status"] != "ready" {
			return fmt.Errorf("before-upgrade: status %v after the upgrade", r["status"])
		}
		if err := f.waitAllReady(ctx, "Tenant", "acme-web", "globex-web"); err != nil {
			return err
		}
		if err := f.waitAllReady(ctx, "WebApp", "acme-web", "globex-web", "a1", "b2"); err != nil {
			return err
		}
		if _, err := f.expect(ctx, http.StatusOK, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", id), `{"spec": {"storage_gb": 200}}`); err != nil {
			return err
		}
		if err := f.waitReady(ctx, id, func(r map[string]any) error {
			if r["observed_generation"] != float64(2) {
				return fmt.Errorf("observed_generation %v, want 2", r["observed_generation"])
			}
			return nil
		}); err != nil {
			return err
		}
		if err := f.serveFeed(); err != nil {
			return err
		}
		f.feed.mu.Lock()
		f.feed.items = append(f.feed.items, map[string]any{"id": "c3", "image": "nginx:3"})
		f.feed.mu.Unlock()
		crm, err := f.postgres(ctx, "crm")
		if err != nil {
			return err
		}
		_, err = crm.Exec(ctx, "INSERT INTO tenants VALUES ('initech', 'initech.example.com', '1')")
		crm.Close(ctx)
		if err != nil {
			return err
		}
		if err := f.waitAllReady(ctx, "Tenant", "acme-web", "globex-web", "initech-web"); err != nil {
			return err
		}
		if err := f.waitAllReady(ctx, "WebApp", "acme-web", "globex-web", "initech-web", "a1", "b2", "c3"); err != nil {
			return err
		}
		nid, err := f.createResource(ctx, map[string]any{"name": "after-upgrade", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1",
			"spec": map[string]any{"engine": "mysql", "storage_gb": 20}})
		if err != nil {
			return err
		}
		return f.waitReady(ctx, nid, nil)
	}})
}
