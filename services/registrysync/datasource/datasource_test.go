package datasource

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/tenancy"
	"github.com/no8s/no8s/services/internal/testenv"
)

// The real servers of this machine: MariaDB at 127.0.0.1:3306 (root, no
// password) and PostgreSQL at 127.0.0.1:5432 (postgres, trust). Each test
// makes its own database and drops it.

// testDB is a datasource database with a tenants table of three rows, one
// of them with a NULL uid.
type testDB struct {
	kind, name, user string
	port             int
	exec             func(t *testing.T, q string)
	countOf          func(t *testing.T, table string) int
}

func newMySQL(t *testing.T) *testDB {
	admin, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	name := testenv.Name("ds")
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name) })
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	d := &testDB{kind: tenancy.SourceMySQL, name: name, user: "root", port: 3306}
	d.exec = func(t *testing.T, q string) {
		t.Helper()
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	d.countOf = func(t *testing.T, table string) int {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return d
}

func newPostgres(t *testing.T) *testDB {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(ctx) })
	name := testenv.Name("ds")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/"+name+"?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close(ctx)
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	d := &testDB{kind: tenancy.SourcePostgres, name: name, user: "postgres", port: 5432}
	d.exec = func(t *testing.T, q string) {
		t.Helper()
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	d.countOf = func(t *testing.T, table string) int {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return d
}

func (d *testDB) spec(table, query string) tenancy.RegistrySpec {
	return tenancy.RegistrySpec{
		// The admin logins of the test servers are privileged.
		Source: tenancy.Source{Type: d.kind, Host: "127.0.0.1", Port: d.port, Database: d.name, Table: table, Query: query, Username: d.user,
			AllowPrivilegedLogin: true},
		ValueMappings:      tenancy.ValueMappings{UID: "id", HostOrURL: "url", Activate: "active"},
		ExtraValueMappings: map[string]string{"plan": "plan"},
	}
}

// query is the database's reading without Read's checks: the server's
// own guards alone.
func (d *testDB) query() query {
	dialer := &outbound.Dialer{Policy: outbound.Policy{AllowLoopback: true}}
	if d.kind == tenancy.SourcePostgres {
		return pgQuery{dialer: dialer}
	}
	return mysqlQuery{dialer: dialer}
}

// reader reads at most limit rows; namespace "default" is granted the
// test's secrets (NO8S_TEST_PW, and HOME, outside the prefix) for both
// servers.
func reader(t *testing.T, limit int) *Reader {
	t.Helper()
	var gs []grants.Grant
	for _, name := range []string{"NO8S_TEST_PW", "HOME"} {
		gs = append(gs, grants.Grant{Secret: secret.Env(name), Use: grants.UseDatasource, Namespaces: []string{"default"},
			Destinations: []string{"127.0.0.1:3306", "127.0.0.1:5432"}})
	}
	g, err := grants.New(gs...)
	if err != nil {
		t.Fatal(err)
	}
	return &Reader{
		Grants:  g,
		Dialer:  &outbound.Dialer{Policy: outbound.Policy{AllowLoopback: true}},
		Secrets: secret.Local{EnvPrefix: "NO8S_TEST_", LookupEnv: func(k string) (string, bool) { return "wrong-password", k == "NO8S_TEST_PW" }},
		Limits:  Limits{StatementTimeout: 5 * time.Second, RowLimit: limit},
	}
}

func reasonOf(err error) string {
	var de *Error
	if errors.As(err, &de) {
		return de.Reason
	}
	return ""
}

// onBoth runs f on a fresh database of each real server (MariaDB,
// PostgreSQL) holding an empty tenants table.
func onBoth(t *testing.T, f func(t *testing.T, d *testDB)) {
	for _, mk := range []func(*testing.T) *testDB{newMySQL, newPostgres} {
		d := mk(t)
		t.Run(d.kind, func(t *testing.T) {
			d.exec(t, "CREATE TABLE tenants (id VARCHAR(64), url VARCHAR(200), active VARCHAR(8), plan VARCHAR(20))")
			f(t, d)
		})
	}
}

// TestRead runs every datasource rule against both real servers.
func TestRead(t *testing.T) {
	onBoth(t, func(t *testing.T, d *testDB) {
		ctx := t.Context()
		d.exec(t, "INSERT INTO tenants VALUES ('a', 'https://a.example.com', '1', 'gold'), (NULL, 'x', '1', NULL), ('b', 'b.example.com', NULL, NULL)")

		rows, err := reader(t, 100).Read(ctx, "default", d.spec("tenants", ""))
		if err != nil || len(rows) != 3 {
			t.Fatalf("table: %d rows, %v", len(rows), err)
		}
		if *rows[0].UID != "a" || *rows[0].Extra["plan"] != "gold" || rows[1].UID != nil || rows[2].Activate != nil {
			t.Fatalf("rows %+v", rows)
		}
		rows, err = reader(t, 100).Read(ctx, "default", d.spec("", "SELECT id, url, active, plan FROM tenants WHERE id = 'a'"))
		if err != nil || len(rows) != 1 {
			t.Fatalf("query: %d rows, %v", len(rows), err)
		}

		// A query that tries to write is refused by the check, and,
		// past it, by the READ ONLY transaction; it writes nothing.
		_, err = reader(t, 100).Read(ctx, "default", d.spec("", "DELETE FROM tenants"))
		if reasonOf(err) != ReasonRefused || !errors.Is(err, tenancy.ErrQueryRefused) {
			t.Fatalf("DELETE: %v", err)
		}
		_, err = d.query().read(ctx, d.spec("", "").Source, d.user, secret.Value{}, "DELETE FROM tenants", columns(d.spec("", "")), reader(t, 100).Limits)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "read") {
			t.Fatalf("DELETE past the check: %v", err)
		}
		if n := d.countOf(t, "tenants"); n != 3 {
			t.Fatalf("the DELETE query deleted: %d rows left", n)
		}
		t.Logf("DELETE refused: %v", err)

		// More rows than the limit: an error, never a partial list.
		if _, err := reader(t, 2).Read(ctx, "default", d.spec("tenants", "")); reasonOf(err) != ReasonTooManyRows || strings.Contains(err.Error(), ReasonTooManyRows) {
			t.Fatalf("row limit (the reason beside the message, not in it): %v", err)
		}
		// A mapped column the result lacks.
		if _, err := reader(t, 100).Read(ctx, "default", d.spec("", "SELECT id, url FROM tenants")); reasonOf(err) != ReasonMapping {
			t.Fatalf("missing column: %v", err)
		}
		// A missing table, a wrong password, a secret outside the
		// prefix, an unreachable port, a refused address.
		if _, err := reader(t, 100).Read(ctx, "default", d.spec("nope", "")); reasonOf(err) != ReasonQuery {
			t.Fatalf("missing table: %v", err)
		}
		bad := d.spec("tenants", "")
		bad.Source.PasswordRef = secret.Env("NO8S_TEST_PW")
		if d.kind == tenancy.SourcePostgres {
			bad.Source.Username = "no8s_nobody"
		}
		if _, err := reader(t, 100).Read(ctx, "default", bad); reasonOf(err) != ReasonAuth {
			t.Fatalf("wrong password: %v", err)
		}
		nothing := reader(t, 100)
		nothing.Grants = nil // no grants file
		if _, err := nothing.Read(ctx, "default", bad); reasonOf(err) != ReasonNotGranted || !errors.Is(err, grants.ErrNotGranted) {
			t.Fatalf("no grants file: %v", err)
		}
		if _, err := reader(t, 100).Read(ctx, "team-b", bad); reasonOf(err) != ReasonNotGranted {
			t.Fatalf("a namespace not granted: %v", err)
		}
		bad.Source.PasswordRef = secret.Env("HOME")
		if _, err := reader(t, 100).Read(ctx, "default", bad); reasonOf(err) != ReasonSecret || !errors.Is(err, secret.ErrForbidden) {
			t.Fatalf("secret outside the prefix: %v", err)
		}
		bad = d.spec("tenants", "")
		bad.Source.Port = 1
		if _, err := reader(t, 100).Read(ctx, "default", bad); reasonOf(err) != ReasonUnreachable {
			t.Fatalf("unreachable: %v", err)
		}
		r := reader(t, 100)
		r.Dialer = &outbound.Dialer{} // public addresses only
		if _, err := r.Read(ctx, "default", d.spec("tenants", "")); reasonOf(err) != ReasonAddress || !errors.Is(err, outbound.ErrRefused) {
			t.Fatalf("loopback under the public-only rule: %v", err)
		}
	})
}
