// Package registrysync is the registry-sync service (seed 002, issue 14):
// for every TenantRegistry it reads the rows of the external datasource,
// keeps the active ones, and makes the set of Tenants equal to (templates
// referencing the registry) × (active rows), at each registry's interval
// and at once when a registry or template changes. One replica leads at a
// time (a leader lease in the store with a fencing epoch); it writes every
// Tenant and Event through the public API, as any client does, each write
// fenced by its epoch, so that a deposed leader changes nothing. While it
// leads it is also the reconciler of TenantRegistry/v1 and TenantTemplate/v1
// (libs/sdk worker), which writes the registries' status. It also polls
// every HttpSource (issue 18) and keeps the resources of its items, through
// the same set-sync and the same fenced writes, and is HttpSource/v1's
// reconciler. See docs/design/tenants.md and docs/design/httpsource.md.
package registrysync

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	apiclient "github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/client"
	"github.com/no8s/no8s/libs/sdk/worker"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/leader"
	"github.com/no8s/no8s/services/registrysync/datasource"
	"github.com/no8s/no8s/services/registrysync/httppoll"
)

// Service is a registry-sync replica.
type Service struct {
	cfg    Config
	log    *slog.Logger
	nc     *nats.Conn
	conn   grpc.ClientConnInterface
	store  *client.Store
	wc     reconcilev1.WorkerServiceClient
	api    *apiclient.Client
	reader *datasource.Reader
	poller *httppoll.Poller
	holder string
	m      *syncMetrics
}

// New returns a replica that reaches the store's worker address over conn,
// NATS over nc and the API at cfg.APIURL.
func New(cfg Config, nc *nats.Conn, conn grpc.ClientConnInterface, log *slog.Logger) (*Service, error) {
	def := DefaultConfig()
	if cfg.Lease <= 0 {
		cfg.Lease = def.Lease
	}
	if cfg.WorkerLease <= 0 {
		cfg.WorkerLease = def.WorkerLease
	}
	if cfg.Writes <= 0 {
		cfg.Writes = def.Writes
	}
	if cfg.Poll <= 0 {
		cfg.Poll = def.Poll
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = def.BodyLimit
	}
	if cfg.Settle <= 0 {
		cfg.Settle = def.Settle
	}
	if cfg.Syncs <= 0 {
		cfg.Syncs = def.Syncs
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = def.SyncTimeout
	}
	if cfg.APIURL == "" {
		return nil, fmt.Errorf("registry-sync: the API URL is required")
	}
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = fmt.Sprintf("r%d", time.Now().UnixNano())
	}
	// A replica id is a worker replica id: A-Z, a-z, 0-9, _ and -.
	cfg.ReplicaID = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, cfg.ReplicaID)
	if len(cfg.ReplicaID) > 128 {
		cfg.ReplicaID = cfg.ReplicaID[:128]
	}
	dialer := &outbound.Dialer{Policy: cfg.Outbound, Timeout: cfg.Limits.StatementTimeout}
	var files secret.Resolver = secret.ResolverFunc(func(_ context.Context, ref secret.Ref) (secret.Value, error) {
		return secret.Value{}, fmt.Errorf("secret reference %s: %w: file references need registry-sync's --secret-dir", ref, secret.ErrForbidden)
	})
	local := secret.Local{EnvPrefix: cfg.SecretEnvPrefix, FileDir: cfg.SecretDir}
	resolver := secret.ResolverFunc(func(ctx context.Context, ref secret.Ref) (secret.Value, error) {
		if ref.Kind == secret.KindFile && cfg.SecretDir == "" {
			return files.Resolve(ctx, ref)
		}
		if ref.Kind == secret.KindEnv && cfg.SecretEnvPrefix == "" {
			return secret.Value{}, fmt.Errorf("secret reference %s: %w: environment references need registry-sync's --secret-env-prefix", ref, secret.ErrForbidden)
		}
		return local.Resolve(ctx, ref)
	})
	api, err := newAPI(cfg.APIURL, cfg.Identity)
	if err != nil {
		return nil, err
	}
	return &Service{
		cfg: cfg, log: log, nc: nc, conn: conn, store: client.NewStore(conn), wc: reconcilev1.NewWorkerServiceClient(conn),
		api:    api,
		reader: &datasource.Reader{Dialer: dialer, Secrets: resolver, Limits: cfg.Limits, Grants: cfg.Grants},
		// HttpSource polls dial through the same rule (each poll has its
		// own timeout, the body included).
		poller: &httppoll.Poller{Grants: cfg.Grants, Client: outbound.NewClient(outbound.NewTransport(&outbound.Dialer{Policy: cfg.Outbound}, nil)),
			Secrets: resolver, BodyLimit: cfg.BodyLimit},
		holder: leaseName + "/" + cfg.ReplicaID,
		m:      newSyncMetrics(cfg.Metrics),
	}, nil
}

// Run campaigns for leadership until ctx ends; while it leads it syncs and
// serves the registries' and templates' reconciles.
func (s *Service) Run(ctx context.Context) error {
	el := leader.New(campaigner{s}, leader.Config{Lease: s.cfg.Lease, Renew: s.cfg.Renew, Name: leaseName}, s.log)
	return el.Run(ctx, s.lead)
}

func (s *Service) lead(ctx context.Context, t *leader.Term) error {
	sy := newSyncer(s, t)
	s.m.leading.Store(sy)
	defer s.m.leading.Store(nil)
	w, err := worker.New(newReconciler(sy), worker.Config{
		Types: authz.RegistrySyncTypes(),
		NATS:  s.nc, Store: s.conn,
	}, worker.WithReplicaID(s.cfg.ReplicaID), worker.WithLease(s.cfg.WorkerLease), worker.WithShutdownGrace(2*time.Second, time.Second),
		worker.WithFetchWait(time.Second), worker.WithLogger(s.log), worker.WithMetrics(s.cfg.Metrics))
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.Run(gctx) })
	g.Go(func() error { return sy.run(gctx) })
	return g.Wait()
}

// list reads every resource of type t in namespace ("": every namespace)
// matching selector through the workers' door.
func (s *Service) list(ctx context.Context, t sdk.TypeRef, namespace, selector string) ([]*sdk.Resource, error) {
	var out []*sdk.Resource
	cont := ""
	for {
		page, err := s.store.List(ctx, sdk.ListOptions{Type: t, Namespace: namespace, LabelSelector: selector, Limit: 1000, Continue: cont})
		if err != nil {
			return out, err
		}
		out = append(out, page.Items...)
		if cont = page.Continue; cont == "" {
			return out, nil
		}
	}
}

// campaigner is the leader lease through WorkerService.CampaignLeader.
type campaigner struct{ s *Service }

func (c campaigner) Campaign(ctx context.Context, epoch int64) (leader.Grant, error) {
	resp, err := c.s.wc.CampaignLeader(ctx, &reconcilev1.CampaignLeaderRequest{
		Name: leaseName, Holder: c.s.holder, LeaseSeconds: int32(max(c.s.cfg.Lease/time.Second, 1)), Epoch: epoch,
	})
	if err != nil {
		return leader.Grant{}, err
	}
	return leader.Grant{Leader: resp.GetLeader(), Epoch: resp.GetEpoch(), Holder: resp.GetCurrentHolder()}, nil
}

func (c campaigner) Release(ctx context.Context, epoch int64) error {
	_, err := c.s.wc.CampaignLeader(ctx, &reconcilev1.CampaignLeaderRequest{Name: leaseName, Holder: c.s.holder, Epoch: epoch, Release: true})
	return err
}
