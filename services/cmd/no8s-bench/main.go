// Command no8s-bench measures the figures the issues ask for, against real
// processes: each no8s service runs as its own process, the load generator
// is this process, and every figure that has a baseline is printed as a ratio
// against a baseline measured in the same run.
//
//	no8s-bench                 run every default scenario
//	no8s-bench -run api        run the scenarios whose name contains "api"
//	no8s-bench -run '^api$'    run the api scenario alone
//	no8s-bench -run scale      the scale scenario (make bench-scale; never by default)
//	no8s-bench -run peer       no8s against its Kubernetes peer (make bench-peer; never by default)
//	no8s-bench -scrape 1s      scrape /metrics of every process each second meanwhile
//	no8s-bench -run '^reconcile$' -ab-pairs 5 -ab-b '-identities -nats-auth'
//	                           A/B: 5 pairs of runs, A B then B A, …, compared pair by pair
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/no8s/no8s/services/internal/proc"
)

// scenario is one benchmark. run prints its figures to stdout.
type scenario struct {
	name string
	run  func(ctx context.Context, env *benchEnv) error
	// optIn scenarios run only when -run names them exactly.
	optIn bool
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "no8s-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	filter := flag.String("run", "", "run only scenarios whose name matches this regular expression (\"api\": every api scenario, \"^api$\": that one)")
	flag.Parse()
	match, err := regexp.Compile(*filter)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	// Scenarios, in the order they run. Each issue's benchmark adds one line.
	scenarios := []scenario{
		{"api", benchAPI, false},                        // issue 2: creates/s vs the PostgreSQL ceiling, list 10,000, RSS at 50,000
		{"webhook", benchWebhook, false},                // issue 5: p99 a local no-op admission webhook adds to API creates
		{"watch", benchWatch, false},                    // issue 4: fan-out p99 to 1,000 SSE watchers at 200 changes/s, memory per idle watcher
		{"reconcile", benchReconcile, false},            // issue 13: create→Ready latency at 100/200/400/s, reconciles/s at saturation
		{"api-embedded", benchAPIEmbedded, false},       // issue 11: the api scenario's figures with the store on its embedded backend
		{"api-auth", benchAPIAuth, false},               // issue 31: creates/s with an API token and an RS256 JWT vs --auth=none
		{"api-roles", benchAPIRoles, false},             // issue 32: creates/s decided against 50 roles and 200 bindings vs none
		{"tenants", benchTenants, false},                // issue 14: a no-change registry sync of 10,000 rows: ≤ 1.5× a LIST of them, revision unchanged
		{"tenant-children", benchTenantChildren, false}, // 10,000 rows × 3 children all Ready: reconciles/s ≥ 0.8 of the noop saturation measured first (-tenant-chain for a chain)
		{"relationships", benchRelationships, false},    // issue 39: Owns edit→restore and WaitFor creation→Ready p50/p99 over 100, owner reconciles per 100 child changes (no targets)
		{"cloudevents", benchCloudEvents, false},        // issue 18: the relay publish rate with CloudEvents headers vs without
		{"gc", benchGC, false},                          // issue 38: 100 owners deleted → their 10,000 dependents purged (no target)
		{"scale", benchScale, true},                     // issue 13: cost at 10k, 100k, 1M stored resources (make bench-scale)
		{"peer", benchPeer, true},                       // issue 40: the same load against no8s and its Kubernetes peer, back to back (make bench-peer)
	}
	ctx, cancel := proc.SignalContext()
	defer cancel()
	if *abPairsFlag > 0 {
		return runAB(ctx, os.Args[1:])
	}
	env, err := newBenchEnv(ctx)
	if err != nil {
		return err
	}
	defer env.Close()
	if *natsAuthFlag && !*identitiesFlag {
		return fmt.Errorf("-nats-auth needs -identities")
	}
	if *identitiesFlag {
		fmt.Println("identities on: mutual TLS on every internal gRPC listener, the call policy enforced")
	}
	if *natsAuthFlag {
		fmt.Println("NATS users on: nats-server takes only the CA's users, each with its identity's permissions")
	}
	if scraping() {
		sc := env.startScraper(ctx)
		defer func() { fmt.Println(sc.Stop()) }()
	}
	for _, s := range scenarios {
		if !match.MatchString(s.name) || s.optIn && strings.Trim(*filter, "^$") != s.name {
			continue
		}
		fmt.Printf("\n== %s\n", s.name)
		env.scenario = s.name
		start := time.Now()
		if err := s.run(ctx, env); err != nil {
			return env.failed(fmt.Errorf("%s: %w", s.name, err))
		}
		fmt.Printf("(%s took %s)\n", s.name, time.Since(start).Round(time.Second))
	}
	return env.writeFigures()
}
