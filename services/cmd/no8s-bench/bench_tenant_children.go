package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/no8s/no8s/services/reconcilerworker/tenant"
)

// The "tenant-children" scenario: 10,000 rows × one template of 3 children
// (noop serves the child types, the tenant reconciler the Tenants;
// independent children: each Tenant applies its 3 at once, then sees them
// ready; -tenant-chain makes them a dependency chain cfg → db → svc, one
// more Tenant attempt per link) → time from the registry's creation until
// all 40,000 resources (10,000 Tenants and 30,000 children) are Ready (the
// template is created right after the registry), and the reconciles/s that
// implies (the history rows written meanwhile). Target: those reconciles/s
// at least childTargetRatio of the noop reconciler's at saturation,
// measured first on the same stack (the reconcile scenario's saturation
// phase, its flags), so that a slower or busier machine moves both.
const (
	childRows        = 10000
	childTargetRatio = 0.8
)

var tenantChainFlag = flag.Bool("tenant-chain", false, "tenant-children scenario: the 3 children form a dependency chain (cfg → db → svc) instead of being independent")

func benchTenantChildren(ctx context.Context, env *benchEnv) error {
	ts, err := setupTenants(ctx, env, childRows)
	if err != nil {
		return err
	}
	defer ts.cleanup()
	if err := startNoopBench(ctx, env); err != nil {
		return err
	}
	noop, err := reconcileSaturation(ctx, env, *reconcileResourcesFlag, *reconcileDurationFlag)
	if err != nil {
		return fmt.Errorf("noop saturation: %w", err)
	}
	fmt.Println()
	kinds := []string{"BenchCfg", "BenchDB", "BenchSvc"}
	var types []string
	for _, k := range kinds {
		types = append(types, k+"/v1")
	}
	if err := env.startNoopReplicas(ctx, "noop-children", types, []string{"c1"}, "--concurrency", "32"); err != nil {
		return err
	}
	tenv, err := env.reconcilerEnv(tenant.Name, []string{"Tenant/v1"})
	if err != nil {
		return err
	}
	apiURL, err := env.serviceAPI(ctx)
	if err != nil {
		return err
	}
	tp, err := env.startProcEnv("reconciler-tenant", filepath.Join(env.binDir, "no8s-reconciler"), tenv, "tenant", "--api-url", apiURL,
		"--nats-url", env.natsURL, "--store-addr", env.workerAddr, "--replica-id", "tenant-1", "--concurrency", "64", "--health-listen", "off")
	if err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, "the tenant reconciler registered", tp, func() error {
		return env.registered(ctx, []string{"Tenant/v1"})
	}); err != nil {
		return err
	}
	if err := ts.startSync(ctx, env); err != nil {
		return err
	}
	for _, k := range kinds {
		if _, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{"name": k, "version": "v1",
			"schema": map[string]any{"type": "object", "properties": map[string]any{"host": map[string]any{"type": "string"}}}}); err != nil {
			return err
		}
	}
	var historyBefore int64
	if err := env.pool.QueryRow(ctx, `SELECT count(*) FROM reconciliation_history`).Scan(&historyBefore); err != nil {
		return err
	}
	load := loadAverage()
	cpu0 := env.sampleCPU()
	created := time.Now()
	if err := ts.createRegistry(ctx, env); err != nil {
		return err
	}
	children := []any{
		map[string]any{"id": "cfg", "typeName": "BenchCfg", "typeVersion": "v1", "nameTemplate": "{{ .uid }}-cfg", "spec": map[string]any{"host": "{{ .host }}"}},
		map[string]any{"id": "db", "typeName": "BenchDB", "typeVersion": "v1", "nameTemplate": "{{ .uid }}-db", "spec": map[string]any{"host": "{{ .host }}"}},
		map[string]any{"id": "svc", "typeName": "BenchSvc", "typeVersion": "v1", "nameTemplate": "{{ .uid }}-svc", "spec": map[string]any{"host": "{{ .host }}"}},
	}
	shape := "independent"
	if *tenantChainFlag {
		children[1].(map[string]any)["dependIds"] = []string{"cfg"}
		children[2].(map[string]any)["dependIds"] = []string{"db"}
		shape = "a chain"
	}
	if _, err := env.postJSON(ctx, "/api/v1/resources", map[string]any{"name": "bench-web", "resource_type_name": "TenantTemplate",
		"resource_type_version": "v1", "spec": map[string]any{"registryId": "bench-registry", "resources": children}}); err != nil {
		return err
	}
	want := childRows * (1 + len(kinds))
	waitProfiles := env.startProfiles(ctx, "tenant-children", 60*time.Second)
	last := time.Now()
	// Counting 40,000 rows is not free: every 250 ms, as the saturation
	// phase polls, not waitFor's 25 ms.
	if err := pollFor(ctx, 15*time.Minute, 250*time.Millisecond, fmt.Sprintf("%d resources Ready", want), tp, func() error {
		var n int
		if err := env.pool.QueryRow(ctx, `SELECT count(*) FROM resources WHERE resource_type_name IN ('Tenant', 'BenchCfg', 'BenchDB', 'BenchSvc') AND status = 'ready'`).Scan(&n); err != nil {
			return err
		}
		if time.Since(last) > 15*time.Second {
			fmt.Printf("  %s: %d ready\n", time.Since(created).Round(time.Second), n)
			last = time.Now()
		}
		if n < want {
			return fmt.Errorf("%d ready", n)
		}
		return nil
	}); err != nil {
		return err
	}
	took := time.Since(created)
	cpu1 := env.sampleCPU()
	waitProfiles()
	var history int64
	if err := env.pool.QueryRow(ctx, `SELECT count(*) FROM reconciliation_history`).Scan(&history); err != nil {
		return err
	}
	reconciles := history - historyBefore
	lag, err := childReadyToTenant(ctx, env, kinds)
	if err != nil {
		return err
	}
	fmt.Printf("stack: %s, registry-sync, the tenant reconciler (64 at once), noop serving the children (32 at once)\n", describeServices(env))
	fmt.Printf("MariaDB table of %d rows × 1 template × %d children (%s) = %d resources; load average at the start %s, at the end %s\n",
		childRows, len(kinds), shape, want, load, loadAverage())
	fmt.Printf("registry created → all %d Ready: %s; %d reconciles (history rows) = %.0f reconciles/s\n",
		want, took.Round(100*time.Millisecond), reconciles, float64(reconciles)/took.Seconds())
	fmt.Printf("CPU from the registry's creation to all Ready, in cores: %s\n", cpu1.cores(cpu0))
	perReconcile := cpu1.spent(cpu0, "bench") / time.Duration(max(reconciles, 1))
	fmt.Printf("CPU of the stack's processes and PostgreSQL per reconcile: %s\n", fmtDur(perReconcile))
	env.figure("stack CPU per reconcile ms", ms(perReconcile))
	fmt.Printf("a child Ready → its Tenant's next attempt, over %d children: p50 %s, p99 %s\n",
		len(lag), fmtMS(percentile(lag, 50)), fmtMS(percentile(lag, 99)))
	rate := float64(reconciles) / took.Seconds()
	ratio := rate / noop.rate()
	fmt.Printf("noop reconciles/s at saturation on the same stack (above): %.0f; the Tenants and their children's reconciles/s as a ratio of it: %.2f\n",
		noop.rate(), ratio)
	printTargets(targetResult{"tenant-children reconciles/s / noop reconciles/s at saturation", ratio >= childTargetRatio,
		fmt.Sprintf("%.0f / %.0f = %.2f (target ≥ %.1f)", rate, noop.rate(), ratio, childTargetRatio)})
	env.figure("tenant-children reconciles/s", rate)
	env.figure("tenant-children / noop reconciles/s", ratio)
	env.figure("all Ready s", took.Seconds())
	env.figure("reconciles", float64(reconciles))
	env.figure("child Ready→Tenant attempt p50 ms", ms(percentile(lag, 50)))
	env.figure("child Ready→Tenant attempt p99 ms", ms(percentile(lag, 99)))
	return nil
}

