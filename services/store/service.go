// Package store is the store service: the only PostgreSQL user. It serves
// the StoreService gRPC API over pgstore and runs the outbox relay that
// publishes every committed change to JetStream.
package store

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	sdkhealth "github.com/no8s/no8s/libs/sdk/health"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/pgstore"
)

// Service is a running store.
type Service struct {
	cfg   Config
	log   *slog.Logger
	pool  *pgxpool.Pool
	store *pgstore.Store
	relay *outbox.Relay
	nc    *nats.Conn
}

// OpenPool connects to PostgreSQL and checks the connection.
func OpenPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		pc.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, nil
}

// New connects to PostgreSQL and NATS, applies migrations when configured
// and ensures the event stream.
func New(ctx context.Context, cfg Config, nc *nats.Conn, log *slog.Logger) (*Service, error) {
	pool, err := OpenPool(ctx, cfg.DatabaseURL, cfg.MaxConns)
	if err != nil {
		return nil, err
	}
	if cfg.Migrate {
		v, err := migrate.Up(ctx, pool, log)
		if err != nil {
			pool.Close()
			return nil, err
		}
		log.Info("database schema ready", "version", v)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if err := outbox.Prepare(ctx, pool, js, cfg.Stream, cfg.RebuildStreamOnMismatch, cfg.RevisionMargin, log); err != nil {
		pool.Close()
		return nil, err
	}
	relay := outbox.New(pool, nc, js, cfg.Stream, cfg.Relay, log.With("component", "outbox-relay"))
	return &Service{
		cfg:   cfg,
		log:   log,
		pool:  pool,
		store: pgstore.New(pool, pgstore.WithAfterCommit(relay.Hint), pgstore.WithHistoryLimit(cfg.HistoryLimit)),
		relay: relay,
		nc:    nc,
	}, nil
}

// Store returns the domain store (for in-process use and tests).
func (s *Service) Store() *pgstore.Store { return s.store }

// Probes returns the store's probes (package health): ready while
// PostgreSQL and NATS answer.
func (s *Service) Probes() sdkhealth.Config {
	return sdkhealth.Config{Ready: []sdkhealth.Check{
		{Name: "postgres", Func: func(ctx context.Context) error { return s.pool.Ping(ctx) }},
		sdkhealth.NATS(s.nc),
	}}
}

// Relay returns the outbox relay.
func (s *Service) Relay() *outbox.Relay { return s.relay }

// Serve serves gRPC and runs the relay until ctx ends, then drains in-flight
// calls, stops the relay and closes the pool. lis gets StoreService and
// ReconcileService (the gateway, admission and the scheduler); workerLis,
// when not nil, gets WorkerService and nothing else: the reconciler
// workers' narrower door.
func (s *Service) Serve(ctx context.Context, lis, workerLis net.Listener) error {
	defer s.pool.Close()
	srv, hs := grpcserver.New(s.log)
	storev1.RegisterStoreServiceServer(srv, &handler{store: s.store})
	reconcilev1.RegisterReconcileServiceServer(srv, &reconcileHandler{store: s.store})
	s.log.Info("store serving", "addr", lis.Addr().String())
	var wsrv *grpc.Server
	var whs *health.Server
	if workerLis != nil {
		wsrv, whs = grpcserver.New(s.log)
		reconcilev1.RegisterWorkerServiceServer(wsrv, &workerHandler{store: s.store})
		s.log.Info("store serving workers", "addr", workerLis.Addr().String())
	}

	// A relay that finds the stream is not this database's stops the store.
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
