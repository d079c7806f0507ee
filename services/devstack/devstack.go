// Package devstack runs a whole no8s control plane in one process for
// development: an embedded NATS server with JetStream, and the store,
// admission, scheduler, registry-sync and api-gateway services, each on its own loopback
// port and talking over real gRPC exactly as they do when deployed apart.
package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/health"
	"github.com/no8s/no8s/libs/sdk/identity"
	"github.com/no8s/no8s/libs/sdk/metrics"
	"github.com/no8s/no8s/libs/sdk/outbound"
	"github.com/no8s/no8s/libs/sdk/worker"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission"
	"github.com/no8s/no8s/services/gateway"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/natsembed"
	"github.com/no8s/no8s/services/reconcilerworker/tenant"
	"github.com/no8s/no8s/services/registrysync"
	"github.com/no8s/no8s/services/scheduler"
	"github.com/no8s/no8s/services/store"
)

// Config configures the development stack.
type Config struct {
	// HTTPAddr is the REST API address: loopback only by default
	// ("127.0.0.1:8000"), as a development server should be.
	HTTPAddr string
	// DatabaseURL selects PostgreSQL (the database is created when
	// missing). Empty: the embedded store, in DataDir (StoreURL).
	DatabaseURL string
	// DataDir holds all the stack's state: the embedded store's database
	// (store.db) and the embedded JetStream's files (jetstream/).
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
	// Scheduler runs the scheduler (true by default). Tests that dispatch
	// work items themselves turn it off.
	Scheduler bool
	// SchedulerTuning overrides the scheduler's timings where non-zero.
	SchedulerTuning SchedulerTuning
	// HistoryLimit bounds reconciliation history rows per resource (0: the
	// store's default).
	HistoryLimit int
	// RelayDegradedHold is how long the store reports itself degraded
	// after a foreign message in the event stream (0: its default).
	RelayDegradedHold time.Duration
	// RegistrySync runs registry-sync (true by default): TenantRegistry
	// datasources → Tenants.
	RegistrySync bool
	// TenantReconciler runs the tenant reconciler (true by default): it
	// serves Tenant/v1, writing each Tenant's resources through the REST
	// API. Tests that serve Tenants with another reconciler turn it off.
	TenantReconciler bool
	// RegistrySyncSecretPrefix is the prefix registries' environment
	// secret references need (registry-sync's --secret-env-prefix).
	RegistrySyncSecretPrefix string
	// CredentialGrants is the credential grants file that admission and
	// registry-sync enforce ("": DataDir's grants.DevFile, created at
	// first start with nothing granted).
	CredentialGrants string
	// MetricsAddr is the listener of every service's Prometheus metrics,
	// on one registry (GET /metrics); "off" serves none.
	MetricsAddr string
	// Identities gives every component of the stack an identity from a CA
	// kept in the data directory (IdentityDir, CADir): each gRPC server
	// requires a client certificate and enforces the call policy, each
	// client dials with its own, as the separate services do (true by
	// default; false: plaintext and no policy, for debugging).
	Identities bool
	// Authz is what the stack's gRPC servers do with a call the policy
	// refuses, with Identities on: authz.Enforce (the default) or
	// authz.AuditOnly.
	Authz authz.Mode
	// ReadyFile, when set, receives the stack's addresses as JSON (Ready)
	// once every service answers: a parent process (the SDK's test kit)
	// learns there where the stack listens.
	ReadyFile string

	// storeFault, when closed, stops the embedded store as a crash would:
	// the fault a test injects to see the stack notice.
	storeFault <-chan struct{}
}

// SchedulerTuning are the scheduler timings a test may shorten.
type SchedulerTuning struct {
	// Lease is the leadership lease; ItemLease how long a dispatched item
	// may wait for a worker; LivenessPoll how often the reconciler registry
	// is read; RetryDelay the first retry after a failed attempt.
	Lease, ItemLease, LivenessPoll, RetryDelay time.Duration
}

