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
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/platform/profiling"
	"github.com/no8s/no8s/libs/platform/tracing/otlp"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/failpoint"
	"github.com/no8s/no8s/services/internal/flagenv"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/proc"
	"github.com/no8s/no8s/services/store"
	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/storage"
)

func main() { proc.Main("no8s-store", newCommand(), "health-listen", "") }

// options are no8s-store's flags.
type options struct {
	cfg                                         store.Config
	natsURL, listen, workerListen, healthListen *string
	pprofListen                                 *string
	maxConns                                    *int
	identity                                    *proc.Identity
}

// newCommand returns no8s-store's command: serve, and the commands migrate
// and rebuild-stream, all with the same flags.
func newCommand() *cobra.Command {
	o := &options{cfg: store.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "no8s-store",
		Short: "Serve the store: the only database user, the StoreService, ReconcileService and WorkerService gRPC APIs, and the event stream's outbox",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return o.serve() },
	}
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.cfg.DatabaseURL, "database-url", store.DefaultDatabaseURL,
		"PostgreSQL connection string, or sqlite:<path> for the embedded development store")
	flagenv.Alias(fs, "database-url", "DATABASE_URL")
	o.natsURL = proc.NATSURLFlag(fs, "NATS server URL")
	o.listen = fs.String("listen", "127.0.0.1:7001", "gRPC listen address (StoreService and ReconcileService: gateway, admission, scheduler)")
	flagenv.Alias(fs, "listen", "NO8S_STORE_LISTEN")
	o.workerListen = fs.String("worker-listen", "127.0.0.1:7003", "gRPC listen address of the workers' door: only WorkerService is served there (\"off\" disables)")
	flagenv.Alias(fs, "worker-listen", "NO8S_STORE_WORKER_LISTEN")
	fs.BoolVar(&o.cfg.Migrate, "migrate", true, "apply pending migrations at start")
	fs.DurationVar(&o.cfg.Relay.Retention, "outbox-retention", o.cfg.Relay.Retention, "how long published outbox rows are kept")
	fs.DurationVar(&o.cfg.Stream.MaxAge, "event-retention", o.cfg.Stream.MaxAge, "how long the event stream keeps events")
	fs.DurationVar(&o.cfg.Relay.DegradedHold, "relay-degraded-hold", o.cfg.Relay.DegradedHold, "how long the store reports itself degraded (its probes' \"degraded\") after the relay last found a message it did not publish in the event stream")
	o.healthListen = proc.HealthListenFlag(fs, "127.0.0.1:7101")
	o.maxConns = fs.Int("max-conns", int(o.cfg.MaxConns), "PostgreSQL pool size")
	fs.IntVar(&o.cfg.HistoryLimit, "history-limit", o.cfg.HistoryLimit, "reconciliation history rows kept per resource")
	fs.DurationVar(&o.cfg.NamespaceSweep, "namespace-sweep", o.cfg.NamespaceSweep, "how often terminating namespaces are finalized (removed once their last resource is gone)")
	fs.BoolVar(&o.cfg.RebuildStreamOnMismatch, "rebuild-stream-on-mismatch", false, "rebuild the event stream at start when it does not belong to the database, instead of refusing to start")
	fs.Int64Var(&o.cfg.RevisionMargin, "revision-margin", o.cfg.RevisionMargin, "how far rebuild-stream moves the revision past the highest one the database or the stream has seen")
	o.pprofListen = proc.ProfileListenFlag(fs)
	o.identity = proc.IdentityFlags(fs)
	cmd.AddCommand(&cobra.Command{
		Use:       "migrate [status]",
		Short:     "Apply pending migrations and exit; migrate status: print the schema version",
		Args:      cobra.MatchAll(cobra.MaximumNArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"status"},
		RunE: func(_ *cobra.Command, args []string) error {
			ctx, cancel := proc.SignalContext()
			defer cancel()
			return runMigrate(ctx, o.config(), len(args) == 1)
		},
	}, &cobra.Command{
		Use:   "rebuild-stream",
		Short: "Make the event stream this database's again after a mismatch (the store refuses to start and names this command); every store must be stopped",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := proc.SignalContext()
			defer cancel()
			creds, _, err := o.identity.Load(proc.Logger("store"))
			if err != nil {
				return err
			}
			return runRebuildStream(ctx, o.config(), *o.natsURL, creds)
		},
	})
	return cmd
}

// config returns the store's configuration from the parsed flags.
func (o *options) config() store.Config {
	cfg := o.cfg
	cfg.MaxConns = int32(*o.maxConns)
	return cfg
}

// serve runs the store until SIGINT or SIGTERM.
func (o *options) serve() error {
	cfg := o.config()
	log := proc.Logger("store")
	ctx, cancel := proc.SignalContext()
	defer cancel()
	if embedded(cfg) {
		log.Warn("serving the embedded SQLite store: it is for development and single-process use; PostgreSQL is the production store",
			"database_url", cfg.DatabaseURL)
	}
	creds, mode, err := o.identity.Load(log)
	if err != nil {
		return err
	}
	stopProfiles, err := profiling.Serve(ctx, *o.pprofListen, log)
	if err != nil {
		return err
	}
	defer stopProfiles()
	tr, err := otlp.Start(ctx, "no8s-store", log)
	if err != nil {
		return err
	}
	defer func() {
		if err := tr.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not sent at shutdown", "error", err)
		}
	}()
	cfg.GRPCServerOptions = append(authz.ServerOptions(creds, mode, log), tr.GRPCServerOptions()...)
	if cfg.Relay.Failpoints, err = failpoint.FromEnv(); err != nil {
		return err
	}
	if failpoint.Compiled {
		log.Warn("this binary is built with failpoints, for tests only", "enabled", cfg.Relay.Failpoints.List())
	}
	if tr.Enabled() {
		cfg.Relay.Tracer = tr.Tracer(outbox.TracerName)
	}
	nc, err := natsconn.Connect(*o.natsURL, "no8s-store", creds, log)
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
	stopProbes, err := health.Serve(ctx, *o.healthListen, health.Handler(probes), log)
	if err != nil {
		return err
	}
	defer stopProbes()
	lis, err := net.Listen("tcp", *o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var workerLis net.Listener
	if *o.workerListen != "off" {
		if workerLis, err = net.Listen("tcp", *o.workerListen); err != nil {
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
