// Command no8s-admission runs the admission service: schema validation and
// defaulting of resources, the live-reconciler rule (it reads the registry of
// live reconcilers on NATS: --nats-url), then the admission webhook chain,
// before they are stored. It serves /healthz and /readyz on --health-listen
// (default 127.0.0.1:7102): ready while the store and NATS answer.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/no8s/no8s/libs/sdk/health"
	"github.com/no8s/no8s/libs/sdk/identity"
	"github.com/no8s/no8s/libs/sdk/metrics"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/proc"
)

func main() {
	proc.Builtins("no8s-admission", os.Args[1:], "NO8S_HEALTH_LISTEN", "127.0.0.1:7102")
	proc.TuneGC()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "no8s-admission:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := admission.DefaultConfig()
	fs := flag.NewFlagSet("no8s-admission", flag.ExitOnError)
	storeAddr := fs.String("store-addr", proc.Env("NO8S_STORE_ADDR", "127.0.0.1:7001"), "store gRPC address")
	listen := fs.String("listen", proc.Env("NO8S_ADMISSION_LISTEN", "127.0.0.1:7002"), "gRPC listen address")
	natsURL := fs.String("nats-url", proc.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL, for the live reconciler registry ($NATS_URL)")
	healthListen := proc.HealthListenFlag(fs, "127.0.0.1:7102")
	fs.DurationVar(&cfg.WebhookRefresh, "webhook-refresh", cfg.WebhookRefresh, "how often admission webhooks are polled from the store")
	fs.DurationVar(&cfg.WebhookChainTimeout, "webhook-chain-timeout", cfg.WebhookChainTimeout, "bound of one request's whole admission webhook chain")
	if err := proc.OutboundFlag(fs, &cfg.Outbound); err != nil {
		return err
	}
	grantsFile := proc.GrantsFlag(fs)
	sp, err := proc.Start(fs, os.Args[1:], "admission")
	if err != nil {
		return err
	}
	defer sp.Stop()
	ctx, log := sp.Ctx, sp.Log
	cfg.Metrics = sp.Metrics
	cfg.GRPCServerOptions = sp.IdentityServerOptions()
	if cfg.Grants, err = proc.LoadGrants(*grantsFile, log); err != nil {
		return err
	}

	conn, err := grpcserver.Dial(*storeAddr, sp.DialOptions(identity.Store)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	nc, js, err := natsconn.ConnectJetStream(*natsURL, "no8s-admission", sp.Identity, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg.JetStream = js
	stopProbes, err := health.Serve(ctx, *healthListen, health.Handler(health.Config{
		Metrics: metrics.Handler(sp.Metrics),
		Ready:   []health.Check{health.GRPC("store", conn), health.NATS(nc)},
	}), log)
	if err != nil {
		return err
	}
	defer stopProbes()
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return admission.New(cfg, storev1.NewStoreServiceClient(conn), log).Serve(ctx, lis)
}