// Ready is what Run writes to Config.ReadyFile.
type Ready struct {
	// APIURL is the REST API's base URL.
	APIURL string `json:"api_url"`
	// NATSURL is the embedded NATS server's client URL.
	NATSURL string `json:"nats_url"`
	// StoreAddr is the store's main gRPC address; WorkerAddr the workers'
	// (NO8S_STORE_ADDR); AdmissionAddr admission's.
	StoreAddr     string `json:"store_addr"`
	WorkerAddr    string `json:"worker_addr"`
	AdmissionAddr string `json:"admission_addr"`
	// MetricsURL is where the stack's metrics are served ("" when off).
	MetricsURL string `json:"metrics_url,omitempty"`
	// DataDir is the state directory; Store the store's URL (password
	// redacted).
	DataDir string `json:"data_dir"`
	Store   string `json:"store"`
	// CADir is the stack's CA directory and IdentityDir the directory of
	// its components' credentials (both "" with identities off): a
	// reconciler's credentials are issued from CADir (`no8s identity
	// issue --ca-dir`, `no8s-reconciler --identity-ca`).
	CADir       string `json:"ca_dir,omitempty"`
	IdentityDir string `json:"identity_dir,omitempty"`
	// NATSPublisherCreds and NATSReaderCreds are NATS users for a
	// developer's tools (`nats --creds`): one that sends changes on the
	// input subjects and reads their outcomes, one that reads the event
	// stream ("" with identities off, when NATS takes anyone).
	NATSPublisherCreds string `json:"nats_publisher_creds,omitempty"`
	NATSReaderCreds    string `json:"nats_reader_creds,omitempty"`
}

// StoreURL is the store's database: DatabaseURL, or the embedded store's
// file in DataDir.
func (c Config) StoreURL() string {
	if c.DatabaseURL != "" {
		return c.DatabaseURL
	}
	return "sqlite:" + filepath.Join(c.DataDir, "store.db")
}

// DefaultMetricsAddr is where no8s dev serves its metrics by default.
const DefaultMetricsAddr = "127.0.0.1:9464"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	dir := ".no8s"
	if home, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(home, "no8s", "dev")
	}
	return Config{
		HTTPAddr:                 "127.0.0.1:8000",
		DataDir:                  dir,
		NATSPort:                 4333,
		StoreAddr:                "127.0.0.1:7001",
		AdmissionAddr:            "127.0.0.1:7002",
		WorkerAddr:               "127.0.0.1:7003",
		MetricsAddr:              DefaultMetricsAddr,
		Outbound:                 outbound.DevPolicy(),
		Scheduler:                true,
		RegistrySync:             true,
		TenantReconciler:         true,
		Identities:               true,
		Authz:                    authz.Enforce,
		RegistrySyncSecretPrefix: registrysync.DefaultConfig().SecretEnvPrefix,
	}
}

