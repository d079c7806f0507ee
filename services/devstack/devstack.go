// Package devstack runs a whole no8s control plane in one process for
// development: an embedded NATS server with JetStream, and the store,
// admission, scheduler and api-gateway services, each on its own loopback
// port and talking over real gRPC exactly as they do when deployed apart.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/no8s/no8s/libs/sdk/health"
	"github.com/no8s/no8s/libs/sdk/outbound"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission"
	"github.com/no8s/no8s/services/gateway"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/natsembed"
	"github.com/no8s/no8s/services/scheduler"
	"github.com/no8s/no8s/services/store"
)

// Config configures the development stack.
type Config struct {
	// HTTPAddr is the REST API address: loopback only by default
	// ("127.0.0.1:8000"), as a development server should be.
	HTTPAddr string
	// DatabaseURL is the PostgreSQL database; it is created when missing.
	DatabaseURL string
	// DataDir holds the embedded JetStream's files.
	DataDir string
	// NATSPort is the embedded NATS server's port (0 picks a free one).
	NATSPort int
	// StoreAddr and AdmissionAddr are the internal gRPC addresses.
	StoreAddr, AdmissionAddr string
	// WorkerAddr is the store's worker address: reconcilers connect there
	// (NO8S_STORE_ADDR), and only WorkerService is served on it.
	WorkerAddr string
	// Outbound is the address rule for webhook calls (outbound.DevPolicy:
	// loopback and private addresses allowed, link-local refused).
	Outbound outbound.Policy
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	dir := ".no8s"
	if home, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(home, "no8s", "dev")
	}
	return Config{
		HTTPAddr:      "127.0.0.1:8000",
		DatabaseURL:   store.DefaultDatabaseURL,
		DataDir:       dir,
		NATSPort:      4333,
		StoreAddr:     "127.0.0.1:7001",
		AdmissionAddr: "127.0.0.1:7002",
		WorkerAddr:    "127.0.0.1:7003",
		Outbound:      outbound.DevPolicy(),
	}
}

// Run runs the stack until ctx ends, then stops the services in reverse
// dependency order: gateway and scheduler, admission, store, NATS. log is
// the process logger without a service attribute: each service's lines get
// their own (service=store, ...), the stack's own lines service=no8s-dev.
func Run(ctx context.Context, cfg Config, base *slog.Logger) error {
	log := base.With("service", "no8s-dev")
	if err := ensureDatabase(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	port := cfg.NATSPort
	if port == 0 {
		port = -1
	}
	ns, err := natsembed.Start(filepath.Join(cfg.DataDir, "jetstream"), port)
	if err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()
	log.Info("embedded NATS with JetStream", "url", ns.ClientURL())
	nc, err := natsconn.Connect(ns.ClientURL(), "no8s-dev", log)
	if err != nil {
		return err
	}
	defer nc.Close()

	storeLis, err := net.Listen("tcp", cfg.StoreAddr)
	if err != nil {
		return fmt.Errorf("store listen: %w", err)
	}
	workerLis, err := net.Listen("tcp", cfg.WorkerAddr)
	if err != nil {
		return fmt.Errorf("store worker listen: %w", err)
	}
	admissionLis, err := net.Listen("tcp", cfg.AdmissionAddr)
	if err != nil {
		return fmt.Errorf("admission listen: %w", err)
	}
	httpLis, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	scfg := store.DefaultConfig()
	scfg.DatabaseURL = cfg.DatabaseURL
	// A dev data directory outliving its database (or the reverse) is
	// common: rebuild the stream rather than refuse to start.
	scfg.RebuildStreamOnMismatch = true
	storeSvc, err := store.New(ctx, scfg, nc, base.With("service", "store"))
	if err != nil {
		return err
	}
	storeConn, err := grpcserver.Dial(storeLis.Addr().String())
	if err != nil {
		return err
	}
	defer storeConn.Close()
	admissionConn, err := grpcserver.Dial(admissionLis.Addr().String())
	if err != nil {
		return err
	}
	defer admissionConn.Close()
	gcfg := gateway.DefaultConfig()
	if gcfg.JetStream, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	acfg := admission.DefaultConfig()
	acfg.JetStream = gcfg.JetStream
	acfg.Outbound, gcfg.Outbound = cfg.Outbound, cfg.Outbound
	admissionSvc := admission.New(acfg, storev1.NewStoreServiceClient(storeConn), base.With("service", "admission"))
	// One process: the gateway's probes cover every dependency.
	gcfg.Health.Ready = append([]health.Check{health.GRPC("store", storeConn), health.GRPC("admission", admissionConn)}, storeSvc.Probes().Ready...)
	gcfg.Reconcile = reconcilev1.NewReconcileServiceClient(storeConn)
	schedulerSvc, err := scheduler.New(scheduler.DefaultConfig(), gcfg.Reconcile, gcfg.JetStream, base.With("service", "scheduler"))
	if err != nil {
		return err
	}
	gatewaySvc := gateway.New(gcfg, storev1.NewStoreServiceClient(storeConn), admissionv1.NewAdmissionServiceClient(admissionConn), base.With("service", "gateway"))

	// Each tier stops only after the tier in front of it has stopped.
	gatewayCtx, stopGateway := context.WithCancel(ctx)
	defer stopGateway()
	admissionCtx, stopAdmission := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAdmission()
	storeCtx, stopStore := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStore()

	var g errgroup.Group
	g.Go(func() error { return storeSvc.Serve(storeCtx, storeLis, workerLis) })
	g.Go(func() error { return admissionSvc.Serve(admissionCtx, admissionLis) })
	schedulerDone := make(chan struct{})
	g.Go(func() error { defer close(schedulerDone); return schedulerSvc.Run(gatewayCtx) })
	g.Go(func() error {
		err := gatewaySvc.Serve(gatewayCtx, httpLis)
		<-schedulerDone
		stopAdmission()
		stopStore()
		return err
	})
	log.Info("no8s dev is up", "api", "http://"+displayAddr(httpLis.Addr()), "workers", displayAddr(workerLis.Addr()), "database", redact(cfg.DatabaseURL))
	return g.Wait()
}

// ensureDatabase creates the database named in dbURL when it does not exist.
func ensureDatabase(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return fmt.Errorf("connect to %s: %w (is PostgreSQL running? set DATABASE_URL)", redact(dbURL), err)
	}
	u, perr := url.Parse(dbURL)
	if perr != nil {
		return fmt.Errorf("parse database url: %w", perr)
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return fmt.Errorf("connect to create database %s: %w", name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func redact(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "(unparseable)"
	}
	return u.Redacted()
}

func displayAddr(a net.Addr) string {
	s := a.String()
	if strings.HasPrefix(s, "[::]:") {
		return "localhost:" + strings.TrimPrefix(s, "[::]:")
	}
	return s
}
