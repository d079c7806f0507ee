package datasource

import (
	"fmt"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/tenancy"
	"github.com/no8s/no8s/services/internal/testenv"
)

// TestServerGuards: past the query check, the servers themselves refuse
// the probe's writes. The COMMIT trick ("SELECT …; COMMIT; INSERT …") and a
// data-modifying WITH write nothing on PostgreSQL and MariaDB, run as the
// admin login with every privilege.
func TestServerGuards(t *testing.T) {
	onBoth(t, func(t *testing.T, d *testDB) {
		d.exec(t, "CREATE TABLE proof (note VARCHAR(20))")
		d.exec(t, "INSERT INTO tenants VALUES ('a', 'https://a.example.com', '1', 'gold')")
		spec := d.spec("", "")
		for _, q := range []string{
			"SELECT id, url, active, plan FROM tenants; COMMIT; INSERT INTO proof(note) VALUES ('x'); SELECT id, url, active, plan FROM tenants",
			"SELECT id, url, active, plan FROM tenants; COMMIT; DROP TABLE proof",
			"INSERT INTO proof(note) VALUES ('x')",
			"WITH w AS (INSERT INTO proof(note) VALUES ('x') RETURNING note) SELECT note AS id, note AS url, note AS active, note AS plan FROM w",
		} {
			if tenancy.CheckQuery(d.kind, q) == nil {
				t.Errorf("the check accepts %q", q)
			}
			_, err := d.query().read(t.Context(), spec.Source, d.user, secret.Value{}, q, columns(spec), reader(t, 100).Limits)
			if err == nil {
				t.Errorf("%q ran", q)
			}
			t.Logf("%s refused by the server: %v", q, err)
		}
		if n := d.countOf(t, "proof"); n != 0 {
			t.Fatalf("proof has %d rows", n)
		}
	})
}

// TestPrivilegedLogin: a privileged login is refused with its privileges
// named, unless allowPrivilegedLogin; a read-only login reads.
func TestPrivilegedLogin(t *testing.T) {
	onBoth(t, func(t *testing.T, d *testDB) {
		ctx := t.Context()
		d.exec(t, "INSERT INTO tenants VALUES ('a', 'https://a.example.com', '1', 'gold')")
		spec := d.spec("tenants", "")
		spec.Source.AllowPrivilegedLogin = false
		_, err := reader(t, 100).Read(ctx, "default", spec)
		if reasonOf(err) != ReasonPrivileged {
			t.Fatalf("admin login: %v", err)
		}
		t.Logf("admin login refused: %v", err)
		spec.Source.AllowPrivilegedLogin = true
		if rows, err := reader(t, 100).Read(ctx, "default", spec); err != nil || len(rows) != 1 {
			t.Fatalf("admin login allowed: %d rows, %v", len(rows), err)
		}

		ro := testenv.Name("ro")
		writer := testenv.Name("rw")
		files := testenv.Name("file")
		if d.kind == tenancy.SourcePostgres {
			for _, q := range []string{
				"CREATE ROLE " + ro + " LOGIN", "GRANT SELECT ON tenants TO " + ro,
				"CREATE ROLE " + files + " LOGIN IN ROLE pg_read_server_files", "GRANT SELECT ON tenants TO " + files,
			} {
				d.exec(t, q)
			}
			t.Cleanup(func() {
				d.exec(t, fmt.Sprintf("DROP OWNED BY %s, %s", ro, files))
				d.exec(t, fmt.Sprintf("DROP ROLE %s, %s", ro, files))
			})
		} else {
			for _, q := range []string{
				"CREATE USER " + ro + "@'%'", "GRANT SELECT ON " + d.name + ".tenants TO " + ro + "@'%'",
				"CREATE USER " + writer + "@'%'", "GRANT SELECT, INSERT ON " + d.name + ".tenants TO " + writer + "@'%'",
				"CREATE USER " + files + "@'%'", "GRANT FILE ON *.* TO " + files + "@'%'", "GRANT SELECT ON " + d.name + ".tenants TO " + files + "@'%'",
			} {
				d.exec(t, q)
			}
			t.Cleanup(func() { d.exec(t, fmt.Sprintf("DROP USER %s@'%%', %s@'%%', %s@'%%'", ro, writer, files)) })
		}
		spec.Source.AllowPrivilegedLogin = false
		spec.Source.Username = ro
		if rows, err := reader(t, 100).Read(ctx, "default", spec); err != nil || len(rows) != 1 {
			t.Fatalf("read-only login: %d rows, %v", len(rows), err)
		}
		refused := map[string]string{files: "FILE"}
		if d.kind == tenancy.SourcePostgres {
			refused[files] = "pg_read_server_files"
		} else {
			refused[writer] = "INSERT"
		}
		for user, priv := range refused {
			spec.Source.Username = user
			_, err := reader(t, 100).Read(ctx, "default", spec)
			if reasonOf(err) != ReasonPrivileged || !strings.Contains(err.Error(), priv) {
				t.Fatalf("login %s with %s: %v", user, priv, err)
			}
			t.Logf("refused: %v", err)
		}
	})
}

func TestGrantPrivileges(t *testing.T) {
	for line, want := range map[string]string{
		"GRANT USAGE ON *.* TO `x`@`%`":                                       "USAGE",
		"GRANT SELECT, INSERT (a, b), UPDATE ON `d`.`t` TO `x`@`%`":           "SELECT|INSERT|UPDATE",
		"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION": "ALL PRIVILEGES|GRANT OPTION",
		"GRANT `role` TO `x`@`%`":                                             "",
		"SET DEFAULT ROLE `role` FOR `x`@`%`":                                 "",
	} {
		if got := strings.Join(grantPrivileges(line), "|"); got != want {
			t.Errorf("%s: %q, want %q", line, got, want)
		}
	}
}
