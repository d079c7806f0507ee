package main

// bench_api.go is issue 2's benchmark ("make bench" under "Must show"):
// creates/s through the HTTP API at concurrency 1 and 32 with p50/p99,
// against the ceiling of the same PostgreSQL (one pgx transaction per row
// inserting a resource row and its outbox row); the time to list 10,000
// resources; and the RSS of the no8s processes with 50,000 resources stored.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Issue 2's targets.
const (
	apiTargetRatio     = 0.30                   // creates/s at c=32 vs the ceiling at c=32
	apiTargetP99       = 50 * time.Millisecond  // create latency at c=1 (issue 2)
	apiTargetP99C32    = 25 * time.Millisecond  // create latency at c=32 (issue 13)
	apiTargetList10k   = 300 * time.Millisecond // 10,000 resources, all pages
	apiTargetRSSTotal  = 300 << 20              // bytes, every no8s process with 50,000 stored
	apiListCount       = 10_000
	apiRSSCount        = 50_000
	apiWarmup          = time.Second
	apiMeasure         = 5 * time.Second
	apiBulkConcurrency = 32
)

// apiConcurrencies are the create concurrencies measured, API and ceiling.
var apiConcurrencies = []int{1, 32}

var apiMeasureFlag = flag.Duration("api-measure", apiMeasure, "api scenarios: how long each concurrency's creates are measured (after a second's warm-up); longer for A/B runs whose creates/s must hold still")

var apiCreatesOnlyFlag = flag.Bool("api-creates-only", false, "api scenarios: measure the API's creates only (no PostgreSQL ceiling, list or memory), for quick A/B runs of creates/s")

// databaseClusterSchema is the seed README's DatabaseCluster schema
// ("Creating a Resource Type").
const databaseClusterSchema = `{
  "type": "object",
  "required": ["engine", "engine_version", "instance_class", "storage_gb"],
  "properties": {
    "engine": {"type": "string", "enum": ["postgres", "mysql", "mariadb"], "description": "Database engine type"},
    "engine_version": {"type": "string", "description": "Database engine version"},
    "instance_class": {"type": "string", "description": "Instance size class (e.g. db.small, db.medium, db.large)"},
    "storage_gb": {"type": "integer", "minimum": 10, "maximum": 10000, "description": "Storage size in GB"},
    "replicas": {"type": "integer", "minimum": 0, "maximum": 5, "default": 0, "description": "Number of read replicas"},
    "backup_retention_days": {"type": "integer", "minimum": 1, "maximum": 35, "default": 7, "description": "Number of days to retain backups"},
    "high_availability": {"type": "boolean", "default": false, "description": "Enable multi-AZ high availability"}
  }
}`

// benchObject returns the labels, annotations and spec of every object the
// benchmarks create: the seed's production-pg spec, a few labels and
// annotations (the Kubernetes peer's objects carry the same).
func benchObject() (labels, annotations map[string]string, spec map[string]any) {
	return map[string]string{
			"app.kubernetes.io/name":    "orders-db",
			"app.kubernetes.io/part-of": "orders",
			"team":                      "payments",
			"environment":               "production",
			"tier":                      "database",
			"region":                    "eu-west-1",
		}, map[string]string{
			"no8s.io/owner":       "payments-oncall@example.com",
			"no8s.io/description": "Primary PostgreSQL cluster of the orders service",
		}, map[string]any{
			"engine":                "postgres",
			"engine_version":        "16.2",
			"instance_class":        "db.large",
			"storage_gb":            500,
			"replicas":              2,
			"backup_retention_days": 14,
			"high_availability":     true,
		}
}

// apiBodyTemplate is a realistic create body (benchObject). %[1]s is the
// type, %[2]s the version, %[3]s the name.
var apiBodyTemplate = func() string {
	labels, annotations, spec := benchObject()
	body := map[string]any{
		"name":                  "NAME",
		"resource_type_name":    "TYPE",
		"resource_type_version": "VERSION",
		"labels":                labels,
		"annotations":           annotations,
		"spec":                  spec,
	}
	raw, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	s := strings.Replace(string(raw), `"TYPE"`, `"%[1]s"`, 1)
	s = strings.Replace(s, `"VERSION"`, `"%[2]s"`, 1)
	return strings.Replace(s, `"NAME"`, `"%[3]s"`, 1)
}()

