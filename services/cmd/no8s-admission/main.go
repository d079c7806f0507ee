// Command no8s-admission runs the admission service: schema validation and
// defaulting of resources, the live-reconciler rule (it reads the registry of
// live reconcilers on NATS: --nats-url), then the admission webhook chain,
// before they are stored. It serves /healthz and /readyz on --health-listen
// (default 127.0.0.1:7102): ready while the store and NATS answer.
package main

import (
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/identity"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission"
	"github.com/no8s/no8s/services/internal/flagenv"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/proc"
)

func main() { proc.Main("no8s-admission", newCommand(), "health-listen", "") }

// options are no8s-admission's flags.
type options struct {
	cfg                                      admission.Config
	storeAddr, listen, natsURL, healthListen *string
	grantsFile                               *string
	service                                  *proc.Flags
}

// newCommand returns no8s-admission's command.
func newCommand() *cobra.Command {
	o := &options{cfg: admission.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "no8s-admission",
		Short: "Serve admission: schema validation and defaulting, the live-reconciler rule and the admission webhook chain",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return o.run() },
	}
	fs := cmd.Flags()
	o.storeAddr = fs.String("store-addr", "127.0.0.1:7001", "store gRPC address")
	o.listen = fs.String("listen", "127.0.0.1:7002", "gRPC listen address")
	flagenv.Alias(fs, "listen", "NO8S_ADMISSION_LISTEN")
	o.natsURL = proc.NATSURLFlag(fs, "NATS server URL, for the live reconciler registry")
	o.healthListen = proc.HealthListenFlag(fs, "127.0.0.1:7102")
	fs.DurationVar(&o.cfg.WebhookRefresh, "webhook-refresh", o.cfg.WebhookRefresh, "how often admission webhooks are polled from the store")
	fs.DurationVar(&o.cfg.WebhookChainTimeout, "webhook-chain-timeout", o.cfg.WebhookChainTimeout, "bound of one request's whole admission webhook chain")
	proc.OutboundFlag(fs, &o.cfg.Outbound)
	o.grantsFile = proc.GrantsFlag(fs)
	o.service = proc.ServiceFlags(fs)
	return cmd
}

// run serves admission until SIGINT or SIGTERM.
func (o *options) run() error {
	cfg := o.cfg
	sp, err := o.service.Start("admission")
	if err != nil {
		return err
	}
	defer sp.Stop()
	ctx, log := sp.Ctx, sp.Log
	cfg.Metrics = sp.Metrics
	cfg.GRPCServerOptions = sp.ServerOptions()
	if cfg.Grants, err = proc.LoadGrants(*o.grantsFile, log); err != nil {
		return err
	}

	conn, err := grpcserver.Dial(*o.storeAddr, sp.DialOptions(identity.Store)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	nc, js, err := natsconn.ConnectJetStream(*o.natsURL, "no8s-admission", sp.Identity, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg.JetStream = js
	stopProbes, err := sp.ServeProbes(*o.healthListen, health.GRPC("store", conn), health.NATS(nc))
	if err != nil {
		return err
	}
	defer stopProbes()
	lis, err := net.Listen("tcp", *o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return admission.New(cfg, storev1.NewStoreServiceClient(conn), log).Serve(ctx, lis)
}