// Run runs the stack until ctx ends, then stops the services in reverse
// dependency order: gateway and scheduler, admission, store, NATS. log is
// the process logger without a service attribute: each service's lines get
// their own (service=store, ...), the stack's own lines service=no8s-dev.
func Run(ctx context.Context, cfg Config, base *slog.Logger) error {
	log := base.With("service", "no8s-dev")
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if cfg.DatabaseURL != "" {
		if err := ensureDatabase(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		log.Info("state: the PostgreSQL database and the data directory", "database", redact(cfg.DatabaseURL), "data_dir", cfg.DataDir)
	} else {
		log.Info("state: everything is in the data directory; to start afresh, stop no8s dev and remove it", "data_dir", cfg.DataDir, "store", cfg.StoreURL())
	}
	port := cfg.NATSPort
	if port == 0 {
		port = -1
	}
	// With identities on, the CA and every component's credentials come
	// first: the embedded NATS server takes only the CA's NATS users.
	ids := identities{}
	var natsUsers *identityca.NATSServer
	if cfg.Identities {
		var err error
		if ids, err = loadIdentities(cfg, append(stackIDs(cfg), devNATSUsers()...), time.Now(), log); err != nil {
			return err
		}
		if natsUsers, err = natsAuth(cfg, time.Now()); err != nil {
			return err
		}
	}
	ns, err := natsembed.Start(filepath.Join(cfg.DataDir, "jetstream"), port, natsUsers)
	if err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()
	log.Info("embedded NATS with JetStream", "url", ns.ClientURL(), "users", natsUsers != nil)
	// Each component connects to NATS as itself (its identity's NATS user
	// with identities on).
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	connect := func(id identity.ID) (*nats.Conn, error) {
		nc, err := natsconn.Connect(ns.ClientURL(), "no8s-dev-"+id.Name, ids.of(id), base.With("service", id.Name))
		if err == nil {
			conns = append(conns, nc)
		}
		return nc, err
	}
	connectJS := func(id identity.ID) (jetstream.JetStream, error) {
		nc, err := connect(id)
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, fmt.Errorf("jetstream: %w", err)
		}
		return js, nil
	}

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
	// One registry for every service of the stack: their series do not
	// clash (each names its own subsystem), gRPC calls tell the services
	// apart by grpc_service.
	reg := metrics.NewRegistry()
	var metricsLis net.Listener
	if cfg.MetricsAddr != "" && cfg.MetricsAddr != health.Off {
		metricsLis, err = net.Listen("tcp", cfg.MetricsAddr)
		if errors.Is(err, syscall.EADDRINUSE) && cfg.MetricsAddr == DefaultMetricsAddr {
			// Two stacks side by side (tests, a second checkout): the
			// default is a convenience, not a promise; Ready says where.
			if metricsLis, err = net.Listen("tcp", "127.0.0.1:0"); err == nil {
				log.Warn("the default metrics address is taken; metrics are served on a free port instead", "default", DefaultMetricsAddr, "addr", metricsLis.Addr().String())
			}
		}
		if err != nil {
			return fmt.Errorf("metrics listen: %w", err)
		}
		stopMetrics := health.ServeListener(ctx, metricsLis, health.Handler(health.Config{Metrics: metrics.Handler(reg)}), nil)
		defer stopMetrics()
	}
	// writerURL is where registry-sync and the tenant reconciler write:
	// with identities on, the gateway's service listener on loopback,
	// where they present their identities and the REST rules hold them.
	writerURL := "http://" + httpLis.Addr().String()
	var serviceLis net.Listener
	if cfg.Identities {
		if serviceLis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return fmt.Errorf("gateway service listen: %w", err)
		}
		writerURL = "https://" + serviceLis.Addr().String()
		log.Info("identities: every gRPC call of the stack is mutual TLS with the call policy enforced, and NATS takes only the CA's users", "ca", cfg.CADir(), "credentials", cfg.IdentityDir(), "authz", string(cfg.Authz))
	} else {
		log.Warn("identities are off (--identities=off): the stack's gRPC servers and NATS take any caller on loopback, in plaintext")
	}
	// dial connects the component as to the service server with its own
	// identity (plaintext with identities off).
	dialMetrics := metrics.NewGRPCClient(reg).DialOptions()
	dial := func(addr string, as *identity.Credentials, server string) (*grpc.ClientConn, error) {
		return grpcserver.Dial(addr, append(slices.Clone(dialMetrics), authz.DialOptions(as, server)...)...)
	}
	scfg := store.DefaultConfig()
	scfg.Metrics = reg
	scfg.DatabaseURL = cfg.StoreURL()
	if cfg.HistoryLimit > 0 {
		scfg.HistoryLimit = cfg.HistoryLimit
	}
	if cfg.RelayDegradedHold > 0 {
		scfg.Relay.DegradedHold = cfg.RelayDegradedHold
	}
	// A dev data directory outliving its database (or the reverse) is
	// common: rebuild the stream rather than refuse to start.
	scfg.RebuildStreamOnMismatch = true
	scfg.GRPCServerOptions = authz.ServerOptions(ids.service(identity.Store), cfg.Authz, base.With("service", "store"))
	storeNC, err := connect(identity.ServiceID(identity.Store))
	if err != nil {
		return err
	}
	storeSvc, err := store.New(ctx, scfg, storeNC, base.With("service", "store"))
	if err != nil {
		return err
	}
	// Each client of the store is a connection of its own, with its own
	// identity: the gateway's, admission's and the scheduler's.
	storeConn, err := dial(storeLis.Addr().String(), ids.service(identity.Gateway), identity.Store)
	if err != nil {
		return err
	}
	defer storeConn.Close()
	admissionStoreConn, err := dial(storeLis.Addr().String(), ids.service(identity.Admission), identity.Store)
	if err != nil {
		return err
	}
	defer admissionStoreConn.Close()
	admissionConn, err := dial(admissionLis.Addr().String(), ids.service(identity.Gateway), identity.Admission)
	if err != nil {
		return err
	}
	defer admissionConn.Close()
	gcfg := gateway.DefaultConfig()
	gcfg.Metrics = reg
	if gcfg.JetStream, err = connectJS(identity.ServiceID(identity.Gateway)); err != nil {
		return err
	}
	credGrants, err := loadGrants(cfg, log)
	if err != nil {
		return err
	}
	acfg := admission.DefaultConfig()
	acfg.Metrics = reg
	acfg.Grants = credGrants
	if acfg.JetStream, err = connectJS(identity.ServiceID(identity.Admission)); err != nil {
		return err
	}
	acfg.Outbound, gcfg.Outbound = cfg.Outbound, cfg.Outbound
	acfg.GRPCServerOptions = authz.ServerOptions(ids.service(identity.Admission), cfg.Authz, base.With("service", "admission"))
	admissionSvc := admission.New(acfg, storev1.NewStoreServiceClient(admissionStoreConn), base.With("service", "admission"))
	// One process: the gateway's probes cover every dependency.
	gcfg.Health.Ready = append([]health.Check{health.GRPC("store", storeConn), health.GRPC("admission", admissionConn)}, storeSvc.Probes().Ready...)
	gcfg.Health.Info = storeSvc.Probes().Info
	// A service that stops while the stack runs takes the process down
	// with it (Run returns why); until then /healthz fails.
	var down stopped
	gcfg.Health.Live = append(gcfg.Health.Live, health.Check{Name: "services", Func: func(context.Context) error { return down.err() }})
	gcfg.Reconcile = reconcilev1.NewReconcileServiceClient(storeConn)
	var schedulerSvc *scheduler.Service
	if cfg.Scheduler {
		schedCfg := cfg.SchedulerTuning.apply(scheduler.DefaultConfig())
		schedCfg.Metrics = reg
		schedConn, err := dial(storeLis.Addr().String(), ids.service(identity.Scheduler), identity.Store)
		if err != nil {
			return err
		}
		defer schedConn.Close()
		schedJS, err := connectJS(identity.ServiceID(identity.Scheduler))
		if err != nil {
			return err
		}
		if schedulerSvc, err = scheduler.New(schedCfg, reconcilev1.NewReconcileServiceClient(schedConn), schedJS, base.With("service", "scheduler")); err != nil {
			return err
		}
	}
	var syncSvc *registrysync.Service
	if cfg.RegistrySync {
		rcfg := registrysync.DefaultConfig()
		rcfg.Metrics = reg
		rcfg.APIURL, rcfg.ReplicaID, rcfg.Outbound = writerURL, "no8s-dev", cfg.Outbound
		rcfg.Identity = ids.service(identity.RegistrySync)
		rcfg.SecretEnvPrefix, rcfg.Grants = cfg.RegistrySyncSecretPrefix, credGrants
		syncConn, err := dial(workerLis.Addr().String(), ids.service(identity.RegistrySync), identity.Store)
		if err != nil {
			return err
		}
		defer syncConn.Close()
		syncNC, err := connect(identity.ServiceID(identity.RegistrySync))
		if err != nil {
			return err
		}
		if syncSvc, err = registrysync.New(rcfg, syncNC, syncConn, base.With("service", "registry-sync")); err != nil {
			return err
		}
	}
	var tenantWorker *worker.Worker
	if cfg.TenantReconciler {
		api, err := tenant.NewAPIClient(writerURL, ids.of(tenantID()))
		if err != nil {
			return err
		}
		tenantRec := tenant.New(tenant.Config{API: api, Metrics: reg})
		tenantConn, err := dial(workerLis.Addr().String(), ids.of(tenantID()), identity.Store)
		if err != nil {
			return err
		}
		defer tenantConn.Close()
		tenantNC, err := connect(tenantID())
		if err != nil {
			return err
		}
		if tenantWorker, err = worker.New(tenantRec, worker.Config{Types: []sdk.TypeRef{tenant.Type}, NATS: tenantNC, Store: tenantConn},
			worker.WithReplicaID("no8s-dev"), worker.WithShutdownGrace(2*time.Second, time.Second), worker.WithFetchWait(time.Second),
			worker.WithLogger(base.With("service", "reconciler-tenant")), worker.WithMetrics(reg)); err != nil {
			return fmt.Errorf("tenant reconciler: %w", err)
		}
	}
	gcfg.Identity, gcfg.Authz = ids.service(identity.Gateway), cfg.Authz
	gatewaySvc := gateway.New(gcfg, storev1.NewStoreServiceClient(storeConn), admissionv1.NewAdmissionServiceClient(admissionConn), base.With("service", "gateway"))

	// Each tier stops only after the tier in front of it has stopped.
	gatewayCtx, stopGateway := context.WithCancelCause(ctx)
	defer stopGateway(nil)
	admissionCtx, stopAdmission := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAdmission()
	storeCtx, stopStore := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStore()

	if cfg.storeFault != nil {
		go func() {
			select {
			case <-cfg.storeFault:
				stopStore()
			case <-storeCtx.Done():
			}
		}()
	}
	// supervised runs one service: when it returns while the stack is
	// still meant to run, it is down, and the stack stops.
	supervised := func(name string, run func() error) func() error {
		return func() error {
			err := run()
			if gatewayCtx.Err() != nil {
				return err // stopping, as asked
			}
			if err == nil {
				err = errors.New("it returned while the stack was running")
			}
			err = fmt.Errorf("embedded %s stopped: %w", name, err)
			down.set(err)
			log.Error("a service of no8s dev stopped; stopping the rest (restart no8s dev)", "err", err)
			stopGateway(err)
			return err
		}
	}
	var g errgroup.Group
	g.Go(supervised("store", func() error { return storeSvc.Serve(storeCtx, storeLis, workerLis) }))
	g.Go(supervised("admission", func() error { return admissionSvc.Serve(admissionCtx, admissionLis) }))
	schedulerDone := make(chan struct{})
	g.Go(func() error {
		defer close(schedulerDone)
		if schedulerSvc == nil {
			return nil
		}
		return supervised("scheduler", func() error { return schedulerSvc.Run(gatewayCtx) })()
	})
	syncDone := make(chan struct{})
	g.Go(func() error {
		defer close(syncDone)
		if syncSvc == nil {
			return nil
		}
		return supervised("registry-sync", func() error { return syncSvc.Run(gatewayCtx) })()
	})
	tenantDone := make(chan struct{})
	g.Go(func() error {
		defer close(tenantDone)
		if tenantWorker == nil {
			return nil
		}
		// It writes through the gateway: start once it answers.
		if err := waitReady(gatewayCtx, "http://"+httpLis.Addr().String()); err != nil {
			if gatewayCtx.Err() != nil {
				return nil // stopping before the gateway was up
			}
			return fmt.Errorf("tenant reconciler: %w", err)
		}
		return supervised("tenant reconciler", func() error { return tenantWorker.Run(gatewayCtx) })()
	})
	g.Go(func() error {
		err := supervised("gateway", func() error { return gatewaySvc.ServeListeners(gatewayCtx, httpLis, serviceLis) })()
		<-schedulerDone
		<-syncDone
		<-tenantDone
		stopAdmission()
		stopStore()
		return err
	})
	ready := Ready{
		APIURL: "http://" + httpLis.Addr().String(), NATSURL: ns.ClientURL(),
		StoreAddr: storeLis.Addr().String(), WorkerAddr: workerLis.Addr().String(), AdmissionAddr: admissionLis.Addr().String(),
		DataDir: cfg.DataDir, Store: redact(cfg.StoreURL()),
	}
	if cfg.Identities {
		ready.CADir, ready.IdentityDir = cfg.CADir(), cfg.IdentityDir()
		ready.NATSPublisherCreds, ready.NATSReaderCreds = cfg.NATSCreds(identity.Publisher), cfg.NATSCreds(identity.Reader)
	}
	if metricsLis != nil {
		ready.MetricsURL = "http://" + metricsLis.Addr().String() + health.MetricsPath
	}
	g.Go(func() error {
		if err := waitReady(gatewayCtx, ready.APIURL); err != nil {
			return err
		}
		up := []any{"api", "http://" + displayAddr(httpLis.Addr()), "metrics", ready.MetricsURL, "workers", displayAddr(workerLis.Addr()), "nats", ns.ClientURL(), "store", ready.Store}
		if cfg.Identities {
			up = append(up, "ca", ready.CADir, "reconciler_credentials", ReconcilerHint(ready.CADir),
				"nats_publisher_creds", ready.NATSPublisherCreds, "nats_reader_creds", ready.NATSReaderCreds)
		}
		log.Info("no8s dev is up", up...)
		if cfg.ReadyFile != "" {
			return writeReady(cfg.ReadyFile, ready)
		}
		return nil
	})
	return g.Wait()
}