// apiCreateBody returns the create body of one DatabaseCluster.
func apiCreateBody(version, name string) []byte {
	return createBody("DatabaseCluster", version, name)
}

// createBody returns the create body of one resource of typeName/version
// with the DatabaseCluster spec (the type's schema must accept it).
func createBody(typeName, version, name string) []byte {
	return fmt.Appendf(nil, apiBodyTemplate, typeName, version, name)
}

// apiCreate creates one resource through the API and expects 201.
func apiCreate(ctx context.Context, env *benchEnv, version, name string) error {
	status, _, body, err := env.do(ctx, http.MethodPost, "/api/v1/resources", apiCreateBody(version, name))
	if err != nil {
		return err
	}
	if status != http.StatusCreated {
		return fmt.Errorf("create %s: %d %s", name, status, truncateBytes(body, 500))
	}
	return nil
}

// benchAPI is the "api" scenario.
func benchAPI(ctx context.Context, env *benchEnv) error { return benchAPIOn(ctx, env, false) }

// benchAPIEmbedded runs the same measurements with the store on its embedded
// backend (issue 11): creates/s, list 10,000 and RSS at 50,000, for
// information (the targets are PostgreSQL's; there is no ceiling to compare
// with).
func benchAPIEmbedded(ctx context.Context, env *benchEnv) error { return benchAPIOn(ctx, env, true) }

