package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/testenv"
)

// pgAdminURL is the local PostgreSQL server the PostgresDatabase reconciler
// manages databases on (the tests' own admin connection).
func pgAdminURL() string {
	if u := os.Getenv("NO8S_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// TestPostgresDatabase runs the postgres-database reconciler process against
// the local PostgreSQL server: create → the database and its owner role
// exist, outputs without a password; dropped by hand → recreated within the
// type's (shortened) resync; delete with policy Delete → dropped, with an
// external finalizer kept deleting until it is removed; with Retain → kept.
func TestPostgresDatabase(t *testing.T) {
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, pgAdminURL())
	if err != nil {
		t.Fatalf("connect to the local PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = admin.Close(context.WithoutCancel(ctx)) })
	prefix := testenv.Name("e2e")
	dbDel, dbRet, owner := prefix+"_del", prefix+"_ret", prefix+"_owner"
	t.Cleanup(func() { // whatever the test left behind (its context has ended)
		ctx := context.WithoutCancel(ctx)
		for _, db := range []string{dbDel, dbRet} {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		}
		_, _ = admin.Exec(ctx, "DROP ROLE IF EXISTS "+owner)
	})
	exists := func(query, name string) bool {
		t.Helper()
		var n int
		if err := admin.QueryRow(ctx, query, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	dbExists := func(name string) bool { return exists(`SELECT count(*) FROM pg_database WHERE datname = $1`, name) }
	roleExists := func(name string) bool { return exists(`SELECT count(*) FROM pg_roles WHERE rolname = $1`, name) }

	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	c.startReconcilerArgs("pg", c.storeAddrs[0], []string{"NO8S_PG_ADMIN_URL=" + pgAdminURL()},
		"postgres-database", "--register-type", "--secret-env-prefix", "NO8S_PG_")
	typ := do(t, "GET", base+"/api/v1/resource-types/PostgresDatabase/v1", nil)
	if typ.status != 200 {
		t.Fatalf("--register-type did not register PostgresDatabase/v1: %d %s", typ.status, typ.body)
	}
	// Resync every 2 s (drift detection), retries after 1 s.
	if r := do(t, "PUT", fmt.Sprintf("%s/api/v1/resource-types/%v", base, typ.json(t)["id"]),
		map[string]any{"reconcile_policy": map[string]any{"resync_seconds": 2, "backoff_base_seconds": 1, "backoff_max_seconds": 4}}); r.status != 200 {
		t.Fatalf("set the policy: %d %s", r.status, r.body)
	}

	create := func(name, db, policy string, finalizers ...string) int64 {
		t.Helper()
		spec := map[string]any{"database": db, "owner": owner, "connection": map[string]string{"env": "NO8S_PG_ADMIN_URL"}}
		if policy != "" {
			spec["deletionPolicy"] = policy
		}
		body := map[string]any{"name": name, "resource_type_name": "PostgresDatabase", "resource_type_version": "v1", "spec": spec}
		if len(finalizers) > 0 {
			body["finalizers"] = finalizers
		}
		r := do(t, "POST", base+"/api/v1/resources", body)
		if r.status != 201 {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
		return int64(r.json(t)["id"].(float64))
	}
	// The spec takes a secret reference, never the URL itself.
	if r := do(t, "POST", base+"/api/v1/resources", map[string]any{"name": "leaky", "resource_type_name": "PostgresDatabase",
		"resource_type_version": "v1", "spec": map[string]any{"database": "leaky", "owner": owner, "connection": pgAdminURL()}}); r.status != 400 {
		t.Fatalf("a URL in the spec: %d %s", r.status, r.body)
	}

	// Policy Delete, with an external finalizer.
	del := create("orders", dbDel, "Delete", "example.com/backup")
	ready := waitResource(t, base, del, "ready", func(r map[string]any) bool { return r["status"] == "ready" && r["phase"] == "Ready" })
	if !dbExists(dbDel) || !roleExists(owner) {
		t.Fatalf("database %s exists %v, role %s exists %v", dbDel, dbExists(dbDel), owner, roleExists(owner))
	}
	var dbOwner string
	if err := admin.QueryRow(ctx, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1`, dbDel).Scan(&dbOwner); err != nil || dbOwner != owner {
		t.Fatalf("owner of %s: %q (%v)", dbDel, dbOwner, err)
	}
	out := do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/outputs", base, del), nil).json(t)["outputs"].(map[string]any)
	port := float64(admin.Config().Port)
	if out["host"] != "127.0.0.1" || out["port"] != port || out["database"] != dbDel || out["role"] != owner || len(out) != 4 {
		t.Fatalf("outputs %v", out)
	}
	for _, cond := range []string{"RoleReady", "DatabaseReady", "Ready"} {
		if cd := condition(ready, cond); cd == nil || cd["status"] != "True" {
			t.Fatalf("condition %s: %v", cond, ready["conditions"])
		}
	}

	// Drift: dropped by hand, recreated at the next resync.
	if _, err := admin.Exec(ctx, "DROP DATABASE "+dbDel+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	dropped := time.Now()
	waitFor(t, 20*time.Second, "database recreated", func() error {
		if !dbExists(dbDel) {
			return fmt.Errorf("%s does not exist", dbDel)
		}
		return nil
	})
	t.Logf("database dropped by hand recreated after %s (resync 2 s)", time.Since(dropped).Round(10*time.Millisecond))
	waitResource(t, base, del, "ready after the drift", func(r map[string]any) bool {
		cd := condition(r, "DatabaseReady")
		return r["status"] == "ready" && cd != nil && cd["reason"] == "Recreated"
	})

	// Policy Retain.
	ret := create("archive", dbRet, "Retain")
	waitResource(t, base, ret, "ready", func(r map[string]any) bool { return r["status"] == "ready" })
	if !dbExists(dbRet) {
		t.Fatalf("database %s missing", dbRet)
	}
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", base, ret), nil); r.status != 202 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	waitGone(t, base, ret)
	if !dbExists(dbRet) {
		t.Fatalf("policy Retain: database %s was dropped", dbRet)
	}

	// Delete: cleanup drops the database (the role still owns dbRet, so it
	// stays); the external finalizer keeps the resource deleting.
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", base, del), nil); r.status != 202 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	waitResource(t, base, del, "cleanup done", func(r map[string]any) bool {
		return r["status"] == "deleting" && fmt.Sprint(r["finalizers"]) == "[example.com/backup]"
	})
	if dbExists(dbDel) {
		t.Fatalf("policy Delete: database %s still exists", dbDel)
	}
	if !roleExists(owner) {
		t.Fatalf("role %s dropped while it owns %s", owner, dbRet)
	}
	time.Sleep(500 * time.Millisecond)
	if r := getResource(t, base, del); r == nil || r["status"] != "deleting" {
		t.Fatalf("with an external finalizer: %s", brief(r))
	}
	if r := do(t, "PUT", fmt.Sprintf("%s/api/v1/resources/%d/finalizers", base, del), map[string]any{"remove": []string{"example.com/backup"}}); r.status != 200 {
		t.Fatalf("remove finalizer: %d %s", r.status, r.body)
	}
	waitGone(t, base, del)

	// A last one on its own: the role it created goes with it.
	if _, err := admin.Exec(ctx, "DROP DATABASE "+dbRet+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "DROP ROLE "+owner); err != nil {
		t.Fatal(err)
	}
	solo := create("solo", dbDel, "") // the default policy: Delete
	waitResource(t, base, solo, "ready", func(r map[string]any) bool { return r["status"] == "ready" })
	if !dbExists(dbDel) || !roleExists(owner) {
		t.Fatal("database or role missing")
	}
	var comment string
	if err := admin.QueryRow(ctx, `SELECT coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database WHERE datname = $1`, dbDel).Scan(&comment); err != nil ||
		!strings.HasPrefix(comment, "no8s:") {
		t.Fatalf("database comment %q (%v)", comment, err)
	}
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", base, solo), nil); r.status != 202 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	waitGone(t, base, solo)
	if dbExists(dbDel) || roleExists(owner) {
		t.Fatalf("after delete with the default policy: database exists %v, role exists %v", dbExists(dbDel), roleExists(owner))
	}
	if n := c.count(`SELECT count(*) FROM outbox WHERE event_type = 'PURGED'`); n != 3 {
		t.Fatalf("%d resources purged, want 3", n)
	}
}
