// Command no8s-registry-sync runs registry-sync: it reads every
// TenantRegistry's datasource and keeps one Tenant per active row and
// referencing template, and polls every HttpSource's URL and keeps one
// resource per item of its list. Run two or more; one leads (a leader lease with a
// fencing epoch in the store), the others stand by and take over within
// --lease + --renew. Every Tenant write goes through the API at --api-url,
// fenced by the leader's epoch.
//
//	no8s-registry-sync --api-url http://127.0.0.1:8000 --store-addr 127.0.0.1:7003 --nats-url nats://127.0.0.1:4222
//
// Credentials: a registry's passwordRef {"env": "NAME"} must start with
// --secret-env-prefix (default NO8S_REGISTRY_); {"file": "/path"} must be
// under --secret-dir; so must an HttpSource's header references. Datasource
// hosts and HttpSource URLs follow --outbound-allow, as webhooks do. It serves /healthz and /readyz on --health-listen (default
// 127.0.0.1:7104).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/proc"
	"github.com/no8s/no8s/services/registrysync"
)

func main() { proc.Main("no8s-registry-sync", newCommand(), "health-listen", "") }

// options are no8s-registry-sync's flags.
type options struct {
	cfg                                          registrysync.Config
	storeAddr, natsURL, healthListen, grantsFile *string
	service                                      *proc.Flags
}

// newCommand returns no8s-registry-sync's command.
func newCommand() *cobra.Command {
	o := &options{cfg: registrysync.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "no8s-registry-sync",
		Short: "Run registry-sync: keep one Tenant per datasource row of each TenantRegistry, and one resource per item of each HttpSource's list",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return o.run() },
	}
	fs := cmd.Flags()
	cfg := &o.cfg
	fs.StringVar(&cfg.APIURL, "api-url", cfg.APIURL, "the public REST API, where every Tenant and HttpSource resource write goes; with --identity-dir, the gateway's service listener (https://…)")
	o.storeAddr = fs.String("store-addr", "127.0.0.1:7003", "the store's worker address: leader lease, reads, the registries' and HttpSources' status")
	o.natsURL = proc.NATSURLFlag(fs, "NATS server URL")
	fs.StringVar(&cfg.ReplicaID, "replica-id", "", "this replica's name (default hostname-pid)")
	fs.DurationVar(&cfg.Lease, "lease", cfg.Lease, "leader lease, whole seconds; a standby takes over within lease + renew")
	fs.DurationVar(&cfg.Renew, "renew", 0, "how often the leader renews and standbys campaign (default lease/3)")
	fs.StringVar(&cfg.SecretEnvPrefix, "secret-env-prefix", cfg.SecretEnvPrefix, "required prefix of the environment variables registries' credentials and HttpSources' headers name")
	fs.StringVar(&cfg.SecretDir, "secret-dir", "", "directory that must contain every file registries' credentials and HttpSources' headers name (none: file references refused)")
	fs.DurationVar(&cfg.Limits.StatementTimeout, "statement-timeout", cfg.Limits.StatementTimeout, "bound of a datasource query (and connection)")
	fs.IntVar(&cfg.Limits.RowLimit, "row-limit", cfg.Limits.RowLimit, "most rows a registry (items an HttpSource's list) may have; more fails the sync and writes nothing")
	fs.Int64Var(&cfg.BodyLimit, "body-limit", cfg.BodyLimit, "most bytes of an HttpSource's answer; more fails the poll and writes nothing")
	fs.IntVar(&cfg.Writes, "writes", cfg.Writes, "Tenant and HttpSource resource writes in flight during a sync")
	fs.DurationVar(&cfg.Poll, "poll", cfg.Poll, "how often registries, templates and HttpSources are listed for changes")
	fs.IntVar(&cfg.Syncs, "syncs", cfg.Syncs, "registries and HttpSources synced at once, each on its own (one that hangs holds one slot)")
	fs.DurationVar(&cfg.SyncTimeout, "sync-timeout", cfg.SyncTimeout, "bound of one sync of one registry or HttpSource, its writes included")
	o.healthListen = proc.HealthListenFlag(fs, "127.0.0.1:7104")
	proc.OutboundFlag(fs, &cfg.Outbound)
	o.grantsFile = proc.GrantsFlag(fs)
	o.service = proc.ServiceFlags(fs)
	return cmd
}

// run runs registry-sync until SIGINT or SIGTERM.
func (o *options) run() error {
	cfg := o.cfg
	sp, err := o.service.Start("registry-sync")
	if err != nil {
		return err
	}
	defer sp.Stop()
	ctx, log := sp.Ctx, sp.Log
	cfg.Metrics = sp.Metrics
	cfg.Identity = sp.Identity
	cfg.Tracing = sp.Tracing
	if cfg.Grants, err = proc.LoadGrants(*o.grantsFile, log); err != nil {
		return err
	}
	if cfg.ReplicaID == "" {
		host, _ := os.Hostname()
		cfg.ReplicaID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	conn, err := grpcserver.Dial(*o.storeAddr, sp.DialOptions(identity.Store)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	nc, _, err := natsconn.ConnectJetStream(*o.natsURL, "no8s-registry-sync", sp.Identity, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	svc, err := registrysync.New(cfg, nc, conn, log)
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
