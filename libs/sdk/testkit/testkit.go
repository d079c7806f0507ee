package testkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/no8s/no8s/libs/sdk/client"
	"github.com/no8s/no8s/libs/sdk/outbound"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission"
	"github.com/no8s/no8s/services/gateway"
	"github.com/no8s/no8s/services/scheduler"
	"github.com/no8s/no8s/services/store"
)

// Env is a running control plane.
type Env struct {
	// URL is the api-gateway's base URL (http://127.0.0.1:port).
	URL string
	// DatabaseURL is the fresh database.
	DatabaseURL string
	// NATSURL is the embedded NATS server's client URL.
	NATSURL string
	// NATS is a connection to it.
	NATS *nats.Conn
	// StoreConn is a gRPC connection to the store's main listener.
	StoreConn *grpc.ClientConn
	// WorkerConn is a gRPC connection to the store's worker listener, the
	// one reconcilers use (only WorkerService is served there).
	WorkerConn *grpc.ClientConn
	// Store and Reconcile are the store's gRPC services on its main
	// listener; Worker is the workers' service.
	Store     storev1.StoreServiceClient
	Reconcile reconcilev1.ReconcileServiceClient
	Worker    reconcilev1.WorkerServiceClient
	// Client reads resources the way reconcilers do.
	Client *client.Store
	// HTTP is the client the helpers use.
	HTTP *http.Client
	// Log is where the services (and workers started by RunReconciler) log.
	Log *slog.Logger

	opts  options
	nats  *server.Server
	sched *scheduler.Service
	mu    sync.Mutex
	stops []func()
}

// Option configures Start.
type Option func(*options)

type options struct {
	log          *slog.Logger
	adminURL     string
	historyLimit int
	scheduler    bool
	lease        time.Duration
}

// WithLogger sends the services' logs to l (default: discarded, or stderr
// when NO8S_TESTKIT_LOG is set).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithAdminDatabaseURL sets the admin connection of the PostgreSQL server
// (default $NO8S_TEST_DATABASE_URL or DefaultAdminURL).
func WithAdminDatabaseURL(u string) Option { return func(o *options) { o.adminURL = u } }

// WithHistoryLimit bounds the history rows kept per resource.
func WithHistoryLimit(n int) Option { return func(o *options) { o.historyLimit = n } }

// WithoutScheduler starts no scheduler: nothing is dispatched unless the
// test publishes work items itself.
func WithoutScheduler() Option { return func(o *options) { o.scheduler = false } }

// WithLease sets the reconcile lease of workers started by RunReconciler
// (default 5 s, so that a lost item comes back quickly in tests).
func WithLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// Start boots the control plane and registers its teardown with t.Cleanup.
// It fails the test when PostgreSQL is unreachable.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	o := options{scheduler: true, lease: 5 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		if os.Getenv("NO8S_TESTKIT_LOG") != "" {
			o.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		} else {
			o.log = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
	}
	env := &Env{opts: o, Log: o.log, HTTP: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(env.stop)
	if err := env.start(t); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return env
}

func (e *Env) onStop(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stops = append(e.stops, f)
}

// stop tears everything down in reverse order of start.
func (e *Env) stop() {
	e.mu.Lock()
	stops := e.stops
	e.stops = nil
	e.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
}

func (e *Env) start(t testing.TB) error {
	ctx := context.Background()
	dbURL, drop, err := CreateDatabase(ctx, adminURL(e.opts.adminURL))
	if err != nil {
		return err
	}
	e.onStop(drop)
	e.DatabaseURL = dbURL

	// The broker's directory is removed after the broker stopped: a
	// t.TempDir would be removed first (cleanups run last-in first-out, and
	// the teardown was registered before it) while JetStream still writes.
	dir, err := os.MkdirTemp("", "no8s-testkit-nats-")
	if err != nil {
		return fmt.Errorf("broker directory: %w", err)
	}
	e.onStop(func() { _ = os.RemoveAll(dir) })
	ns, err := StartNATS(dir)
	if err != nil {
		return err
	}
	e.onStop(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	e.nats, e.NATSURL = ns, ns.ClientURL()
	if e.NATS, err = nats.Connect(ns.ClientURL(), nats.Name("no8s-testkit")); err != nil {
		return fmt.Errorf("connect to nats: %w", err)
	}
	e.onStop(e.NATS.Close)
	js, err := jetstream.New(e.NATS)
	if err != nil {
		return err
	}

	storeLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	workerLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	admissionLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	httpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	scfg := store.DefaultConfig()
	scfg.DatabaseURL = dbURL
	scfg.MaxConns = 16
	if e.opts.historyLimit > 0 {
		scfg.HistoryLimit = e.opts.historyLimit
	}
	storeSvc, err := store.New(ctx, scfg, e.NATS, e.Log.With("service", "store"))
	if err != nil {
		return err
	}
	e.serve(func(ctx context.Context) error { return storeSvc.Serve(ctx, storeLis, workerLis) })

	if e.StoreConn, err = Dial(storeLis.Addr().String()); err != nil {
		return err
	}
	e.onStop(func() { _ = e.StoreConn.Close() })
	if e.WorkerConn, err = Dial(workerLis.Addr().String()); err != nil {
		return err
	}
	e.onStop(func() { _ = e.WorkerConn.Close() })
	e.Store = storev1.NewStoreServiceClient(e.StoreConn)
	e.Reconcile = reconcilev1.NewReconcileServiceClient(e.StoreConn)
	e.Worker = reconcilev1.NewWorkerServiceClient(e.WorkerConn)
	e.Client = client.NewStore(e.WorkerConn)

	acfg := admission.DefaultConfig()
	acfg.JetStream = js // the live-reconciler rule
	// Webhooks under test listen on the test machine: allow them as no8s dev does.
	acfg.Outbound = outbound.DevPolicy()
	admissionSvc := admission.New(acfg, e.Store, e.Log.With("service", "admission"))
	e.serve(func(ctx context.Context) error { return admissionSvc.Serve(ctx, admissionLis) })
	admissionConn, err := Dial(admissionLis.Addr().String())
	if err != nil {
		return err
	}
	e.onStop(func() { _ = admissionConn.Close() })

	if e.opts.scheduler {
		if err := e.startScheduler(ctx); err != nil {
			return err
		}
	}

	gcfg := gateway.DefaultConfig()
	gcfg.JetStream = js
	gcfg.Reconcile = e.Reconcile
	gcfg.ShutdownGrace = 2 * time.Second
	gcfg.Outbound = acfg.Outbound
	gatewaySvc := gateway.New(gcfg, e.Store, admissionv1.NewAdmissionServiceClient(admissionConn), e.Log.With("service", "gateway"))
	e.serve(func(ctx context.Context) error { return gatewaySvc.Serve(ctx, httpLis) })
	e.URL = "http://" + httpLis.Addr().String()
	return e.waitHealthy(10 * time.Second)
}

// serve runs a service until teardown.
func (e *Env) serve(run func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	e.onStop(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				e.Log.Warn("service stopped with an error", "error", err)
			}
		case <-time.After(20 * time.Second):
			e.Log.Warn("service did not stop within 20s")
		}
	})
}

func (e *Env) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := e.HTTP.Get(e.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway not healthy within %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Dial connects to a no8s gRPC service on loopback.
func Dial(addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}
