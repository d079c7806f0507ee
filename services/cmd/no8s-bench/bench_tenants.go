package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/no8s/no8s/libs/platform/identity"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // the datasource's setup

	"github.com/no8s/no8s/services/internal/testenv"
)

// The "tenants" scenario (issues 14 and 41): registry-sync keeps 10,000
// Tenants from a 10,000-row MariaDB table with one template; then a
// periodic sync that finds nothing to change must take at most 1.5× one
// LIST of the 10,000 Tenants through the API in the same run, and leave
// the store's revision where it was. The duration is registry-sync's own
// (its debug log line per sync: datasource read, Tenant list, and the
// comparison unless its memo holds).
const (
	tenantRows       = 10000
	tenantSyncVsList = 1.5
	mariaDBBench     = "root@tcp(127.0.0.1:3306)/"
)

var syncLineRE = regexp.MustCompile(`msg=sync .*registry=bench-registry.*created=(\d+) updated=(\d+) deleted=(\d+) unchanged=(\d+) desired=(\d+) duration_ms=([0-9.]+)(?:.* compared=(true|false))?`)

// tenantSetup is what the tenant scenarios share: a fresh store, a MariaDB
// database whose table holds rows active rows (dropped by cleanup), the
// scheduler, and registry-sync serving the registry types.
type tenantSetup struct {
	db      string
	sync    *benchProc
	cleanup func()
}

func setupTenants(ctx context.Context, env *benchEnv, rows int) (*tenantSetup, error) {
	if err := env.Fresh(ctx); err != nil {
		return nil, err
	}
	if env.pool == nil {
		return nil, errors.New("the tenant scenarios need the PostgreSQL backend")
	}
	admin, err := sql.Open("mysql", mariaDBBench)
	if err != nil {
		return nil, err
	}
	ts := &tenantSetup{db: testenv.Name("bench")}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+ts.db); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("MariaDB at 127.0.0.1:3306: %w", err)
	}
	ts.cleanup = func() {
		_, _ = admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+ts.db)
		_ = admin.Close()
	}
	fail := func(err error) (*tenantSetup, error) {
		ts.cleanup()
		return nil, err
	}
	if _, err := admin.ExecContext(ctx, "CREATE TABLE "+ts.db+".tenants (id VARCHAR(64), url VARCHAR(200), active VARCHAR(8))"); err != nil {
		return fail(err)
	}
	for start := 0; start < rows; start += 1000 {
		var vals []string
		for i := start; i < min(start+1000, rows); i++ {
			vals = append(vals, fmt.Sprintf("('t%05d', 'https://t%05d.example.com', '1')", i, i))
		}
		if _, err := admin.ExecContext(ctx, "INSERT INTO "+ts.db+".tenants VALUES "+strings.Join(vals, ",")); err != nil {
			return fail(err)
		}
	}
	if _, err := env.startScheduler(ctx, "bench-tenants"); err != nil {
		return fail(err)
	}
	return ts, nil
}

// startSync starts registry-sync and waits until it serves the registry
// types.
func (ts *tenantSetup) startSync(ctx context.Context, env *benchEnv) error {
	apiURL, err := env.serviceAPI(ctx)
	if err != nil {
		return err
	}
	args, err := env.serviceArgs(identity.RegistrySync, []string{"--api-url", apiURL,
		"--store-addr", env.workerAddr, "--nats-url", env.natsURL, "--replica-id", "bench", "--outbound-allow", "loopback,private",
		"--writes", "16", "--health-listen", "off"})
	if err != nil {
		return err
	}
	sp, err := env.startProcEnv("registry-sync", filepath.Join(env.binDir, "no8s-registry-sync"), []string{"NO8S_LOG_LEVEL=debug"}, args...)
	if err != nil {
		return err
	}
	ts.sync = sp
	return waitFor(ctx, 30*time.Second, "registry-sync serving TenantRegistry/v1", sp, func() error {
		return env.registered(ctx, []string{"TenantRegistry/v1", "TenantTemplate/v1"})
	})
}

// createRegistry creates the registry bench-registry over the table.
func (ts *tenantSetup) createRegistry(ctx context.Context, env *benchEnv) error {
	_, err := env.postJSON(ctx, "/api/v1/resources", map[string]any{"name": "bench-registry", "resource_type_name": "TenantRegistry",
		"resource_type_version": "v1", "spec": map[string]any{
			"source": map[string]any{"type": "mysql", "host": "127.0.0.1", "database": ts.db, "table": "tenants", "username": "root",
				"allowPrivilegedLogin": true}, // the machine's admin login
			"syncInterval":  "3s",
			"valueMappings": map[string]any{"uid": "id", "hostOrUrl": "url", "activate": "active"}}})
	return err
}

