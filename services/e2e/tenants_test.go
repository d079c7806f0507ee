package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MariaDB datasource's setup
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/reconcilers"
	"github.com/no8s/no8s/services/internal/tenancy"
	"github.com/no8s/no8s/services/internal/testenv"
)

// The datasources of these tests: the machine's real MariaDB and
// PostgreSQL servers. Each test creates its own database and drops it.
const (
	mariaDBAdmin  = "root@tcp(127.0.0.1:3306)/"
	postgresAdmin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
)

// datasourceDB is a test's own datasource database.
type datasourceDB struct {
	t    *testing.T
	kind string // tenancy.SourceMySQL or SourcePostgres
	name string
	exec func(query string, args ...any)
	// rows counts a table's rows.
	rows func(table string) int
	port int
}

// newMariaDB creates a database on the MariaDB server and a tenants table.
func newMariaDB(t *testing.T) *datasourceDB {
	t.Helper()
	admin, err := sql.Open("mysql", mariaDBAdmin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	name := testenv.Name("e2e")
	if _, err := admin.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("MariaDB at 127.0.0.1:3306: %v", err)
	}
	db, err := sql.Open("mysql", mariaDBAdmin+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name)
	})
	d := &datasourceDB{t: t, kind: tenancy.SourceMySQL, name: name, port: 3306}
	d.exec = func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	d.rows = func(table string) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	d.exec("CREATE TABLE tenants (id VARCHAR(200) NULL, url VARCHAR(200), active VARCHAR(10) NULL, plan VARCHAR(20) NULL)")
	return d
}