// benchAPIOn measures the API with the store on the embedded backend or on
// PostgreSQL.
func benchAPIOn(ctx context.Context, env *benchEnv, embedded bool) error {
	if embedded != env.embedded {
		env.useBackend(embedded)
		defer env.useBackend(false) // later scenarios run on PostgreSQL
		if err := env.Restart(ctx); err != nil {
			return err
		}
	} else if err := env.Fresh(ctx); err != nil {
		return err
	}
	var schema json.RawMessage = []byte(databaseClusterSchema)
	// v1beta1 takes the creates/s runs, v1 the 10,000 listed and the bulk.
	for _, v := range []string{"v1", "v1beta1"} {
		if _, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{
			"name": "DatabaseCluster", "version": v, "description": "Managed database cluster", "schema": schema,
		}); err != nil {
			return err
		}
	}
	fmt.Printf("stack: %s, load generator in this process over TCP; store backend: %s\n", describeServices(env), env.backendName())
	fmt.Printf("create body: %d bytes (seed DatabaseCluster spec, 6 labels, 2 annotations)\n", len(apiCreateBody("v1beta1", "api-c32-0000000")))

	// 1. Creates through the API.
	apiRes := map[int]loadResult{}
	var cpuLines []string // where the cores went, per phase
	var disturbed float64 // the most cores other processes took in a phase
	for _, c := range apiConcurrencies {
		cpu0 := env.sampleCPU()
		waitProfiles := env.startProfiles(ctx, fmt.Sprintf("api-%s-c%d", env.backendLabel(), c), apiWarmup+*apiMeasureFlag)
		res, err := runLoad(ctx, loadSpec{Concurrency: c, Warmup: apiWarmup, Duration: *apiMeasureFlag}, true,
			func(ctx context.Context, seq int64) error {
				return apiCreate(ctx, env, "v1beta1", fmt.Sprintf("api-c%d-%07d", c, seq))
			})
		waitProfiles()
		if err != nil {
			return fmt.Errorf("API creates at c=%d: %w", c, err)
		}
		apiRes[c] = res
		cpu1 := env.sampleCPU()
		cpuLines = append(cpuLines, fmt.Sprintf("API c=%d\t%s", c, cpu1.cores(cpu0)))
		disturbed = max(disturbed, cpu1.other(cpu0))
	}

	// 2. The ceiling: the same rows straight into PostgreSQL.
	var ceil map[int]loadResult
	if *apiCreatesOnlyFlag {
		fmt.Printf("\ncreates, %s after %s warm-up each (-api-creates-only: no ceiling, list or memory)\n", *apiMeasureFlag, apiWarmup)
	} else if embedded {
		fmt.Printf("\ncreates, %s after %s warm-up each; no ceiling measured on the embedded backend\n", *apiMeasureFlag, apiWarmup)
	} else {
		var syncCommit, rowBytes string
		var err error
		if ceil, syncCommit, rowBytes, err = apiCeiling(ctx, env, &cpuLines, &disturbed); err != nil {
			return fmt.Errorf("ceiling: %w", err)
		}
		fmt.Printf("\ncreates, %s after %s warm-up each; synchronous_commit = %s; stored row %s\n", *apiMeasureFlag, apiWarmup, syncCommit, rowBytes)
	}
	tw := newTable()
	fmt.Fprintf(tw, "  \tconc\tcreates/s\tp50\tp99\tn\t\n")
	for _, c := range apiConcurrencies {
		r := apiRes[c]
		fmt.Fprintf(tw, "  API (HTTP -> gateway -> admission -> store)\t%d\t%.0f\t%s\t%s\t%d\t\n", c, r.rate(), fmtDur(r.percentile(50)), fmtDur(r.percentile(99)), r.ops)
		env.figure(fmt.Sprintf("API creates/s at c=%d", c), r.rate())
		env.figure(fmt.Sprintf("API create p99 at c=%d, ms", c), ms(r.percentile(99)))
	}
	for _, c := range apiConcurrencies {
		if r, ok := ceil[c]; ok {
			fmt.Fprintf(tw, "  ceiling (pgx tx: row + outbox row)\t%d\t%.0f\t%s\t%s\t%d\t\n", c, r.rate(), fmtDur(r.percentile(50)), fmtDur(r.percentile(99)), r.ops)
		}
	}
	for _, c := range apiConcurrencies {
		if r, ok := ceil[c]; ok {
			fmt.Fprintf(tw, "  ratio API/ceiling\t%d\t%.1f%%\t\t\t\t\n", c, 100*apiRes[c].rate()/r.rate())
		}
	}
	tw.Flush()
	fmt.Println("CPU used while measuring, in cores (warm-up included):")
	tw = newTable()
	for _, l := range cpuLines {
		fmt.Fprintf(tw, "  %s\n", l)
	}
	tw.Flush()
	if *apiCreatesOnlyFlag {
		return nil
	}

	// 3. Listing 10,000 resources of one type, all pages.
	bulkStart := time.Now()
	if err := apiFill(ctx, env, "v1", 0, apiListCount); err != nil {
		return err
	}
	fmt.Printf("\n(stored %d more resources through the API at c=%d in %s)\n", apiListCount, apiBulkConcurrency, time.Since(bulkStart).Round(100*time.Millisecond))
	listPath := "/api/v1/resources?resource_type=DatabaseCluster&resource_type_version=v1"
	cpu0 := env.sampleCPU()
	lists, err := env.timeLists(ctx, listPath, apiListCount, 3)
	if err != nil {
		return err
	}
	best := slices.Min(lists)
	var times []string
	for _, d := range lists {
		times = append(times, fmtDur(d))
	}
	fmt.Printf("list %d resources (one type, limit=1000, %d pages): best %s of 3 (%s)\n", apiListCount, apiListCount/1000, fmtDur(best), strings.Join(times, ", "))
	env.figure(fmt.Sprintf("API LIST %d best of 3, ms", apiListCount), ms(best))
	cpu1 := env.sampleCPU()
	fmt.Printf("  CPU while listing, in cores: %s\n", cpu1.cores(cpu0))
	disturbed = max(disturbed, cpu1.other(cpu0))
	if err := apiProfileLists(ctx, env, listPath); err != nil {
		return err
	}

	// 4. RSS with 50,000 resources stored, after listing them all once.
	stored, _, err := env.listAll(ctx, "/api/v1/resources")
	if err != nil {
		return err
	}
	bulkStart = time.Now()
	if err := apiFill(ctx, env, "v1", apiListCount, apiRSSCount-stored); err != nil {
		return err
	}
	fmt.Printf("(stored %d more resources, to %d in all, through the API at c=%d in %s)\n", apiRSSCount-stored, apiRSSCount, apiBulkConcurrency, time.Since(bulkStart).Round(100*time.Millisecond))
	t0 := time.Now()
	n, pages, err := env.listAll(ctx, "/api/v1/resources")
	if err != nil {
		return err
	}
	if n != apiRSSCount {
		return fmt.Errorf("listed %d resources, want %d", n, apiRSSCount)
	}
	fmt.Printf("list all %d resources (%d pages): %s\n", n, pages, fmtDur(time.Since(t0)))
	stock := fmt.Sprintf("%d resources stored", n)
	if env.pool != nil {
		var outboxRows int
		if err := env.pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&outboxRows); err != nil {
			return err
		}
		stock += fmt.Sprintf(" (%d outbox rows)", outboxRows)
	}
	fmt.Printf("\nmemory with %s, after listing them all:\n", stock)
	tw = newTable()
	fmt.Fprintf(tw, "  process\tpid\tRSS\tpeak RSS (VmHWM)\t\n")
	env.heapProfiles(ctx, "api-rss")
	mem, err := env.serviceMemory()
	if err != nil {
		return err
	}
	var total, totalHWM int64
	for _, m := range mem {
		total += m.rss
		totalHWM += m.peak
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t\n", m.name, m.pid, fmtMiB(m.rss), fmtMiB(m.peak))
	}
	fmt.Fprintf(tw, "  sum\t\t%s\t%s\t\n", fmtMiB(total), fmtMiB(totalHWM))
	tw.Flush()

	if embedded {
		fmt.Println("\nthe embedded backend's figures are for information: the targets are PostgreSQL's (the api scenario)")
		return nil
	}
	fmt.Println("\n(the same figures against Kubernetes, measured in one run: make bench-peer)")
	fmt.Println()

	if disturbed > 0.3 {
		fmt.Printf("NOTE: other processes on this machine used up to %.2f cores during a measurement: the figures are pessimistic; rerun on a quiet machine.\n\n", disturbed)
	}
	ratio := apiRes[32].rate() / ceil[32].rate()
	p99c1, p99c32 := apiRes[1].percentile(99), apiRes[32].percentile(99)
	printTargets(
		targetResult{"creates/s at c=32 vs ceiling", ratio >= apiTargetRatio,
			fmt.Sprintf("%.1f%% = %.0f/s of %.0f/s (target >= %.0f%%)", 100*ratio, apiRes[32].rate(), ceil[32].rate(), 100*apiTargetRatio)},
		targetResult{"create p99 latency at c=32", p99c32 < apiTargetP99C32,
			fmt.Sprintf("%s (target < %s)", fmtDur(p99c32), apiTargetP99C32)},
		targetResult{"create p99 latency at c=1", p99c1 < apiTargetP99,
			fmt.Sprintf("%s (target < %s)", fmtDur(p99c1), apiTargetP99)},
		targetResult{"list 10,000 resources", best < apiTargetList10k,
			fmt.Sprintf("%s (target < %s)", fmtDur(best), apiTargetList10k)},
		targetResult{"RSS of no8s processes at 50,000", total < apiTargetRSSTotal,
			fmt.Sprintf("%s (target < %s)", fmtMiB(total), fmtMiB(apiTargetRSSTotal))},
	)
	return nil
}

