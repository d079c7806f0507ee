// Command no8s-scheduler runs the scheduler: it decides which resources
// need a reconcile and dispatches work items on NO8S_RECONCILE. Run two or
// more; one leads (a lease with a fencing epoch in the store), the others
// stand by and take over within --lease + --renew.
//
//	no8s-scheduler --store-addr 127.0.0.1:7001 --nats-url nats://127.0.0.1:4222 --holder sched-a --lease 6s
//
// It serves /healthz and /readyz on --health-listen (default
// 127.0.0.1:7103): ready while the store and NATS answer.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/no8s/no8s/libs/sdk/health"
	"github.com/no8s/no8s/libs/sdk/identity"
	"github.com/no8s/no8s/libs/sdk/metrics"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/proc"
	"github.com/no8s/no8s/services/scheduler"
)

func main() {
	proc.Builtins("no8s-scheduler", os.Args[1:], "NO8S_HEALTH_LISTEN", "127.0.0.1:7103")
	proc.TuneGC()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "no8s-scheduler:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := scheduler.DefaultConfig()
	fs := flag.NewFlagSet("no8s-scheduler", flag.ExitOnError)
	storeAddr := fs.String("store-addr", proc.Env("NO8S_STORE_ADDR", "127.0.0.1:7001"), "store gRPC address ($NO8S_STORE_ADDR)")
	natsURL := fs.String("nats-url", proc.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL ($NATS_URL)")
	fs.StringVar(&cfg.Holder, "holder", proc.Env("NO8S_SCHEDULER_HOLDER", ""), "this process's name in the leadership lease (default hostname-pid)")
	fs.DurationVar(&cfg.Lease, "lease", cfg.Lease, "leadership lease, whole seconds; a standby takes over within lease + renew")
	fs.DurationVar(&cfg.Renew, "renew", 0, "how often the leader renews and standbys campaign (default lease/3)")
	fs.DurationVar(&cfg.ItemLease, "item-lease", cfg.ItemLease, "how long dispatched work may wait for a worker to lease it: then the resource is marked ReconcilerNotResponding (a Warning Event and a condition), and the item is looked up and dispatched again if it is gone")
	fs.IntVar(&cfg.Dispatchers, "dispatchers", cfg.Dispatchers, "concurrent dispatches")
	fs.DurationVar(&cfg.LivenessPoll, "liveness-poll", cfg.LivenessPoll, "how often the live reconciler registry is read")
	healthListen := proc.HealthListenFlag(fs, "127.0.0.1:7103")
	fs.DurationVar(&cfg.Relist, "relist", cfg.Relist, "how often every resource's state is read again as a safety net (negative: never)")
	sp, err := proc.Start(fs, os.Args[1:], "scheduler")
	if err != nil {
		return err
	}
	defer sp.Stop()
	ctx, log := sp.Ctx, sp.Log
	cfg.Metrics = sp.Metrics

	conn, err := grpcserver.Dial(*storeAddr, sp.DialOptions(identity.Store)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	nc, js, err := natsconn.ConnectJetStream(*natsURL, "no8s-scheduler", sp.Identity, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	svc, err := scheduler.New(cfg, reconcilev1.NewReconcileServiceClient(conn), js, log)
	if err != nil {
		return err
	}
	stopProbes, err := health.Serve(ctx, *healthListen, health.Handler(health.Config{
		Metrics: metrics.Handler(sp.Metrics),
		Ready:   []health.Check{health.GRPC("store", conn), health.NATS(nc)},
	}), log)
	if err != nil {
		return err
	}
	defer stopProbes()
	return svc.Run(ctx)
}
