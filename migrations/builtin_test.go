package migrations

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
)

// TestBuiltinSchemasInMigrations: the schemas of the built-in types are
// written once as JSON (builtin/) and copied, compact, into each backend's
// migration; the copies must not drift. A schema changed later is compared
// with the newest migration that writes it.
func TestBuiltinSchemasInMigrations(t *testing.T) {
	for _, m := range []struct {
		pg, lite string
		types    []string
	}{
		{"00006_events_tenants.sql", "00003_events_tenants.sql", []string{"TenantTemplate", "Tenant"}},
		{"00008_httpsource.sql", "00004_httpsource.sql", []string{"HttpSource"}},
		{"00009_registry_privileged.sql", "00005_registry_privileged.sql", []string{"TenantRegistry"}},
		{"00011_roles.sql", "00007_roles.sql", []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}},
	} {
		checkBuiltins(t, m.pg, m.lite, m.types)
	}
}

func checkBuiltins(t *testing.T, pgFile, liteFile string, types []string) {
	t.Helper()
	pg, err := fs.ReadFile(FS, pgFile)
	if err != nil {
		t.Fatal(err)
	}
	lite, err := fs.ReadFile(SQLite(), liteFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range types {
		raw, err := fs.ReadFile(Builtin, "builtin/"+name+".v1.json")
		if err != nil {
			t.Fatal(err)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lit := "'" + c.String() + "'"
		if !strings.Contains(string(pg), "'"+name+"'") || !strings.Contains(string(pg), lit) {
			t.Errorf("%s does not carry builtin/%s.v1.json as written", pgFile, name)
		}
		if !strings.Contains(string(lite), lit) {
			t.Errorf("sqlite/%s does not carry builtin/%s.v1.json as written", liteFile, name)
		}
	}
}
