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
// migration; the copies must not drift.
func TestBuiltinSchemasInMigrations(t *testing.T) {
	pg, err := fs.ReadFile(FS, "00006_events_tenants.sql")
	if err != nil {
		t.Fatal(err)
	}
	lite, err := fs.ReadFile(SQLite(), "00003_events_tenants.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"TenantRegistry", "TenantTemplate", "Tenant"} {
		raw, err := fs.ReadFile(Builtin, "builtin/"+name+".v1.json")
		if err != nil {
			t.Fatal(err)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lit := "'" + c.String() + "'"
		if !strings.Contains(string(pg), "'"+name+"', 'v1'") || !strings.Contains(string(pg), lit) {
			t.Errorf("00006_events_tenants.sql does not carry builtin/%s.v1.json as written", name)
		}
		if !strings.Contains(string(lite), lit) {
			t.Errorf("sqlite/00003_events_tenants.sql does not carry builtin/%s.v1.json as written", name)
		}
	}
}