// describeServices names the no8s processes and their pids.
func describeServices(env *benchEnv) string {
	var parts []string
	for _, p := range env.services() {
		parts = append(parts, fmt.Sprintf("%s (pid %d)", p.name, p.pid))
	}
	return strings.Join(parts, ", ") + " as separate processes"
}

// apiFill creates n resources of DatabaseCluster/version named bulk-<i>,
// i from first, through the API at apiBulkConcurrency.
func apiFill(ctx context.Context, env *benchEnv, version string, first, n int) error {
	if n <= 0 {
		return nil
	}
	_, err := runLoad(ctx, loadSpec{Concurrency: apiBulkConcurrency, Count: n}, true, func(ctx context.Context, seq int64) error {
		return apiCreate(ctx, env, version, fmt.Sprintf("bulk-%07d", int64(first)+seq))
	})
	return err
}

// apiCeiling measures the database ceiling: at each concurrency, one pgx
// transaction per row inserting a row like the API's into bench_resources
// (the shape of resources: LIKE resources INCLUDING ALL, so the same
// columns, unique keys and indexes, without the foreign key) and its event
// into bench_outbox (LIKE outbox). The row's jsonb columns and the outbox
// payload are copied from a resource the API just stored, so the sizes are
// the same. It returns the results, synchronous_commit, and the row sizes.
func apiCeiling(ctx context.Context, env *benchEnv, cpuLines *[]string, disturbed *float64) (map[int]loadResult, string, string, error) {
	pool := env.pool
	var syncCommit string
	if err := pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&syncCommit); err != nil {
		return nil, "", "", err
	}
	if _, err := pool.Exec(ctx, `
		DROP TABLE IF EXISTS bench_resources, bench_outbox;
		CREATE TABLE bench_resources (LIKE resources INCLUDING ALL);
		CREATE TABLE bench_outbox (LIKE outbox INCLUDING ALL)`); err != nil {
		return nil, "", "", err
	}
	defer func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS bench_resources, bench_outbox`)
	}()
	var tmpl struct {
		typeID                                  int64
		typeName, typeVersion, status, phase    string
		labels, annotations, owners, spec, fins []byte
		eventType, subject                      string
		payload                                 []byte
		rowSize, payloadSize                    int
	}
	if err := pool.QueryRow(ctx, `
		SELECT r.resource_type_id, r.resource_type_name, r.resource_type_version, r.status, r.phase,
		       r.labels::text, r.annotations::text, r.owner_references::text, r.spec::text, r.finalizers::text,
		       o.event_type, o.subject, o.payload, pg_column_size(r.*), octet_length(o.payload)
		FROM resources r JOIN outbox o ON o.resource_id = r.id
		ORDER BY r.id DESC LIMIT 1`).Scan(&tmpl.typeID, &tmpl.typeName, &tmpl.typeVersion, &tmpl.status, &tmpl.phase,
		&tmpl.labels, &tmpl.annotations, &tmpl.owners, &tmpl.spec, &tmpl.fins,
		&tmpl.eventType, &tmpl.subject, &tmpl.payload, &tmpl.rowSize, &tmpl.payloadSize); err != nil {
		return nil, "", "", fmt.Errorf("template row: %w", err)
	}
	var id atomic.Int64
	out := map[int]loadResult{}
	for _, c := range apiConcurrencies {
		cpu0 := env.sampleCPU()
		res, err := runLoad(ctx, loadSpec{Concurrency: c, Warmup: apiWarmup, Duration: *apiMeasureFlag}, true,
			func(ctx context.Context, seq int64) error {
				rid := id.Add(1)
				now := time.Now()
				var uid [16]byte
				_, _ = rand.Read(uid[:])
				uid[6] = uid[6]&0x0f | 0x40
				uid[8] = uid[8]&0x3f | 0x80
				name := fmt.Sprintf("ceil-c%d-%07d", c, seq)
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
				b := &pgx.Batch{}
				b.Queue(`INSERT INTO bench_resources (id, uid, name, resource_type_id, resource_type_name, resource_type_version, labels, annotations,
					owner_references, spec, status, generation, resource_version, phase, finalizers, created_at, updated_at)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, $1, $12, $13, $14, $14)`,
					rid, formatUUID(uid), name, tmpl.typeID, tmpl.typeName, tmpl.typeVersion, tmpl.labels, tmpl.annotations,
					tmpl.owners, tmpl.spec, tmpl.status, tmpl.phase, tmpl.fins, now)
				b.Queue(`INSERT INTO bench_outbox (revision, resource_id, event_type, subject, payload, created_at) VALUES ($1, $1, $2, $3, $4, $5)`,
					rid, tmpl.eventType, tmpl.subject, tmpl.payload, now)
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return err
				}
				return tx.Commit(ctx)
			})
		if err != nil {
			return nil, "", "", fmt.Errorf("c=%d: %w", c, err)
		}
		out[c] = res
		cpu1 := env.sampleCPU()
		*cpuLines = append(*cpuLines, fmt.Sprintf("ceiling c=%d\t%s", c, cpu1.cores(cpu0)))
		*disturbed = max(*disturbed, cpu1.other(cpu0))
	}
	return out, syncCommit, fmt.Sprintf("%d bytes + outbox payload %d bytes", tmpl.rowSize, tmpl.payloadSize), nil
}

// formatUUID formats 16 bytes as a UUID string.
func formatUUID(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// apiListProfile is how long the list is profiled with -profile.
const apiListProfile = 5 * time.Second

// apiProfileLists, with -profile, lists path back to back for
// apiListProfile while every process is profiled (the window "api-list"),
// after the timed lists: where a list's time goes. Without -profile it
// does nothing.
func apiProfileLists(ctx context.Context, env *benchEnv, path string) error {
	if !profiling() {
		return nil
	}
	wait := env.startProfiles(ctx, "api-list", apiListProfile)
	n := 0
	for end := time.Now().Add(apiListProfile); time.Now().Before(end); n++ {
		if _, _, err := env.listAll(ctx, path); err != nil {
			return err
		}
	}
	wait()
	fmt.Printf("  (%d lists in the profiled window)\n", n)
	return nil
}
