// Command no8s-scheduler runs the scheduler: it decides which resources
// need a reconcile and dispatches work items on NO8S_RECONCILE. Run two or
// more; one leads (a lease with a fencing epoch in the store), the others
// stand by and take over within --lease + --renew.
//
//	no8s-scheduler --store-addr 127.0.0.1:7001 --nats-url nats://127.0.0.1:4222 --holder sched-a --lease 6s
//
// It serves /healthz and /readyz on --health-listen (default
// 127.0.0.1:7103): ready while the store and NATS answer.
//
// It also runs the garbage collector of owner references
// (--garbage-collector, default true) on a leader lease of its own; its
// writes go through the API at --api-url, fenced by that lease's epoch.
package main

import (
	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/identity"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/flagenv"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/proc"
	"github.com/no8s/no8s/services/scheduler"
)

func main() { proc.Main("no8s-scheduler", newCommand(), "health-listen", "") }

// options are no8s-scheduler's flags.
type options struct {
	cfg                              scheduler.Config
	storeAddr, natsURL, healthListen *string
	service                          *proc.Flags
}

// newCommand returns no8s-scheduler's command.
func newCommand() *cobra.Command {
	o := &options{cfg: scheduler.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "no8s-scheduler",
		Short: "Run the scheduler: decide which resources need a reconcile and dispatch work items (one leader, the others stand by)",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return o.run() },
	}
	fs := cmd.Flags()
	o.storeAddr = fs.String("store-addr", "127.0.0.1:7001", "store gRPC address")
	o.natsURL = proc.NATSURLFlag(fs, "NATS server URL")
	fs.StringVar(&o.cfg.Holder, "holder", "", "this process's name in the leadership lease (default hostname-pid)")
	flagenv.Alias(fs, "holder", "NO8S_SCHEDULER_HOLDER")
	fs.DurationVar(&o.cfg.Lease, "lease", o.cfg.Lease, "leadership lease, whole seconds; a standby takes over within lease + renew")
	fs.DurationVar(&o.cfg.Renew, "renew", 0, "how often the leader renews and standbys campaign (default lease/3)")
	fs.DurationVar(&o.cfg.ItemLease, "item-lease", o.cfg.ItemLease, "how long dispatched work may wait for a worker to lease it: then the item is looked up, dispatched again if it is gone and no attempt took it, and, while still queued with no work of its type leased in that time, the resource is marked ReconcilerNotResponding (a Warning Event and a condition)")
	fs.IntVar(&o.cfg.Dispatchers, "dispatchers", o.cfg.Dispatchers, "concurrent dispatches")
	fs.DurationVar(&o.cfg.LivenessPoll, "liveness-poll", o.cfg.LivenessPoll, "how often the live reconciler registry is read")
	o.healthListen = proc.HealthListenFlag(fs, "127.0.0.1:7103")
	fs.DurationVar(&o.cfg.Relist, "relist", o.cfg.Relist, "how often every resource's state is read again as a safety net (negative: never)")
	fs.BoolVar(&o.cfg.GarbageCollector, "garbage-collector", o.cfg.GarbageCollector, "run the garbage collector of owner references (its own leader lease); false turns it off")
	fs.DurationVar(&o.cfg.GCSweep, "gc-sweep", o.cfg.GCSweep, "how often the garbage collector sweeps every resource with owner references, besides reacting to deletions")
	fs.StringVar(&o.cfg.APIURL, "api-url", o.cfg.APIURL, "the public REST API, where the garbage collector's writes go; with --identity-dir, the gateway's service listener (https://…)")
	o.service = proc.ServiceFlags(fs)
	return cmd
}

// run runs the scheduler until SIGINT or SIGTERM.
func (o *options) run() error {
	cfg := o.cfg
	sp, err := o.service.Start("scheduler")
	if err != nil {
		return err
	}
	defer sp.Stop()
	ctx, log := sp.Ctx, sp.Log
	cfg.Metrics = sp.Metrics
	cfg.Tracing = sp.Tracing
	cfg.Identity = sp.Identity

	conn, err := grpcserver.Dial(*o.storeAddr, sp.DialOptions(identity.Store)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	nc, js, err := natsconn.ConnectJetStream(*o.natsURL, "no8s-scheduler", sp.Identity, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	svc, err := scheduler.New(cfg, reconcilev1.NewReconcileServiceClient(conn), js, log)
	if err != nil {
		return err
	}
	stopProbes, err := sp.ServeProbes(*o.healthListen, health.GRPC("store", conn), health.NATS(nc))
	if err != nil {
		return err
	}
	defer stopProbes()
	return svc.Run(ctx)
}