func benchTenants(ctx context.Context, env *benchEnv) error {
	ts, err := setupTenants(ctx, env, tenantRows)
	if err != nil {
		return err
	}
	defer ts.cleanup()
	if err := env.startNoopReplicas(ctx, "noop-tenants", []string{"Tenant/v1"}, []string{"t1"}); err != nil {
		return err
	}
	if err := ts.startSync(ctx, env); err != nil {
		return err
	}
	sp := ts.sync
	if _, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{"name": "BenchApp", "version": "v1",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"host": map[string]any{"type": "string"}}}}); err != nil {
		return err
	}
	if err := ts.createRegistry(ctx, env); err != nil {
		return err
	}
	created := time.Now()
	if _, err := env.postJSON(ctx, "/api/v1/resources", map[string]any{"name": "bench-web", "resource_type_name": "TenantTemplate",
		"resource_type_version": "v1", "spec": map[string]any{"registryId": "bench-registry", "resources": []any{map[string]any{
			"id": "app", "typeName": "BenchApp", "typeVersion": "v1", "nameTemplate": "{{ .uid }}-app", "spec": map[string]any{"host": "{{ .host }}"}}}}}); err != nil {
		return err
	}
	if err := waitFor(ctx, 10*time.Minute, "10,000 Tenants", sp, func() error {
		var n int
		if err := env.pool.QueryRow(ctx, `SELECT count(*) FROM resources WHERE resource_type_name = 'Tenant' AND status = 'ready'`).Scan(&n); err != nil {
			return err
		}
		if n < tenantRows {
			return fmt.Errorf("%d ready", n)
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Printf("stack: %s, registry-sync, noop serving Tenant/v1; MariaDB table of %d rows, one template\n", describeServices(env), tenantRows)
	fmt.Printf("initial sync: %d Tenants created and ready in %s\n", tenantRows, time.Since(created).Round(100*time.Millisecond))

	// Let the registry's status settle, then watch three no-change syncs.
	revision := func() (int64, error) {
		var r int64
		err := env.pool.QueryRow(ctx, `SELECT coalesce(pg_sequence_last_value('revision_seq'), 0)`).Scan(&r)
		return r, err
	}
	if err := waitFor(ctx, time.Minute, "the registry's status written", sp, func() error {
		_, _, body, err := env.do(ctx, "GET", "/api/v1/resources/by-name/TenantRegistry/v1/bench-registry", nil)
		if err != nil {
			return err
		}
		if !strings.Contains(string(body), `"ready":10000`) {
			return fmt.Errorf("not yet")
		}
		return nil
	}); err != nil {
		return err
	}
	before, err := revision()
	if err != nil {
		return err
	}
	seenLines := countSyncLines(sp.logPath)
	var durations []time.Duration
	if err := waitFor(ctx, time.Minute, "three no-change syncs", sp, func() error {
		lines := syncLines(sp.logPath)
		durations = durations[:0]
		for _, m := range lines[min(seenLines, len(lines)):] {
			if m[1] != "0" || m[2] != "0" || m[3] != "0" || m[5] != strconv.Itoa(tenantRows) {
				return fmt.Errorf("a sync changed something: %v", m)
			}
			ms, _ := strconv.ParseFloat(m[6], 64)
			durations = append(durations, time.Duration(ms*float64(time.Millisecond)))
		}
		if len(durations) < 3 {
			return fmt.Errorf("%d no-change syncs so far", len(durations))
		}
		return nil
	}); err != nil {
		return err
	}
	after, err := revision()
	if err != nil {
		return err
	}
	// The baseline, in the same run: one LIST of the same 10,000 Tenants
	// through the API, pages of 1,000 (the api scenario's list), three times.
	lists, err := env.timeLists(ctx, "/api/v1/resources?resource_type=Tenant&resource_type_version=v1", tenantRows, 3)
	if err != nil {
		return err
	}
	syncMid, listMid := medianDur(durations[:3]), medianDur(lists)
	compared := 0
	for _, l := range syncLines(sp.logPath)[seenLines : seenLines+3] {
		if l[7] != "false" {
			compared++ // true, or a binary from before the memo
		}
	}
	ratio := float64(syncMid) / float64(listMid)
	fmt.Printf("no-change syncs of %d rows: %v (each: read the table, list the Tenants; %d of the first 3 computed and compared the desired Tenants)\n", tenantRows, durations, compared)
	fmt.Printf("LIST of the %d Tenants (limit=1000): %v\n", tenantRows, lists)
	env.figure("no-change sync of 10,000 rows ms", ms(syncMid))
	env.figure("LIST 10,000 ms", ms(listMid))
	env.figure("no-change sync / LIST", ratio)
	printTargets(
		targetResult{"no-change sync of 10,000 rows", ratio <= tenantSyncVsList,
			fmt.Sprintf("median %s = %.2f× the median LIST of 10,000 (%s) (target ≤ %.1f×)", fmtDur(syncMid), ratio, fmtDur(listMid), tenantSyncVsList)},
		targetResult{"store revision across the no-change syncs", after == before, fmt.Sprintf("%d → %d (target unchanged)", before, after)},
	)
	return nil
}

// medianDur is the median of ds (the upper one of an even count).
func medianDur(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

func syncLines(path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := syncLineRE.FindStringSubmatch(sc.Text()); m != nil {
			out = append(out, m)
		}
	}
	return out
}

func countSyncLines(path string) int { return len(syncLines(path)) }
