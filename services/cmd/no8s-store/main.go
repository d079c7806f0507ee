// Command no8s-store runs the store service: the only PostgreSQL user, which
// serves the StoreService gRPC API and publishes committed changes to
// JetStream through the transactional outbox.
//
//	no8s-store [flags]          serve (probes /healthz, /readyz on --health-listen)
//	no8s-store migrate          apply pending migrations and exit
//	no8s-store migrate status   print the schema version
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/no8s/no8s/libs/sdk/health"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/proc"
	"github.com/no8s/no8s/services/store"
	"github.com/no8s/no8s/services/store/migrate"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "no8s-store:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := store.DefaultConfig()
	fs := flag.NewFlagSet("no8s-store", flag.ExitOnError)
	fs.StringVar(&cfg.DatabaseURL, "database-url", proc.Env("DATABASE_URL", store.DefaultDatabaseURL), "PostgreSQL connection string ($DATABASE_URL)")
	natsURL := fs.String("nats-url", proc.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL ($NATS_URL)")
	listen := fs.String("listen", proc.Env("NO8S_STORE_LISTEN", "127.0.0.1:7001"), "gRPC listen address")
	fs.BoolVar(&cfg.Migrate, "migrate", true, "apply pending migrations at start")
	fs.DurationVar(&cfg.Relay.Retention, "outbox-retention", cfg.Relay.Retention, "how long published outbox rows are kept")
	fs.DurationVar(&cfg.Stream.MaxAge, "event-retention", cfg.Stream.MaxAge, "how long the event stream keeps events")
	healthListen := proc.HealthListenFlag(fs, "127.0.0.1:7101")
	maxConns := fs.Int("max-conns", int(cfg.MaxConns), "PostgreSQL pool size")
	fs.IntVar(&cfg.HistoryLimit, "history-limit", cfg.HistoryLimit, "reconciliation history rows kept per resource")
	_ = fs.Parse(os.Args[1:])
	cfg.MaxConns = int32(*maxConns)
	log := proc.Logger("store")
	ctx, cancel := proc.SignalContext()
	defer cancel()

	if fs.Arg(0) == "migrate" {
		return runMigrate(ctx, cfg, fs.Arg(1) == "status")
	}
	nc, err := natsconn.Connect(*natsURL, "no8s-store", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	svc, err := store.New(ctx, cfg, nc, log)
	if err != nil {
		return err
	}
	stopProbes, err := health.Serve(ctx, *healthListen, health.Handler(svc.Probes()), log)
	if err != nil {
		return err
	}
	defer stopProbes()
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return svc.Serve(ctx, lis)
}

func runMigrate(ctx context.Context, cfg store.Config, statusOnly bool) error {
	pool, err := store.OpenPool(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	if statusOnly {
		cur, newest, err := migrate.Status(ctx, pool)
		if err != nil {
			return err
		}
		fmt.Printf("schema version %d (newest %d)\n", cur, newest)
		return nil
	}
	v, err := migrate.Up(ctx, pool, proc.Logger("store"))
	if err != nil {
		return err
	}
	fmt.Printf("schema at version %d\n", v)
	return nil
}
