// Command no8s is the user's entry point to a no8s control plane.
//
//	no8s dev    run the whole control plane in one process
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/sdk/profiling"
	"github.com/no8s/no8s/services/devstack"
	"github.com/no8s/no8s/services/internal/proc"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "no8s:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "no8s",
		Short:         "no8s: a Kubernetes-style control plane for infrastructure",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCmd())
	return root
}

func newDevCmd() *cobra.Command {
	cfg := devstack.DefaultConfig()
	var pprofListen string
	cfg.DatabaseURL = proc.Env("DATABASE_URL", cfg.DatabaseURL)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run gateway, admission, scheduler and store in one process with an embedded NATS JetStream",
		Long: `Runs the whole control plane in one process: an embedded NATS server with
JetStream, and the store, admission, scheduler and api-gateway services
talking over real gRPC on loopback. The REST API listens on 127.0.0.1:8000 (use
--listen :8000 to serve other machines too). The
PostgreSQL database in DATABASE_URL (default: the local server's "no8s"
database) is created when missing and migrated at start.`,
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
	f.StringVar(&pprofListen, "pprof-listen", proc.Env(profiling.EnvListen, profiling.Off), `loopback address of the runtime profiles at /debug/pprof/ ($NO8S_PPROF_LISTEN; "off": none)`)
	f.StringVar(&cfg.HTTPAddr, "listen", cfg.HTTPAddr, "REST API listen address (:8000 for every interface)")
	f.Var(&cfg.Outbound, "outbound-allow", "classes of address besides public ones that webhooks may be called at: loopback, private, link-local")
	f.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "PostgreSQL connection string ($DATABASE_URL)")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "where the embedded JetStream keeps its files")
	f.IntVar(&cfg.NATSPort, "nats-port", cfg.NATSPort, "embedded NATS port (0 picks a free one)")
	f.StringVar(&cfg.StoreAddr, "store-addr", cfg.StoreAddr, "internal store gRPC address")
	f.StringVar(&cfg.AdmissionAddr, "admission-addr", cfg.AdmissionAddr, "internal admission gRPC address")
	f.StringVar(&cfg.WorkerAddr, "worker-listen", cfg.WorkerAddr, "the store's worker address: reconcilers' NO8S_STORE_ADDR (only the WorkerService is served there)")
	return cmd
}
