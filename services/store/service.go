// Package store is the store service: the only database user. It serves
// the StoreService and TokenService gRPC APIs over a storage.Store
// (PostgreSQL, or the embedded backend; Open chooses), runs the outbox
// relay that publishes every committed change to JetStream, and finishes
// the deletion of terminating namespaces (sweepNamespaces).
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/no8s/no8s/libs/api/subjects"
	platformhealth "github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/registry"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/storage"
)

// Service is a running store.
type Service struct {
	cfg   Config
	log   *slog.Logger
	db    storage.Backend
	relay *outbox.Relay
	nc    *nats.Conn
	js    jetstream.JetStream
}

// New opens the database (Open) and connects to NATS, and ensures the
// event stream.
func New(ctx context.Context, cfg Config, nc *nats.Conn, log *slog.Logger) (*Service, error) {
	// The relay exists only once the database is open; commits before
	// that (none are made) would find no relay to wake.
	var relay *outbox.Relay
	hint := func() {
		if relay != nil {
			relay.Hint()
		}
	}
	opts := storage.Options{AfterCommit: hint, HistoryLimit: cfg.HistoryLimit}
	if cfg.Metrics != nil {
		opts.ObserveCommit = newCommitMetrics(cfg.Metrics).observe
	}
	db, err := Open(ctx, cfg, opts, log)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if err := outbox.Prepare(ctx, db.Log, js, cfg.Stream, cfg.RebuildStreamOnMismatch, cfg.RevisionMargin, log); err != nil {
		db.Close()
		return nil, err
	}
	// The reconciler registry's bucket is the store's to create: where NATS
	// checks identities, the reconcilers registering in it may not.
	if _, err := registry.Ensure(ctx, js, subjects.RegistryTTL); err != nil {
		log.Warn("reconciler registry bucket not ensured (reconcilers create it where NATS lets them)", "err", err)
	}
	relay = outbox.New(db.Log, nc, js, cfg.Stream, cfg.Relay, log.With("component", "outbox-relay"))
	relay.RegisterMetrics(cfg.Metrics)
	return &Service{cfg: cfg, log: log, db: db, relay: relay, nc: nc, js: js}, nil
}

// Store returns the domain store (for in-process use and tests).
func (s *Service) Store() storage.Store { return s.db.Store }

// Probes returns the store's probes (package health): ready while the
// database and NATS answer. Both answers carry "degraded" with the relay's
// reason while it has one (outbox.Relay.Degraded): the store still serves.
func (s *Service) Probes() platformhealth.Config {
	return platformhealth.Config{Ready: []platformhealth.Check{
		{Name: s.db.Name, Func: s.db.Store.Ping},
		platformhealth.NATS(s.nc),
	}, Info: s.probeInfo}
}

// probeInfo is what the probes add to their answer: the relay's degraded
// reason, when it has one.
func (s *Service) probeInfo() map[string]any {
	if why := s.relay.Degraded(); why != "" {
		return map[string]any{"degraded": why}
	}
	return nil
}

// Relay returns the outbox relay.
func (s *Service) Relay() *outbox.Relay { return s.relay }