// newPostgresDatasource creates a database on the PostgreSQL server and a
// tenants table.
func newPostgresDatasource(t *testing.T) *datasourceDB {
	t.Helper()
	admin, err := pgxpool.New(t.Context(), postgresAdmin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	name := testenv.Name("e2e_ds")
	if _, err := admin.Exec(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(t.Context(), strings.Replace(postgresAdmin, "/postgres?", "/"+name+"?", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		_, _ = admin.Exec(context.WithoutCancel(t.Context()), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") // the test's context has ended
	})
	d := &datasourceDB{t: t, kind: tenancy.SourcePostgres, name: name, port: 5432}
	d.exec = func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(t.Context(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	d.rows = func(table string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	d.exec("CREATE TABLE tenants (id text NULL, url text, active text NULL, plan text NULL)")
	return d
}

func (d *datasourceDB) insert(id, url, active string) {
	d.t.Helper()
	d.exec(fmt.Sprintf("INSERT INTO tenants (id, url, active) VALUES ('%s', '%s', '%s')", id, url, active))
}

// source is the registry's datasource: this database, as root/postgres,
// privileged logins that the registry must allow.
func (d *datasourceDB) source() map[string]any {
	user := "root"
	if d.kind == tenancy.SourcePostgres {
		user = "postgres"
	}
	return map[string]any{"type": d.kind, "host": "127.0.0.1", "port": d.port, "database": d.name, "table": "tenants", "username": user,
		"allowPrivilegedLogin": true}
}

// tenantCluster is a control plane of real processes with registry-sync and
// the noop reconciler serving Tenants.
type tenantCluster struct {
	*cluster
	base string
	// ns is the namespace of the registries, templates and Tenants
	// ("default" unless a test says otherwise).
	ns string
	// syncs are the registry-sync replicas started.
	syncs []*proc
}

func newTenantCluster(t *testing.T) *tenantCluster {
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 2*time.Second)
	c.startReconciler(c.storeAddrs[0], "Tenant/v1")
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "WebApp", "version": "v1", "schema": map[string]any{
		"type": "object", "required": []string{"image", "host"}, "properties": map[string]any{
			"image": map[string]any{"type": "string"}, "host": map[string]any{"type": "string"}, "replicas": map[string]any{"type": "integer", "default": 1}}}}); r.status != 201 {
		t.Fatalf("create WebApp: %d %s", r.status, r.body)
	}
	return &tenantCluster{cluster: c, base: base, ns: "default"}
}

// startSync starts a registry-sync replica.
func (c *tenantCluster) startSync(name string, args ...string) *proc {
	full := append([]string{"--api-url", c.apiURL(), "--store-addr", c.workerAddr(c.storeAddrs[0]), "--nats-url", c.natsURL,
		"--replica-id", name, "--lease", "2s", "--poll", "200ms", "--outbound-allow", "loopback,private",
		"--health-listen", c.healthAddr("registry-sync-" + name)}, append(c.identityArgs(identity.RegistrySync), args...)...)
	p := start(c.t, "registry-sync-"+name, filepath.Join(binDir, "no8s-registry-sync"), full, "NO8S_LOG_LEVEL=debug", "NO8S_REGISTRY_BAD_PW=wrong",
		"NO8S_REGISTRY_HS_TOKEN="+feedToken)
	c.syncs = append(c.syncs, p)
	return p
}

// waitSyncLeads waits until a registry-sync leader serves the tenant types.
func (c *tenantCluster) waitSyncLeads() {
	c.t.Helper()
	js, _ := c.jetstream()
	waitFor(c.t, 30*time.Second, "registry-sync serving TenantRegistry/v1", func() error {
		reg, err := reconcilers.Read(c.t.Context(), js)
		if err != nil {
			return err
		}
		if reg.Owners[reconcilers.TypeRef{Name: "TenantRegistry", Version: "v1"}] != "registry-sync" {
			return fmt.Errorf("not served yet")
		}
		return nil
	})
}

// tenants maps every live Tenant's name to its uid.
func (c *tenantCluster) tenants() map[string]string {
	c.t.Helper()
	rows, err := c.pool.Query(c.t.Context(), `SELECT name, uid::text FROM resources WHERE resource_type_name = 'Tenant' AND deleted_at IS NULL AND namespace = $1`, c.ns)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, u string
		if err := rows.Scan(&n, &u); err != nil {
			c.t.Fatal(err)
		}
		out[n] = u
	}
	return out
}

// waitTenants waits until the live Tenants are exactly want (by name) and
// no Tenant is being deleted.
func (c *tenantCluster) waitTenants(timeout time.Duration, want ...string) map[string]string {
	c.t.Helper()
	slices.Sort(want)
	var got map[string]string
	waitFor(c.t, timeout, fmt.Sprintf("Tenants %v", first(want, 8)), func() error {
		got = c.tenants()
		names := slices.Sorted(maps.Keys(got))
		if !slices.Equal(names, want) {
			return fmt.Errorf("have %d %v", len(names), first(names, 8))
		}
		if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'Tenant' AND deleted_at IS NOT NULL`); n > 0 {
			return fmt.Errorf("%d Tenants still deleting", n)
		}
		return nil
	})
	return got
}

// decode converts a decoded JSON value into v.
func decode(t *testing.T, in any, v any) {
	t.Helper()
	raw, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (c *tenantCluster) create(body map[string]any) map[string]any {
	c.t.Helper()
	body["namespace"] = c.ns
	r := do(c.t, "POST", c.base+"/api/v1/resources", body)
	if r.status != 201 {
		c.t.Fatalf("create %v: %d %s", body["name"], r.status, r.body)
	}
	return r.json(c.t)
}

func registryBody(name string, source map[string]any) map[string]any {
	return map[string]any{"name": name, "resource_type_name": "TenantRegistry", "resource_type_version": "v1", "spec": map[string]any{
		"source": source, "syncInterval": "2s",
		"valueMappings":      map[string]any{"uid": "id", "hostOrUrl": "url", "activate": "active"},
		"extraValueMappings": map[string]any{"plan": "plan"},
	}}
}

func templateBody(name, registry string, deps ...string) map[string]any {
	res := []map[string]any{{"id": "app", "typeName": "WebApp", "typeVersion": "v1", "nameTemplate": "{{ .uid | lower | trunc63 }}-" + name,
		"spec": map[string]any{"image": "{{ default \"nginx\" .plan }}", "host": "{{ .host }}"}}}
	if len(deps) > 0 {
		res[0]["dependIds"] = deps
	}
	return map[string]any{"name": name, "resource_type_name": "TenantTemplate", "resource_type_version": "v1",
		"spec": map[string]any{"registryId": registry, "resources": res}}
}

// registryStatus reads a registry's outputs and Synced condition.
func (c *tenantCluster) registryStatus(id float64) (outputs map[string]any, synced map[string]any) {
	c.t.Helper()
	r := do(c.t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", c.base, int64(id)), nil).json(c.t)
	outputs, _ = r["outputs"].(map[string]any)
	conds, _ := r["conditions"].([]any)
	for _, x := range conds {
		if m, _ := x.(map[string]any); m["type"] == "Synced" {
			synced = m
		}
	}
	return outputs, synced
}

// waitSynced waits until the registry's Synced condition has status and
// reason, and its outputs satisfy check.
func (c *tenantCluster) waitSynced(id float64, status, reason string, check func(out map[string]any) error) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, fmt.Sprintf("registry Synced=%s %s", status, reason), func() error {
		out, syn := c.registryStatus(id)
		if syn == nil || syn["status"] != status || syn["reason"] != reason {
			return fmt.Errorf("Synced %v, outputs %v", syn, out)
		}
		if check != nil {
			return check(out)
		}
		return nil
	})
}

// skippedSyncs counts the syncs of registry in registry-sync p's log that
// skipped the comparison, their memo holding (compared=false).
func skippedSyncs(t *testing.T, p *proc, registry string) int {
	t.Helper()
	raw, err := os.ReadFile(p.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(raw)) {
		if strings.Contains(line, "msg=sync ") && strings.Contains(line, "registry="+registry+" ") && strings.Contains(line, "compared=false") {
			n++
		}
	}
	return n
}

// events reads a resource's Events.
func (c *tenantCluster) events(id float64) []map[string]any {
	c.t.Helper()
	return do(c.t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/event-records?limit=500", c.base, int64(id)), nil).list(c.t)
}

func hasEvent(evs []map[string]any, reason, contains string) map[string]any {
	for _, e := range evs {
		if e["reason"] == reason && strings.Contains(fmt.Sprint(e["message"]), contains) {
			return e
		}
	}
	return nil
}

// TestTenantRegistryMariaDB is issue 14's "Must show" on the real MariaDB
// server, with real binaries and the noop reconciler serving Tenants.
func TestTenantRegistryMariaDB(t *testing.T) {
	grantTestSecrets(t) // testTenantFailures' passwords
	c := newTenantCluster(t)
	ds := newMariaDB(t)
	testTenantLifecycle(t, c, ds)
	testTenantFailures(t, c, ds)
}

// TestTenantRegistryPostgres: the same sync on a PostgreSQL datasource, in
// a namespace other than default: the Tenants live in their registry's
// namespace, and a registry of the same name in default is another one.
func TestTenantRegistryPostgres(t *testing.T) {
	c := newTenantCluster(t)
	if r := do(t, "POST", c.base+"/api/v1/namespaces", map[string]any{"name": "team-a"}); r.status != 201 {
		t.Fatalf("create namespace: %d %s", r.status, r.body)
	}
	c.ns = "team-a"
	ds := newPostgresDatasource(t)
	testTenantLifecycle(t, c, ds)
	if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'Tenant' AND namespace <> 'team-a'`); n != 0 {
		t.Fatalf("%d Tenants outside the registry's namespace", n)
	}
	if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'Tenant' AND namespace = 'team-a'`); n == 0 {
		t.Fatal("no Tenant in team-a")
	}
}

func testTenantLifecycle(t *testing.T, c *tenantCluster, ds *datasourceDB) {
	sp := c.startSync("a")
	c.waitSyncLeads()
	ds.insert("acme", "https://acme.example.com", "1")
	ds.insert("globex", "globex.example.com:8443", "yes")
	ds.insert("initech", "http://initech.example.com/x", "TRUE")
	ds.insert("umbrella", "umbrella.example.com", "0")
	ds.insert("hooli", "hooli.example.com", "")
	ds.exec("INSERT INTO tenants (id, url, active) VALUES ('nulled', 'n.example.com', NULL)")
	reg := c.create(registryBody("customers", ds.source()))
	regID := reg["id"].(float64)
	c.create(templateBody("web", "customers"))
	c.create(templateBody("worker", "customers"))

	// 3 active rows × 2 templates → 6 Tenants, every one ready.
	all := []string{"acme-web", "acme-worker", "globex-web", "globex-worker", "initech-web", "initech-worker"}
	uids := c.waitTenants(60*time.Second, all...)
	c.waitSynced(regID, "True", "Synced", func(out map[string]any) error {
		if out["desired"] != float64(6) || out["ready"] != float64(6) || out["referencingTemplates"] != float64(2) || out["activeRows"] != float64(3) {
			return fmt.Errorf("outputs %v", out)
		}
		return nil
	})
	// registry-sync's metrics say the same, summed over the registries.
	waitFor(t, 30*time.Second, "registry-sync's metrics", func() error {
		s := scrapeURL(t, "registry-sync-a", metricsURL(c.probes["registry-sync-a"]))
		desired, _ := s.value("no8s_registry_desired", nil)
		ready, _ := s.value("no8s_registry_ready", nil)
		syncs, _ := s.value("no8s_registry_sync_duration_seconds", map[string]string{"result": "ok"})
		rows, _ := s.value("no8s_registry_sync_rows_read_total", nil)
		if desired != 6 || ready != 6 || syncs < 1 || rows < 3 {
			return fmt.Errorf("desired %v, ready %v, ok syncs %v, rows read %v", desired, ready, syncs, rows)
		}
		return nil
	})
	var spec struct {
		Values map[string]string `json:"values"`
	}
	tenant := do(t, "GET", c.base+"/api/v1/resources/by-name/Tenant/v1/globex-web?namespace="+c.ns, nil).json(t)
	decode(t, tenant["spec"], &spec)
	if spec.Values["host"] != "globex.example.com" || spec.Values["uid"] != "globex" || spec.Values["templateRef"] != "web" {
		t.Fatalf("Tenant values %v", spec.Values)
	}

	// A sync that found nothing to change is remembered, and the next ones
	// whose rows read the same skip the comparison (compared=false); a
	// Tenant deleted by hand (the API refuses edits of Tenants to all but
	// registry-sync) still comes back.
	waitFor(t, 30*time.Second, "a sync that skipped the comparison", func() error {
		if n := skippedSyncs(t, sp, "customers"); n == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	globexWeb := do(t, "GET", c.base+"/api/v1/resources/by-name/Tenant/v1/globex-web?namespace="+c.ns, nil).json(t)
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", c.base, int64(globexWeb["id"].(float64))), nil); r.status != 202 {
		t.Fatalf("delete globex-web: %d %s", r.status, r.body)
	}
	waitFor(t, 60*time.Second, "globex-web created again", func() error {
		r := do(t, "GET", c.base+"/api/v1/resources/by-name/Tenant/v1/globex-web?namespace="+c.ns, nil)
		if r.status != 200 {
			return fmt.Errorf("%d", r.status)
		}
		if uid := r.json(t)["uid"]; uid == globexWeb["uid"] {
			return fmt.Errorf("still the one deleted (uid %v)", uid)
		}
		return nil
	})
	c.waitTenants(60*time.Second, all...)

	// Deactivate a row → its 2 Tenants go; add a row → 2 more.
	ds.exec("UPDATE tenants SET active = 'off' WHERE id = 'globex'")
	after := c.waitTenants(60*time.Second, "acme-web", "acme-worker", "initech-web", "initech-worker")
	for n, u := range after {
		if uids[n] != u {
			t.Fatalf("Tenant %s was replaced (uid %s, was %s)", n, u, uids[n])
		}
	}
	waitFor(t, 30*time.Second, "TenantDeleting and TenantDeleted events", func() error {
		evs := c.events(regID)
		for _, n := range []string{"globex-web", "globex-worker"} {
			if hasEvent(evs, "TenantDeleting", n) == nil || hasEvent(evs, "TenantDeleted", n) == nil {
				return fmt.Errorf("no deletion events for %s in %v", n, evs)
			}
		}
		return nil
	})
	ds.insert("hooli2", "https://hooli2.example.com", "on")
	c.waitTenants(60*time.Second, "acme-web", "acme-worker", "initech-web", "initech-worker", "hooli2-web", "hooli2-worker")

	// Unlink a template → its Tenants go.
	tpl := do(t, "GET", c.base+"/api/v1/resources/by-name/TenantTemplate/v1/worker?namespace="+c.ns, nil).json(t)
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", c.base, int64(tpl["id"].(float64))), nil); r.status != 202 {
		t.Fatalf("delete template: %d %s", r.status, r.body)
	}
	c.waitTenants(60*time.Second, "acme-web", "initech-web", "hooli2-web")
	waitFor(t, 30*time.Second, "the template gone", func() error {
		if r := do(t, "GET", c.base+"/api/v1/resources/by-name/TenantTemplate/v1/worker?namespace="+c.ns, nil); r.status != 404 {
			return fmt.Errorf("template still there: %d", r.status)
		}
		return nil
	})

	// A uid that needs mapping beside one that does not: two Tenants.
	ds.insert("A_B", "ab.example.com", "1")
	ds.insert("a-b", "ab2.example.com", "1")
	var mapped string
	waitFor(t, 60*time.Second, "A_B and a-b", func() error {
		got := c.tenants()
		mapped = tenancy.TenantName("A_B", "web")
		if _, ok := got["a-b-web"]; !ok {
			return fmt.Errorf("no a-b-web in %v", slices.Sorted(maps.Keys(got)))
		}
		if _, ok := got[mapped]; !ok || mapped == "a-b-web" {
			return fmt.Errorf("no %s in %v", mapped, slices.Sorted(maps.Keys(got)))
		}
		return nil
	})
	t.Logf("uid A_B → Tenant %s, uid a-b → Tenant a-b-web", mapped)

	// Admission refuses a cyclic template and one whose rendered spec
	// misses a required field, naming the cycle and the field.
	bad := templateBody("cyclic", "customers", "app")
	bad["namespace"] = c.ns
	r := do(t, "POST", c.base+"/api/v1/resources", bad)
	if r.status != 400 || !strings.Contains(string(r.body), "depends on itself") {
		t.Fatalf("self-dependency: %d %s", r.status, r.body)
	}
	bad = templateBody("cyclic", "customers")
	res := bad["spec"].(map[string]any)["resources"].([]map[string]any)
	b := maps.Clone(res[0])
	b["id"], b["dependIds"] = "db", []string{"app"}
	res[0]["dependIds"] = []string{"db"}
	bad["spec"].(map[string]any)["resources"] = append(res, b)
	bad["namespace"] = c.ns
	r = do(t, "POST", c.base+"/api/v1/resources", bad)
	if r.status != 400 || !strings.Contains(string(r.body), "dependency cycle: app -> db -> app") {
		t.Fatalf("cycle: %d %s", r.status, r.body)
	}
	bad = templateBody("missing", "customers")
	delete(bad["spec"].(map[string]any)["resources"].([]map[string]any)[0]["spec"].(map[string]any), "host")
	bad["namespace"] = c.ns
	r = do(t, "POST", c.base+"/api/v1/resources", bad)
	if r.status != 400 || !strings.Contains(string(r.body), `"/spec/resources/0/spec/host"`) || !strings.Contains(string(r.body), `resource \"app\"`) {
		t.Fatalf("missing field: %d %s", r.status, r.body)
	}
}

// testTenantFailures: datasource failures and bad rows set the registry's
// Synced condition False with the reason and delete no Tenant; a bad row is
// reported while the good rows sync; a repeating failure is one Warning
// whose count grows; a query that tries DELETE is refused by the READ ONLY
// transaction.
func testTenantFailures(t *testing.T, c *tenantCluster, ds *datasourceDB) {
	reg := do(t, "GET", c.base+"/api/v1/resources/by-name/TenantRegistry/v1/customers?namespace="+c.ns, nil).json(t)
	regID := reg["id"].(float64)
	before := c.tenants()
	patchSource := func(source map[string]any) {
		t.Helper()
		if _, ok := source["passwordRef"]; !ok {
			source["passwordRef"] = nil // a merge patch removes it
		}
		r := do(t, "PATCH", fmt.Sprintf("%s/api/v1/resources/%d", c.base, int64(regID)), map[string]any{"spec": map[string]any{"source": source}})
		if r.status != 200 {
			t.Fatalf("patch source: %d %s", r.status, r.body)
		}
	}
	unchanged := func(what string) {
		t.Helper()
		if got := c.tenants(); !maps.Equal(got, before) {
			t.Fatalf("%s changed the Tenants: %v, was %v", what, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(before)))
		}
	}

	// A row with a NULL uid: reported, the good rows synced, nothing deleted.
	ds.exec("INSERT INTO tenants (id, url, active) VALUES (NULL, 'x.example.com', '1')")
	ds.exec("UPDATE tenants SET active = '0' WHERE id = 'acme'") // would delete acme-web if the sync were complete
	ds.insert("newco", "newco.example.com", "1")
	waitFor(t, 60*time.Second, "newco-web", func() error {
		if _, ok := c.tenants()["newco-web"]; !ok {
			return fmt.Errorf("no newco-web")
		}
		return nil
	})
	c.waitSynced(regID, "False", "InvalidRows", func(out map[string]any) error {
		if out["invalidRows"] != float64(1) {
			return fmt.Errorf("outputs %v", out)
		}
		return nil
	})
	if _, ok := c.tenants()["acme-web"]; !ok {
		t.Fatal("a partial read deleted acme-web")
	}
	waitFor(t, 30*time.Second, "InvalidRows event", func() error {
		if hasEvent(c.events(regID), "InvalidRows", "NULL") == nil {
			return fmt.Errorf("no InvalidRows event")
		}
		return nil
	})
	ds.exec("DELETE FROM tenants WHERE id IS NULL")
	ds.exec("UPDATE tenants SET active = '1' WHERE id = 'acme'")
	c.waitSynced(regID, "True", "Synced", nil)
	before = c.tenants()

	// Wrong password, unreachable, dropped table: Synced False with the
	// reason, nothing deleted; the repeating failure is one Warning whose
	// count grows.
	src := ds.source()
	src["passwordRef"] = map[string]any{"env": "NO8S_REGISTRY_BAD_PW"}
	patchSource(src)
	c.waitSynced(regID, "False", "AuthenticationFailed", nil)
	unchanged("a wrong password")
	var count float64
	waitFor(t, 60*time.Second, "a SyncFailed Warning counted twice", func() error {
		e := hasEvent(c.events(regID), "SyncFailed", "AuthenticationFailed")
		if e == nil || e["type"] != "Warning" || e["count"].(float64) < 2 {
			return fmt.Errorf("event %v", e)
		}
		count = e["count"].(float64)
		return nil
	})
	if n := len(slices.DeleteFunc(c.events(regID), func(e map[string]any) bool {
		return e["reason"] != "SyncFailed" || !strings.Contains(fmt.Sprint(e["message"]), "AuthenticationFailed")
	})); n != 1 {
		t.Fatalf("%d SyncFailed records for one repeating failure", n)
	}
	t.Logf("the repeating failure is one Warning, count %v", count)

	src = ds.source()
	src["passwordRef"] = map[string]any{"env": "NOT_UNDER_THE_PREFIX"}
	patchSource(src)
	c.waitSynced(regID, "False", "SecretUnresolved", nil)
	unchanged("a secret outside the prefix")

	src = ds.source()
	src["port"] = 1 // nothing listens there
	patchSource(src)
	c.waitSynced(regID, "False", "DatasourceUnreachable", nil)
	unchanged("an unreachable datasource")

	patchSource(ds.source())
	c.waitSynced(regID, "True", "Synced", nil)
	ds.exec("DROP TABLE tenants")
	c.waitSynced(regID, "False", "QueryFailed", nil)
	unchanged("a dropped table")
	// The reason is said once: beside the condition's message, and once at
	// the start of the Event's.
	if _, syn := c.registryStatus(regID); strings.Contains(fmt.Sprint(syn["message"]), "QueryFailed") {
		t.Errorf("the Synced condition's message repeats its reason: %v", syn)
	}
	waitFor(t, 60*time.Second, "a SyncFailed Warning for the dropped table", func() error {
		e := hasEvent(c.events(regID), "SyncFailed", "QueryFailed: ")
		if e == nil {
			return fmt.Errorf("no SyncFailed Event with QueryFailed in %v", c.events(regID))
		}
		if msg := fmt.Sprint(e["message"]); strings.Count(msg, "QueryFailed") != 1 || !strings.HasPrefix(msg, "QueryFailed: ") {
			t.Fatalf("the Event's message repeats the reason: %q", msg)
		}
		return nil
	})
}
