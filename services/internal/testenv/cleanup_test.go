package testenv

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// mariaDBAdmin is the machine's MariaDB server (root, no password), where
// the tenant registry tests make their datasources.
const mariaDBAdmin = "root@tcp(127.0.0.1:3306)/"

// TestCleanupLeftovers runs .ci/cleanup-leftovers (what CI runs before the
// tests) against the local servers: of a PostgreSQL database, a MariaDB
// database, a PostgreSQL role and a MariaDB user named for a run started a
// minute ago, and the same for a run started a day ago, it keeps the first
// four and drops the others; a database named in another shape is kept.
func TestCleanupLeftovers(t *testing.T) {
	ctx := t.Context()
	pg, err := pgx.Connect(ctx, adminURL())
	if err != nil {
		t.Fatalf("PostgreSQL at %s (set %s): %v", adminURL(), AdminURLEnv, err)
	}
	t.Cleanup(func() { _ = pg.Close(context.WithoutCancel(ctx)) })
	my, err := sql.Open("mysql", mariaDBAdmin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = my.Close() })

	type names struct{ pgDB, myDB, role, user string }
	newNames := func(r Run) names { return names{r.Name("pgdb"), r.Name("mydb"), r.Name("role"), r.Name("user")} }
	recent := newNames(NewRun(time.Now().Add(-time.Minute)))
	old := newNames(NewRun(time.Now().Add(-24 * time.Hour)))
	other := "no8s_other_shape_" + randomHex(4)
	pgExec := func(q string) {
		t.Helper()
		if _, err := pg.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	myExec := func(q string) {
		t.Helper()
		if _, err := my.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The test's context ends before its cleanups run.
	cleanupCtx := context.WithoutCancel(ctx)
	t.Cleanup(func() { _, _ = pg.Exec(cleanupCtx, "DROP DATABASE IF EXISTS "+other) })
	pgExec("CREATE DATABASE " + other)
	for _, n := range []names{recent, old} {
		t.Cleanup(func() {
			_, _ = pg.Exec(cleanupCtx, "DROP DATABASE IF EXISTS "+n.pgDB)
			_, _ = pg.Exec(cleanupCtx, "DROP ROLE IF EXISTS "+n.role)
			_, _ = my.Exec("DROP DATABASE IF EXISTS " + n.myDB)
			_, _ = my.Exec("DROP USER IF EXISTS " + n.user + "@'%'")
		})
		pgExec("CREATE DATABASE " + n.pgDB)
		pgExec("CREATE ROLE " + n.role)
		myExec("CREATE DATABASE " + n.myDB)
		myExec("CREATE USER " + n.user + "@'%'")
	}

	cmd := exec.CommandContext(ctx, "../../../.ci/cleanup-leftovers")
	cmd.Env = append(os.Environ(), AdminURLEnv+"="+adminURL())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cleanup-leftovers: %v\n%s", err, out)
	}
	t.Logf("cleanup-leftovers:\n%s", out)

	inPG := func(q, name string) int {
		var n int
		if err := pg.QueryRow(ctx, q, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	inMy := func(q, name string) int {
		var n int
		if err := my.QueryRowContext(ctx, q, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exists := func(n names) map[string]bool {
		return map[string]bool{
			"PostgreSQL database " + n.pgDB: inPG(`SELECT count(*) FROM pg_database WHERE datname = $1`, n.pgDB) == 1,
			"PostgreSQL role " + n.role:     inPG(`SELECT count(*) FROM pg_roles WHERE rolname = $1`, n.role) == 1,
			"MariaDB database " + n.myDB:    inMy(`SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?`, n.myDB) == 1,
			"MariaDB user " + n.user:        inMy(`SELECT count(*) FROM mysql.user WHERE User = ?`, n.user) == 1,
		}
	}
	for what, ok := range exists(recent) {
		if !ok {
			t.Errorf("%s (a run started a minute ago) was dropped", what)
		}
	}
	for what, ok := range exists(old) {
		if ok {
			t.Errorf("%s (a run started a day ago) was kept", what)
		}
		if !strings.Contains(string(out), "dropped "+what) {
			t.Errorf("the script did not say it dropped %s", what)
		}
	}
	if inPG(`SELECT count(*) FROM pg_database WHERE datname = $1`, other) != 1 {
		t.Errorf("database %s (not a test run's name) was dropped", other)
	}
}