// Serve serves gRPC and runs the relay until ctx ends, then drains in-flight
// calls, stops the relay and closes the database. lis gets StoreService,
// TokenService and ReconcileService (the gateway, admission and the
// scheduler); workerLis, when not nil, gets WorkerService and nothing else:
// the reconciler workers' narrower door.
func (s *Service) Serve(ctx context.Context, lis, workerLis net.Listener) error {
	defer s.db.Close()
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.MustRegister(newOutboxCollector(ctx, s.db.Log))
	}
	opts := append(slices.Clone(s.cfg.GRPCServerOptions), metrics.NewGRPCServer(s.cfg.Metrics).ServerOptions()...)
	srv, hs := grpcserver.New(s.log, opts...)
	storev1.RegisterStoreServiceServer(srv, &handler{store: s.db.Store})
	storev1.RegisterTokenServiceServer(srv, &tokenHandler{store: s.db.Store})
	reconcilev1.RegisterReconcileServiceServer(srv, &reconcileHandler{store: s.db.Store})
	s.log.Info("store serving", "addr", lis.Addr().String())
	var wsrv *grpc.Server
	var whs *health.Server
	if workerLis != nil {
		wsrv, whs = grpcserver.New(s.log, opts...)
		reconcilev1.RegisterWorkerServiceServer(wsrv, &workerHandler{store: s.db.Store, claims: registryClaims(s.js)})
		s.log.Info("store serving workers", "addr", workerLis.Addr().String())
	}

	// The relay stops the store only when it cannot run at all (it could
	// not subscribe to commit hints); what it finds in the stream does not.
	sctx, stopServing := context.WithCancelCause(ctx)
	defer stopServing(nil)
	g, gctx := errgroup.WithContext(sctx)
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	relayDone := make(chan error, 1)
	go func() {
		err := s.relay.Run(relayCtx)
		if err != nil {
			stopServing(err)
		}
		relayDone <- err
	}()
	g.Go(func() error { return grpcserver.Serve(gctx, srv, hs, lis, s.cfg.ShutdownGrace) })
	g.Go(func() error {
		s.watchDatabase(gctx, hs, whs)
		return nil
	})
	g.Go(func() error {
		s.keepRegistryBucket(gctx)
		return nil
	})
	g.Go(func() error {
		sweepNamespaces(gctx, s.db.Store, s.cfg.NamespaceSweep, s.log.With("component", "namespace-sweep"))
		return nil
	})
	if wsrv != nil {
		g.Go(func() error { return grpcserver.Serve(gctx, wsrv, whs, workerLis, s.cfg.ShutdownGrace) })
	}
	err := g.Wait()
	// The relay stops after the last write has been served. Rows it has not
	// published yet stay in the outbox for the next leader: nothing is lost.
	stopRelay()
	if rerr := <-relayDone; err == nil {
		err = rerr
	}
	s.log.Info("store stopped")
	return err
}

// databaseProbe is how often the store checks its database for its gRPC
// health service.
const databaseProbe = time.Second

// watchDatabase keeps the gRPC health service's overall status ("") in
// step with the database every databaseProbe until ctx ends: NOT_SERVING
// while a ping fails (refused, terminated, read-only, too slow), SERVING
// again once it answers. The gateway's, admission's and the scheduler's
// /readyz read it, so they report a store that cannot reach its database.
func (s *Service) watchDatabase(ctx context.Context, servers ...*health.Server) {
	t := time.NewTicker(databaseProbe)
	defer t.Stop()
	var down bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, platformhealth.DefaultTimeout)
		err := s.db.Store.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		st := healthpb.HealthCheckResponse_SERVING
		if err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		for _, hs := range servers {
			if hs != nil {
				hs.SetServingStatus("", st)
			}
		}
		switch {
		case err != nil && !down:
			s.log.Warn("database unreachable: not serving", "backend", s.db.Name, "error", err)
		case err == nil && down:
			s.log.Info("database reachable again: serving", "backend", s.db.Name)
		}
		down = err != nil
	}
}

// registryClaims reads the reconciler registry's claims on types (the KV
// bucket the workers register in), for the worker door's finalizer check.
func registryClaims(js jetstream.KeyValueManager) claimReader {
	return func(ctx context.Context, t sdk.TypeRef) (subjects.TypeClaim, bool, error) {
		kv, err := js.KeyValue(ctx, subjects.RegistryBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return subjects.TypeClaim{}, false, nil // no reconciler has registered
		}
		if err != nil {
			return subjects.TypeClaim{}, false, fmt.Errorf("registry bucket %s: %w", subjects.RegistryBucket, err)
		}
		return registry.Claim(ctx, kv, t)
	}
}
