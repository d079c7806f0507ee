package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/no8s/no8s/services/internal/tenancy"
	"github.com/no8s/no8s/services/internal/testenv"
)

// TestRegistryQuerySafety is issue 26's scope 1 on the real MariaDB and
// PostgreSQL servers with real binaries: the probe's COMMIT trick is
// refused at admission with its reason and writes nothing; the admin login
// is refused by registry-sync with a PrivilegedLogin condition; a read-only
// login syncs.
func TestRegistryQuerySafety(t *testing.T) {
	c := newTenantCluster(t)
	c.startSync("a")
	c.waitSyncLeads()
	for _, ds := range []*datasourceDB{newMariaDB(t), newPostgresDatasource(t)} {
		t.Run(ds.kind, func(t *testing.T) {
			ds.exec("CREATE TABLE proof (note VARCHAR(20))")
			ds.insert("t1", "https://t1.example.com", "1")
			for i, q := range []string{
				"SELECT id,url,active FROM tenants; COMMIT; INSERT INTO proof(note) VALUES ('x'); SELECT id,url,active FROM tenants",
				"SELECT id,url,active FROM tenants; COMMIT; DROP TABLE proof",
				"WITH w AS (INSERT INTO proof(note) VALUES ('x') RETURNING note) SELECT note AS id, note AS url, note AS active FROM w",
				"SELECT pg_read_file('/etc/passwd') AS id, 'u' AS url, '1' AS active",
				"SELECT LOAD_FILE('/etc/passwd') AS id, 'u' AS url, '1' AS active",
			} {
				src := ds.source()
				delete(src, "table")
				src["query"] = q
				body := registryBody(fmt.Sprintf("trick-%s-%d", ds.kind, i), src)
				body["namespace"] = c.ns
				r := do(t, "POST", c.base+"/api/v1/resources", body)
				if r.status != 400 || !strings.Contains(string(r.body), "/spec/source/query") || !strings.Contains(string(r.body), "the query is refused") {
					t.Fatalf("%q: %d %s", q, r.status, r.body)
				}
				t.Logf("refused: %s", r.body)
			}
			if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'TenantRegistry' AND name LIKE 'trick-%'`); n != 0 {
				t.Fatalf("%d refused registries stored", n)
			}

			// The admin login without allowPrivilegedLogin: a condition.
			src := ds.source()
			delete(src, "allowPrivilegedLogin")
			admin := c.create(registryBody("admin-"+ds.kind, src))
			c.waitSynced(admin["id"].(float64), "False", "PrivilegedLogin", nil)
			_, syn := c.registryStatus(admin["id"].(float64))
			t.Logf("admin login: %v", syn["message"])

			// A read-only login syncs.
			ro := testenv.Name("ro")
			if ds.kind == tenancy.SourcePostgres {
				ds.exec("CREATE ROLE " + ro + " LOGIN")
				ds.exec("GRANT SELECT ON tenants TO " + ro)
				t.Cleanup(func() {
					ds.exec("DROP OWNED BY " + ro)
					ds.exec("DROP ROLE " + ro)
				})
			} else {
				ds.exec("CREATE USER " + ro + "@'%'")
				ds.exec("GRANT SELECT ON " + ds.name + ".tenants TO " + ro + "@'%'")
				t.Cleanup(func() { ds.exec("DROP USER " + ro + "@'%'") })
			}
			src["username"] = ro
			src["query"] = "SELECT id, url, active, plan FROM tenants WHERE id <> ';' -- ; DELETE FROM tenants"
			delete(src, "table")
			reader := c.create(registryBody("readonly-"+ds.kind, src))
			c.waitSynced(reader["id"].(float64), "True", "Synced", func(out map[string]any) error {
				if out["activeRows"] != float64(1) {
					return fmt.Errorf("outputs %v", out)
				}
				return nil
			})

			if n := ds.rows("proof"); n != 0 {
				t.Fatalf("proof has %d rows", n)
			}
		})
	}
}