// stackIDs are the identities of the stack's components: the services it
// runs, and the tenant reconciler with its type.
func stackIDs(cfg Config) []identity.ID {
	ids := []identity.ID{identity.ServiceID(identity.Store), identity.ServiceID(identity.Admission), identity.ServiceID(identity.Gateway)}
	if cfg.Scheduler {
		ids = append(ids, identity.ServiceID(identity.Scheduler))
	}
	if cfg.RegistrySync {
		ids = append(ids, identity.ServiceID(identity.RegistrySync))
	}
	if cfg.TenantReconciler {
		ids = append(ids, tenantID())
	}
	return ids
}

// tenantID is the identity of the in-process tenant reconciler.
func tenantID() identity.ID {
	return identity.ID{Kind: identity.Reconciler, Name: tenant.Name, Types: []string{tenant.Type.String()}}
}

// ReconcilerHint tells, for the "is up" line, how a reconciler run
// beside the stack gets credentials from its CA at caDir.
func ReconcilerHint(caDir string) string {
	return "no8s-reconciler ... --identity-ca " + caDir + " (or: no8s identity issue --ca-dir " + caDir + " --reconciler NAME --types T/v1 --out DIR, then NO8S_IDENTITY_DIR=DIR)"
}

// stopped is the first service of the stack that stopped on its own.
type stopped struct {
	mu    sync.Mutex
	first error
}

func (s *stopped) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == nil {
		s.first = err
	}
}

func (s *stopped) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// apply returns c with the non-zero timings of t.
func (t SchedulerTuning) apply(c scheduler.Config) scheduler.Config {
	if t.Lease > 0 {
		c.Lease = t.Lease
	}
	if t.ItemLease > 0 {
		c.ItemLease = t.ItemLease
	}
	if t.LivenessPoll > 0 {
		c.LivenessPoll = t.LivenessPoll
	}
	if t.RetryDelay > 0 {
		c.RetryDelay = t.RetryDelay
	}
	return c
}

// waitReady polls the gateway's /readyz (which covers the store, admission
// and NATS) until it answers 200, for at most a minute.
func waitReady(ctx context.Context, apiURL string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no8s dev: the API did not become ready: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeReady writes r to path atomically (a temporary file renamed).
func writeReady(path string, r Ready) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
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
