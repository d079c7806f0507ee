// Command no8s-store runs the store service: the only database user (PostgreSQL,
// or an embedded SQLite file for development), which serves the StoreService
// and ReconcileService gRPC APIs on --listen, the workers' narrower
// WorkerService alone on --worker-listen, and publishes committed changes to
// JetStream through the transactional outbox.
//
//	no8s-store [flags]          serve (probes /healthz, /readyz and /metrics on --health-listen)
//	no8s-store migrate          apply pending migrations and exit
//	no8s-store migrate status   print the schema version
//	no8s-store rebuild-stream   make the event stream this database's again
//	                            after a mismatch (the store refuses to start
//	                            and names this command)
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/no8s/no8s/libs/sdk/health"
	"github.com/no8s/no8s/libs/sdk/identity"
	"github.com/no8s/no8s/libs/sdk/metrics"
	"github.com/no8s/no8s/libs/sdk/profiling"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/proc"
	"github.com/no8s/no8s/services/store"
	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/storage"
)

func main() {
	proc.Builtins("no8s-store", os.Args[1:], "NO8S_HEALTH_LISTEN", "127.0.0.1:7101")
	proc.TuneGC()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "no8s-store:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := store.DefaultConfig()
	fs := flag.NewFlagSet("no8s-store", flag.ExitOnError)
	fs.StringVar(&cfg.DatabaseURL, "database-url", proc.Env("DATABASE_URL", store.DefaultDatabaseURL),
		"PostgreSQL connection string, or sqlite:<path> for the embedded development store ($DATABASE_URL)")
	natsURL := fs.String("nats-url", proc.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL ($NATS_URL)")
	listen := fs.String("listen", proc.Env("NO8S_STORE_LISTEN", "127.0.0.1:7001"), "gRPC listen address (StoreService and ReconcileService: gateway, admission, scheduler)")
	workerListen := fs.String("worker-listen", proc.Env("NO8S_STORE_WORKER_LISTEN", "127.0.0.1:7003"), "gRPC listen address of the workers' door: only WorkerService is served there (\"off\" disables)")
	fs.BoolVar(&cfg.Migrate, "migrate", true, "apply pending migrations at start")
	fs.DurationVar(&cfg.Relay.Retention, "outbox-retention", cfg.Relay.Retention, "how long published outbox rows are kept")
	fs.DurationVar(&cfg.Stream.MaxAge, "event-retention", cfg.Stream.MaxAge, "how long the event stream keeps events")
	fs.DurationVar(&cfg.Relay.DegradedHold, "relay-degraded-hold", cfg.Relay.DegradedHold, "how long the store reports itself degraded (its probes' \"degraded\") after the relay last found a message it did not publish in the event stream")
	healthListen := proc.HealthListenFlag(fs, "127.0.0.1:7101")
	maxConns := fs.Int("max-conns", int(cfg.MaxConns), "PostgreSQL pool size")
	fs.IntVar(&cfg.HistoryLimit, "history-limit", cfg.HistoryLimit, "reconciliation history rows kept per resource")
	fs.DurationVar(&cfg.NamespaceSweep, "namespace-sweep", cfg.NamespaceSweep, "how often terminating namespaces are finalized (removed once their last resource is gone)")
	fs.BoolVar(&cfg.RebuildStreamOnMismatch, "rebuild-stream-on-mismatch", false, "rebuild the event stream at start when it does not belong to the database, instead of refusing to start")
	fs.Int64Var(&cfg.RevisionMargin, "revision-margin", cfg.RevisionMargin, "how far rebuild-stream moves the revision past the highest one the database or the stream has seen")
	pprofListen := proc.ProfileListenFlag(fs)
	idf := proc.IdentityFlags(fs)
	// Commands come first, flags after them or before: both parse.
	args := os.Args[1:]
	var cmd []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = append(cmd, args[0]), args[1:]
	}
	_ = fs.Parse(args)
	cmd = append(cmd, fs.Args()...)
	cmd = append(cmd, "", "")
	cfg.MaxConns = int32(*maxConns)
	log := proc.Logger("store")
	ctx, cancel := proc.SignalContext()
	defer cancel()

	switch cmd[0] {
	case "migrate":
		return runMigrate(ctx, cfg, cmd[1] == "status")
	case "rebuild-stream":
		creds, _, err := idf.Load(log)
		if err != nil {
			return err
		}
		return runRebuildStream(ctx, cfg, *natsURL, creds)
	case "":
	default:
		return fmt.Errorf("unknown command %q (commands: migrate, migrate status, rebuild-stream)", cmd[0])
	}
	if embedded(cfg) {
		log.Warn("serving the embedded SQLite store: it is for development and single-process use; PostgreSQL is the production store",
			"database_url", cfg.DatabaseURL)
	}
	creds, mode, err := idf.Load(log)
	if err != nil {
		return err
	}
	cfg.GRPCServerOptions = authz.ServerOptions(creds, mode, log)
	stopProfiles, err := profiling.Serve(ctx, *pprofListen, log)
	if err != nil {
		return err
	}
	defer stopProfiles()
	nc, err := natsconn.Connect(*natsURL, "no8s-store", creds, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	reg := metrics.NewRegistry()
	cfg.Metrics = reg
	svc, err := store.New(ctx, cfg, nc, log)
	if err != nil {
		return err
	}
	probes := svc.Probes()
	probes.Metrics = metrics.Handler(reg)
	stopProbes, err := health.Serve(ctx, *healthListen, health.Handler(probes), log)
	if err != nil {
		return err
	}
	defer stopProbes()
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var workerLis net.Listener
	if *workerListen != "off" {
		if workerLis, err = net.Listen("tcp", *workerListen); err != nil {
			return fmt.Errorf("worker listen: %w", err)
		}
	}
	return svc.Serve(ctx, lis, workerLis)
}

// embedded reports whether cfg names the embedded store's file.
func embedded(cfg store.Config) bool { return strings.HasPrefix(cfg.DatabaseURL, store.SQLiteScheme) }

func runMigrate(ctx context.Context, cfg store.Config, statusOnly bool) error {
	if embedded(cfg) {
		if statusOnly {
			return fmt.Errorf("migrate status: only for PostgreSQL; the embedded store applies its migrations when it opens")
		}
		cfg.Migrate = true
		db, err := store.Open(ctx, cfg, storage.Options{}, proc.Logger("store"))
		if err != nil {
			return err
		}
		db.Close()
		fmt.Println("schema up to date")
		return nil
	}
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

// runRebuildStream rebuilds the event stream of the database after a
// mismatch (outbox.Rebuild). Every store must be stopped.
func runRebuildStream(ctx context.Context, cfg store.Config, natsURL string, creds *identity.Credentials) error {
	log := proc.Logger("store")
	cfg.MaxConns = 2
	db, err := store.Open(ctx, cfg, storage.Options{}, log)
	if err != nil {
		return err
	}
	defer db.Close()
	nc, js, err := natsconn.ConnectJetStream(natsURL, "no8s-store-rebuild", creds, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	bump, err := outbox.Rebuild(ctx, db.Log, js, cfg.Stream, cfg.RevisionMargin, log)
	if err != nil {
		return err
	}
	fmt.Printf("event stream rebuilt: revisions continue after %d; watchers resuming before it get 410 and list again\n", bump)
	return nil
}