// childReadyToTenant is, for each child of the kinds, the time from its
// first successful attempt (when it became Ready) to the start of its
// controller Tenant's next attempt, read from the history: how soon a
// Tenant hears that a child is Ready (a poll's period without Owns).
func childReadyToTenant(ctx context.Context, env *benchEnv, kinds []string) ([]time.Duration, error) {
	rows, err := env.pool.Query(ctx, `WITH child AS (
		SELECT jsonb_path_query_first(r.owner_references, '$[*] ? (@.controller == true).uid') #>> '{}' AS owner,
			(SELECT min(h.reconcile_time) FROM reconciliation_history h WHERE h.resource_id = r.id AND h.success) AS ready_at
		FROM resources r WHERE r.resource_type_name = ANY($1))
		SELECT extract(epoch FROM (SELECT min(h.started_at) FROM reconciliation_history h
			WHERE h.resource_id = t.id AND h.started_at >= c.ready_at) - c.ready_at)::float8
		FROM child c JOIN resources t ON t.uid::text = c.owner WHERE c.ready_at IS NOT NULL`, kinds)
	if err != nil {
		return nil, fmt.Errorf("child Ready → Tenant attempt: %w", err)
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var secs *float64
		if err := rows.Scan(&secs); err != nil {
			return nil, err
		}
		if secs != nil {
			out = append(out, time.Duration(*secs*float64(time.Second)))
		}
	}
	return out, rows.Err()
}

// loadAverage is the machine's 1, 5 and 15 minute load averages, as
// /proc/loadavg gives them ("?" when it cannot be read).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
