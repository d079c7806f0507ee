// Command no8s is the user's entry point to a no8s control plane: the
// client commands (package services/cli: apply, diff, get, describe, delete,
// wait, ...) and
//
//	no8s dev    run the whole control plane in one process
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/platform/profiling"
	"github.com/no8s/no8s/services/cli"
	"github.com/no8s/no8s/services/devstack"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/flagenv"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/proc"
)

func main() {
	// no8s healthcheck probes no8s dev's /readyz (its --listen address).
	proc.Builtins("no8s", os.Args[1:], func() string { return "127.0.0.1:8000" })
	proc.TuneGC()
	os.Exit(cli.Main(os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Getenv, newDevCmd()))
}

func newDevCmd() *cobra.Command {
	cfg := devstack.DefaultConfig()
	var pprofListen string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run gateway, admission, scheduler and store in one process with an embedded NATS JetStream and an embedded store",
		Long: `Runs the whole control plane in one process: an embedded NATS server with
JetStream, and the store, admission, scheduler and api-gateway services
talking over real gRPC on loopback, each with its own identity: at first
start a development CA is created in the data directory (identity/ca,
printed at start) and every service is issued a certificate from it; the
gRPC servers require one and enforce the call policy. A reconciler run
beside no8s dev gets its credentials from that CA: no8s-reconciler
--identity-ca DIR, or no8s identity issue --ca-dir DIR (docs/security.md). The REST API listens on 127.0.0.1:8000 (use
--listen :8000 to serve other machines too).

All state lives in the data directory (--data-dir, printed at start): the
embedded store's database (store.db, SQLite) and JetStream's files. To start
afresh, stop no8s dev and remove that directory. With NO8S_DATABASE_URL or
--database-url the store uses that PostgreSQL database instead (created when
missing and migrated at start); PostgreSQL is the production store.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := proc.SignalContext()
			defer cancel()
			log := proc.BaseLogger()
			stopProfiles, err := profiling.Serve(ctx, pprofListen, log.With("service", "no8s-dev"))
			if err != nil {
				return err
			}
			defer stopProfiles()
			return devstack.Run(ctx, cfg, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&pprofListen, "pprof-listen", profiling.Off, `loopback address of the runtime profiles at /debug/pprof/ ("off": none)`)
	f.StringVar(&cfg.HTTPAddr, "listen", cfg.HTTPAddr, "REST API listen address (:8000 for every interface)")
	f.BoolVar(&cfg.TLS, "tls", false, "serve the REST API over HTTPS with a certificate for localhost, 127.0.0.1 and ::1 from a development CA created at first start in <data-dir>/"+devstack.TLSDirName+" (clients trust <data-dir>/"+devstack.TLSDirName+"/ca.crt: curl --cacert, no8s --ca-file)")
	f.StringSliceVar(&cfg.AllowedHosts, "allowed-hosts", nil, "names the REST API answers to besides localhost, 127.0.0.1, ::1 and the --listen host (comma-separated; *.example.com for any name under it); a request for another is refused, 421 host_not_allowed")
	f.Var(&cfg.Outbound, "outbound-allow", "classes of address besides public ones that webhooks may be called at: loopback, private, link-local")
	f.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, `PostgreSQL connection string (empty: the embedded store in the data directory)`)
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "all the state: the embedded store's database and JetStream's files (remove it to start afresh)")
	f.IntVar(&cfg.NATSPort, "nats-port", cfg.NATSPort, "embedded NATS port (0 picks a free one)")
	f.StringVar(&cfg.StoreAddr, "store-addr", cfg.StoreAddr, "internal store gRPC address")
	f.StringVar(&cfg.AdmissionAddr, "admission-addr", cfg.AdmissionAddr, "internal admission gRPC address")
	identities := f.String("identities", "on", "on: every gRPC call between the services is mutual TLS with the call policy enforced, from a CA kept in the data directory; off: plaintext, any caller taken (debugging only)")
	authzMode := f.String("authz", string(authz.Enforce), "with identities on, what the gRPC servers do with a call the policy refuses: enforce, or audit-only (let it through and log it)")
	f.StringVar(&cfg.Auth, "auth", cfg.Auth, "on: every API request needs a token (the administrator's is created at first start in the data directory and written into the CLI's context "+devstack.DevContext+"); none: the API is open to anyone who reaches it")
	f.StringVar(&cfg.CLIConfig, "cli-config", "", "the CLI configuration file to write the "+devstack.DevContext+" context into (default: $NO8S_CONFIG, else ~/.config/no8s/config.yaml; \"off\": none)")
	f.StringVar(&cfg.MetricsAddr, "metrics-listen", cfg.MetricsAddr, "address of every service's Prometheus metrics (GET /metrics; \"off\": none; the default falls back to a free port when taken)")
	f.StringVar(&cfg.AuditLog, "audit-log", "", "the gateway's audit log, one JSON line per write and per denied request: a file, - for stderr, none for nowhere (default: <data-dir>/"+devstack.AuditLogName+")")
	f.BoolVar(&cfg.AuditStream, "audit-stream", cfg.AuditStream, "publish the audit records on the JetStream stream NO8S_AUDIT too")
	f.Float64Var(&cfg.RateLimit, "rate-limit", cfg.RateLimit, "requests per second the API takes from each identity (a user, or a source address without a token), 429 rate_limited beyond; 0: no limit")
	f.StringVar(&cfg.WorkerAddr, "worker-listen", cfg.WorkerAddr, "the store's worker address: reconcilers' NO8S_STORE_ADDR (only the WorkerService is served there)")
	// For the SDK's test kit and other programs that run no8s dev as a
	// child: where it listens, and timings shortened for tests.
	f.StringVar(&cfg.ReadyFile, "ready-file", "", "write the addresses as JSON to this file once every service answers")
	noScheduler := f.Bool("no-scheduler", false, "run no scheduler (a test dispatches work items itself)")
	noRegistrySync := f.Bool("no-registry-sync", false, "run no registry-sync")
	noTenantReconciler := f.Bool("no-tenant-reconciler", false, "run no tenant reconciler (serve Tenant/v1 with another reconciler)")
	f.StringVar(&cfg.RegistrySyncSecretPrefix, "registry-secret-env-prefix", cfg.RegistrySyncSecretPrefix, "required prefix of the environment variables that TenantRegistry credentials name")
	f.StringVar(&cfg.CredentialGrants, "credential-grants", "", "file of credential grants that admission and registry-sync enforce (none: the data directory's "+grants.DevFile+", created empty at first start: nothing granted)")
	f.IntVar(&cfg.HistoryLimit, "history-limit", 0, "reconciliation history rows kept per resource (0: the store's default)")
	f.DurationVar(&cfg.SchedulerTuning.Lease, "scheduler-lease", 0, "the scheduler's leadership lease (0: its default)")
	f.DurationVar(&cfg.SchedulerTuning.ItemLease, "item-lease", 0, "how long dispatched work may wait for a worker to lease it before the resource is marked ReconcilerNotResponding, when no work of its type was leased in that time either (0: the scheduler's default, 30s)")
	f.DurationVar(&cfg.SchedulerTuning.LivenessPoll, "liveness-poll", 0, "how often the scheduler reads the reconciler registry (0: its default)")
	f.DurationVar(&cfg.SchedulerTuning.RetryDelay, "retry-delay", 0, "the first retry after a failed attempt (0: the scheduler's default)")
	f.DurationVar(&cfg.RelayDegradedHold, "relay-degraded-hold", 0, "how long the store reports itself degraded after a foreign message in the event stream (0: its default)")
	for _, name := range []string{"ready-file", "no-scheduler", "no-registry-sync", "history-limit", "scheduler-lease", "liveness-poll", "retry-delay", "relay-degraded-hold"} {
		_ = f.MarkHidden(name)
	}
	// The internal addresses stay off the environment: a reconciler run
	// beside no8s dev reads $NO8S_STORE_ADDR as the worker address.
	flagenv.Local(f, "store-addr", "admission-addr", "worker-listen")
	flagenv.Alias(f, "database-url", "DATABASE_URL")
	flagenv.Alias(f, "identities", devstack.EnvIdentities)
	flagenv.DocumentCommand(cmd)
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := flagenv.Apply(cmd.LocalFlags(), os.Getenv, proc.BaseLogger().With("service", "no8s-dev")); err != nil {
			return err
		}
		cfg.Scheduler, cfg.RegistrySync, cfg.TenantReconciler = !*noScheduler, !*noRegistrySync, !*noTenantReconciler
		var err error
		if cfg.Identities, err = devstack.ParseIdentities(*identities); err != nil {
			return err
		}
		if cfg.Authz, err = authz.ParseMode(*authzMode); err != nil {
			return fmt.Errorf("--authz: %w", err)
		}
		return nil
	}
	return cmd
}
