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
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/platform/tracing/otlp"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/worker"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission"
	"github.com/no8s/no8s/services/gateway"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/healthcheck"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/natsembed"
	"github.com/no8s/no8s/services/reconcilerworker/tenant"
	"github.com/no8s/no8s/services/registrysync"
	"github.com/no8s/no8s/services/scheduler"
	"github.com/no8s/no8s/services/store"
	"github.com/no8s/no8s/services/store/outbox"
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
	// Auth is authn.ModeOn (the default: every API request needs a token,
	// the administrator's is created at first start, TokenFile) or
	// authn.ModeNone (the API open to anyone who reaches it).
	Auth string
	// CLIConfig is the CLI configuration file where the stack writes its
	// context (DevContext) with the administrator's token: "" the CLI's
	// default ($NO8S_CONFIG, else ~/.config/no8s/config.yaml), "off" none.
	CLIConfig string
	// AllowedHosts are names the REST API answers to besides the loopback
	// ones it always does (localhost, 127.0.0.1, ::1) and the host of HTTPAddr when it
	// is not a wildcard address: the gateway's Host allow-list against DNS
	// rebinding (gateway.Config.AllowedHosts).
	AllowedHosts []string
	// TLS serves the REST API over HTTPS with a certificate for localhost,
	// 127.0.0.1 and ::1 from a CA of its own, both created at first start
	// in TLSDir (ensureAPICert); clients trust TLSCAFile. It needs
	// Identities: the stack's own writers reach the API on the service
	// listener then, never on the public one.
	TLS bool
	// ReadyFile, when set, receives the stack's addresses as JSON (Ready)
	// once every service answers: a parent process (the SDK's test kit)
	// learns there where the stack listens.
	ReadyFile string
	// AuditLog is where the gateway's audit log goes (AuditLogPath): ""
	// the data directory's AuditLogName, "-" stderr, "none" nowhere, or
	// a file.
	AuditLog string
	// RateLimit is the gateway's requests per second per identity
	// (DefaultConfig: gateway.DefaultRateLimit; 0: no limit).
	RateLimit float64
	// AuditStream publishes the audit records on the stream NO8S_AUDIT
	// too (true by default).
	AuditStream bool

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
	// ServiceURL is the gateway's service listener (https, identities on;
	// "" with identities off): the same API for callers that present a
	// certificate of the stack's CA and act as that identity, as
	// registry-sync and reconcilers writing their children do
	// (NO8S_API_URL with NO8S_IDENTITY_DIR).
	ServiceURL string `json:"service_url,omitempty"`
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
	// TokenFile holds the administrator's API token ("" with --auth=none).
	TokenFile string `json:"token_file,omitempty"`
	// CAFile is the CA certificate that a client of an https APIURL trusts
	// ("" without TLS).
	CAFile string `json:"ca_file,omitempty"`
	// AuditLog is the gateway's audit log file ("" when it goes to stderr
	// or nowhere).
	AuditLog string `json:"audit_log,omitempty"`
}

// AuditLogName is the audit log's file in the data directory, where no8s
// dev writes it by default.
const AuditLogName = "audit.log"

// AuditLogPath is where the audit log goes: Config.AuditLog, or the data
// directory's AuditLogName when that is empty.
func (c Config) AuditLogPath() string {
	if c.AuditLog == "" {
		return filepath.Join(c.DataDir, AuditLogName)
	}
	return c.AuditLog
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
		Auth:                     authn.ModeOn,
		AuditStream:              true,
		RateLimit:                gateway.DefaultRateLimit,
		RegistrySyncSecretPrefix: registrysync.DefaultConfig().SecretEnvPrefix,
	}
}

// Run runs the stack until ctx ends, then stops the services in reverse
// dependency order: gateway and scheduler, admission, store, NATS. log is
// the process logger without a service attribute: each service's lines get
// their own (service=store, ...), the stack's own lines service=no8s-dev.
func Run(ctx context.Context, cfg Config, base *slog.Logger) error {
	if err := (gateway.Config{AllowedHosts: allowedHosts(cfg)}).Validate(); err != nil {
		return err
	}
	if cfg.TLS && !cfg.Identities {
		return errors.New("no8s dev --tls needs identities on (--identities=on): with them off, the stack's registry-sync and tenant reconciler write through the public listener in plain HTTP")
	}
	s := &stack{cfg: cfg, base: base, log: base.With("service", "no8s-dev")}
	defer s.cleanup()
	if err := s.prepareState(ctx); err != nil {
		return err
	}
	if err := s.startTracing(ctx); err != nil {
		return err
	}
	if err := s.prepareTLS(); err != nil {
		return err
	}
	if err := s.startNATS(); err != nil {
		return err
	}
	if err := s.listen(); err != nil {
		return err
	}
	if err := s.serveMetrics(ctx); err != nil {
		return err
	}
	if err := s.listenService(); err != nil {
		return err
	}
	svcs, err := s.newServices(ctx)
	if err != nil {
		return err
	}
	return s.serve(ctx, svcs)
}

// stack is what Run builds, one step after the other, and then serves.
type stack struct {
	cfg       Config
	base, log *slog.Logger
	// ids are the components' credentials (empty with identities off).
	ids identities
	ns  *server.Server
	// conns are the components' NATS connections, closed together just
	// before the NATS server stops.
	conns []*nats.Conn
	lis   listeners
	// reg is the one metrics registry of every service of the stack: their
	// series do not clash (each names its own subsystem), gRPC calls tell
	// the services apart by grpc_service.
	reg         *prometheus.Registry
	dialMetrics []grpc.DialOption
	// tr is the stack's traces, shared by every service of the process
	// (the OTEL_* environment; off without an endpoint).
	tr *tracing.Tracing
	// token is the administrator's API token ("" with authentication off).
	token string
	// writerURL is where registry-sync and the tenant reconciler write:
	// with identities on, the gateway's service listener on loopback,
	// where they present their identities and the REST rules hold them.
	writerURL string
	// tlsCert and tlsKey are the REST API's certificate files ("" without
	// TLS); api is the stack's own client of the REST API (readiness).
	tlsCert, tlsKey string
	api             *http.Client
	// down is the first service that stopped while the stack was running.
	down stopped
	// cleanups run in reverse order when Run returns, as deferred calls
	// would: the gRPC connections, the metrics server, the NATS
	// connections, the NATS server last.
	cleanups []func()
}

// listeners are the stack's listeners, all open before any service starts.
type listeners struct {
	store, worker, admission, http net.Listener
	// metrics is nil when metrics are off; service (the gateway's service
	// listener) nil with identities off.
	metrics, service net.Listener
}

// services are the stack's services, built and not yet serving; scheduler,
// sync and tenant are nil when the configuration turns them off.
type services struct {
	store     *store.Service
	admission *admission.Service
	gateway   *gateway.Service
	scheduler *scheduler.Service
	sync      *registrysync.Service
	tenant    *worker.Worker
}

// onCleanup adds f to what runs when Run returns.
func (s *stack) onCleanup(f func()) { s.cleanups = append(s.cleanups, f) }

// cleanup runs the cleanups, the last added first.
func (s *stack) cleanup() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// prepareState makes the data directory, and the PostgreSQL database when
// one is configured.
func (s *stack) prepareState(ctx context.Context) error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if cfg.DatabaseURL != "" {
		if err := ensureDatabase(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		s.log.Info("state: the PostgreSQL database and the data directory", "database", redact(cfg.DatabaseURL), "data_dir", cfg.DataDir)
	} else {
		s.log.Info("state: everything is in the data directory; to start afresh, stop no8s dev and remove it", "data_dir", cfg.DataDir, "store", cfg.StoreURL())
	}
	return s.prepareAuth()
}

// prepareAuth reads the administrator's token, created at first start, or
// warns that the API is open.
func (s *stack) prepareAuth() error {
	cfg := s.cfg
	switch cfg.Auth {
	case authn.ModeNone:
		gateway.AuthConfig{Mode: cfg.Auth}.WarnIfOpen(s.log)
		return nil
	case "", authn.ModeOn:
	default:
		return fmt.Errorf("--auth %q: want on or none", cfg.Auth)
	}
	if !cfg.Identities && (cfg.RegistrySync || cfg.TenantReconciler) {
		return errors.New("--identities=off needs --auth=none: registry-sync and the tenant reconciler reach the API with their identities")
	}
	token, created, err := authn.EnsureBootstrapToken(cfg.TokenFile())
	if err != nil {
		return err
	}
	if created {
		s.log.Info("created the administrator's API token", "file", cfg.TokenFile())
	}
	s.token = token
	return nil
}

// startNATS starts the embedded NATS server. With identities on, the CA
// and every component's credentials come first: the embedded NATS server
// takes only the CA's NATS users.
func (s *stack) startNATS() error {
	port := s.cfg.NATSPort
	if port == 0 {
		port = -1
	}
	s.ids = identities{}
	var natsUsers *identityca.NATSServer
	if s.cfg.Identities {
		var err error
		if s.ids, err = loadIdentities(s.cfg, append(stackIDs(s.cfg), devNATSUsers()...), time.Now(), s.log); err != nil {
			return err
		}
		if natsUsers, err = natsAuth(s.cfg, time.Now()); err != nil {
			return err
		}
	}
	ns, err := natsembed.Start(filepath.Join(s.cfg.DataDir, "jetstream"), port, natsUsers)
	if err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	s.ns = ns
	s.onCleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	s.log.Info("embedded NATS with JetStream", "url", ns.ClientURL(), "users", natsUsers != nil)
	s.onCleanup(func() {
		for _, nc := range s.conns {
			nc.Close()
		}
	})
	return nil
}

// connect connects the component id to NATS as itself (its identity's
// NATS user with identities on).
func (s *stack) connect(id identity.ID) (*nats.Conn, error) {
	nc, err := natsconn.Connect(s.ns.ClientURL(), "no8s-dev-"+id.Name, s.ids.of(id), s.base.With("service", id.Name))
	if err == nil {
		s.conns = append(s.conns, nc)
	}
	return nc, err
}

// connectJS is connect, for a component that uses JetStream.
func (s *stack) connectJS(id identity.ID) (jetstream.JetStream, error) {
	nc, err := s.connect(id)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

// listen opens the services' listeners: the store's two, admission's and
// the REST API's.
func (s *stack) listen() error {
	var err error
	if s.lis.store, err = net.Listen("tcp", s.cfg.StoreAddr); err != nil {
		return fmt.Errorf("store listen: %w", err)
	}
	if s.lis.worker, err = net.Listen("tcp", s.cfg.WorkerAddr); err != nil {
		return fmt.Errorf("store worker listen: %w", err)
	}
	if s.lis.admission, err = net.Listen("tcp", s.cfg.AdmissionAddr); err != nil {
		return fmt.Errorf("admission listen: %w", err)
	}
	if s.lis.http, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	return nil
}

// serveMetrics makes the stack's metrics registry and, unless metrics are
// off, serves it until ctx ends.
func (s *stack) serveMetrics(ctx context.Context) error {
	s.reg = metrics.NewRegistry()
	addr := s.cfg.MetricsAddr
	if addr == "" || addr == health.Off {
		return nil
	}
	lis, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) && addr == DefaultMetricsAddr {
		// Two stacks side by side (tests, a second checkout): the
		// default is a convenience, not a promise; Ready says where.
		if lis, err = net.Listen("tcp", "127.0.0.1:0"); err == nil {
			s.log.Warn("the default metrics address is taken; metrics are served on a free port instead", "default", DefaultMetricsAddr, "addr", lis.Addr().String())
		}
	}
	if err != nil {
		return fmt.Errorf("metrics listen: %w", err)
	}
	s.lis.metrics = lis
	s.onCleanup(health.ServeListener(ctx, lis, health.Handler(health.Config{Metrics: metrics.Handler(s.reg)}), nil))
	return nil
}

// startTracing starts the stack's traces from the OTEL_* environment (off,
// with nothing installed, without an endpoint): every service of the
// process records into them as the separate services do into their own,
// under the service name no8s-dev (OTEL_SERVICE_NAME overrides it). The
// last spans are sent when Run returns, after every service has stopped.
func (s *stack) startTracing(ctx context.Context) error {
	tr, err := otlp.Start(ctx, "no8s-dev", s.log)
	if err != nil {
		return err
	}
	s.tr = tr
	s.onCleanup(func() {
		if err := tr.Shutdown(context.WithoutCancel(ctx)); err != nil {
			s.log.Warn("tracing: spans not sent at shutdown", "error", err)
		}
	})
	return nil
}

// listenService sets writerURL: the REST API's listener, or with
// identities on the gateway's service listener, opened here.
func (s *stack) listenService() error {
	s.writerURL = "http://" + s.lis.http.Addr().String()
	if !s.cfg.Identities {
		s.log.Warn("identities are off (--identities=off): the stack's gRPC servers and NATS take any caller on loopback, in plaintext")
		return nil
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("gateway service listen: %w", err)
	}
	s.lis.service = lis
	s.writerURL = "https://" + lis.Addr().String()
	s.log.Info("identities: every gRPC call of the stack is mutual TLS with the call policy enforced, and NATS takes only the CA's users", "ca", s.cfg.CADir(), "credentials", s.cfg.IdentityDir(), "authz", string(s.cfg.Authz))
	return nil
}

// dial connects the component as to the service server with its own
// identity (plaintext with identities off); the connection closes when Run
// returns.
func (s *stack) dial(addr string, as *identity.Credentials, server string) (*grpc.ClientConn, error) {
	opts := append(append(slices.Clone(s.dialMetrics), authz.DialOptions(as, server)...), s.tr.GRPCDialOptions()...)
	conn, err := grpcserver.Dial(addr, opts...)
	if err != nil {
		return nil, err
	}
	s.onCleanup(func() { _ = conn.Close() })
	return conn, nil
}

// newServices builds every service of the stack, in dependency order.
func (s *stack) newServices(ctx context.Context) (*services, error) {
	s.dialMetrics = metrics.NewGRPCClient(s.reg).DialOptions()
	var svcs services
	var err error
	if svcs.store, err = s.newStore(ctx); err != nil {
		return nil, err
	}
	// Each client of the store is a connection of its own, with its own
	// identity: the gateway's, admission's and the scheduler's.
	storeConn, err := s.dial(s.lis.store.Addr().String(), s.ids.service(identity.Gateway), identity.Store)
	if err != nil {
		return nil, err
	}
	admissionStoreConn, err := s.dial(s.lis.store.Addr().String(), s.ids.service(identity.Admission), identity.Store)
	if err != nil {
		return nil, err
	}
	admissionConn, err := s.dial(s.lis.admission.Addr().String(), s.ids.service(identity.Gateway), identity.Admission)
	if err != nil {
		return nil, err
	}
	gcfg := gateway.DefaultConfig()
	gcfg.Metrics = s.reg
	if gcfg.JetStream, err = s.connectJS(identity.ServiceID(identity.Gateway)); err != nil {
		return nil, err
	}
	credGrants, err := loadGrants(s.cfg, s.log)
	if err != nil {
		return nil, err
	}
	if svcs.admission, err = s.newAdmission(credGrants, admissionStoreConn); err != nil {
		return nil, err
	}
	s.gatewayHealth(&gcfg, svcs.store, storeConn, admissionConn)
	if err := s.newWorkers(&svcs, credGrants); err != nil {
		return nil, err
	}
	gcfg.Outbound = s.cfg.Outbound
	gcfg.AllowedHosts = allowedHosts(s.cfg)
	gcfg.TLSCertFile, gcfg.TLSKeyFile = s.tlsCert, s.tlsKey
	gcfg.Identity, gcfg.Authz = s.ids.service(identity.Gateway), s.cfg.Authz
	gcfg.Auth = gateway.AuthConfig{Mode: s.cfg.Auth, BootstrapToken: s.token}
	gcfg.RateLimit = s.cfg.RateLimit
	gcfg.Tracing = s.tr
	auditLog, err := audit.OpenLog(s.cfg.AuditLogPath())
	if err != nil {
		return nil, err
	}
	if auditLog != nil {
		s.onCleanup(func() { _ = auditLog.Close() })
		gcfg.Audit.Log = auditLog
	}
	gcfg.Audit.Stream = s.cfg.AuditStream
	svcs.gateway = gateway.NewOverConns(gcfg, storeConn, admissionConn, s.base.With("service", "gateway"))
	return &svcs, nil
}

// newStore builds the store.
func (s *stack) newStore(ctx context.Context) (*store.Service, error) {
	scfg := store.DefaultConfig()
	scfg.Metrics = s.reg
	scfg.DatabaseURL = s.cfg.StoreURL()
	if s.cfg.HistoryLimit > 0 {
		scfg.HistoryLimit = s.cfg.HistoryLimit
	}
	if s.cfg.RelayDegradedHold > 0 {
		scfg.Relay.DegradedHold = s.cfg.RelayDegradedHold
	}
	// A dev data directory outliving its database (or the reverse) is
	// common: rebuild the stream rather than refuse to start.
	scfg.RebuildStreamOnMismatch = true
	scfg.GRPCServerOptions = append(authz.ServerOptions(s.ids.service(identity.Store), s.cfg.Authz, s.base.With("service", "store")), s.tr.GRPCServerOptions()...)
	if s.tr.Enabled() {
		scfg.Relay.Tracer = s.tr.Tracer(outbox.TracerName)
	}
	storeNC, err := s.connect(identity.ServiceID(identity.Store))
	if err != nil {
		return nil, err
	}
	return store.New(ctx, scfg, storeNC, s.base.With("service", "store"))
}

// newAdmission builds admission, a client of the store over storeConn.
func (s *stack) newAdmission(credGrants *grants.Set, storeConn *grpc.ClientConn) (*admission.Service, error) {
	acfg := admission.DefaultConfig()
	acfg.Metrics = s.reg
	acfg.Grants = credGrants
	var err error
	if acfg.JetStream, err = s.connectJS(identity.ServiceID(identity.Admission)); err != nil {
		return nil, err
	}
	acfg.Outbound = s.cfg.Outbound
	acfg.GRPCServerOptions = append(authz.ServerOptions(s.ids.service(identity.Admission), s.cfg.Authz, s.base.With("service", "admission")), s.tr.GRPCServerOptions()...)
	return admission.New(acfg, storev1.NewStoreServiceClient(storeConn), s.base.With("service", "admission")), nil
}

// gatewayHealth sets the gateway's probes, which in one process cover every
// dependency.
func (s *stack) gatewayHealth(gcfg *gateway.Config, storeSvc *store.Service, storeConn, admissionConn *grpc.ClientConn) {
	gcfg.Health.Ready = append([]health.Check{health.GRPC("store", storeConn), health.GRPC("admission", admissionConn)}, storeSvc.Probes().Ready...)
	gcfg.Health.Info = storeSvc.Probes().Info
	// A service that stops while the stack runs takes the process down
	// with it (Run returns why); until then /healthz fails.
	gcfg.Health.Live = append(gcfg.Health.Live, health.Check{Name: "services", Func: func(context.Context) error { return s.down.err() }})
}

// newWorkers builds the scheduler, registry-sync and the tenant reconciler,
// each only when the configuration turns it on.
func (s *stack) newWorkers(svcs *services, credGrants *grants.Set) error {
	var err error
	if s.cfg.Scheduler {
		if svcs.scheduler, err = s.newScheduler(); err != nil {
			return err
		}
	}
	if s.cfg.RegistrySync {
		if svcs.sync, err = s.newRegistrySync(credGrants); err != nil {
			return err
		}
	}
	if s.cfg.TenantReconciler {
		if svcs.tenant, err = s.newTenantWorker(); err != nil {
			return err
		}
	}
	return nil
}

// newScheduler builds the scheduler.
func (s *stack) newScheduler() (*scheduler.Service, error) {
	schedCfg := s.cfg.SchedulerTuning.apply(scheduler.DefaultConfig())
	schedCfg.Metrics, schedCfg.Tracing = s.reg, s.tr
	// The garbage collector writes where registry-sync does, as the
	// scheduler.
	schedCfg.APIURL, schedCfg.Identity = s.writerURL, s.ids.service(identity.Scheduler)
	schedConn, err := s.dial(s.lis.store.Addr().String(), s.ids.service(identity.Scheduler), identity.Store)
	if err != nil {
		return nil, err
	}
	schedJS, err := s.connectJS(identity.ServiceID(identity.Scheduler))
	if err != nil {
		return nil, err
	}
	return scheduler.New(schedCfg, reconcilev1.NewReconcileServiceClient(schedConn), schedJS, s.base.With("service", "scheduler"))
}

// newRegistrySync builds registry-sync, which writes through writerURL.
func (s *stack) newRegistrySync(credGrants *grants.Set) (*registrysync.Service, error) {
	rcfg := registrysync.DefaultConfig()
	rcfg.Metrics, rcfg.Tracing = s.reg, s.tr
	rcfg.APIURL, rcfg.ReplicaID, rcfg.Outbound = s.writerURL, "no8s-dev", s.cfg.Outbound
	rcfg.Identity = s.ids.service(identity.RegistrySync)
	rcfg.SecretEnvPrefix, rcfg.Grants = s.cfg.RegistrySyncSecretPrefix, credGrants
	syncConn, err := s.dial(s.lis.worker.Addr().String(), s.ids.service(identity.RegistrySync), identity.Store)
	if err != nil {
		return nil, err
	}
	syncNC, err := s.connect(identity.ServiceID(identity.RegistrySync))
	if err != nil {
		return nil, err
	}
	return registrysync.New(rcfg, syncNC, syncConn, s.base.With("service", "registry-sync"))
}

// newTenantWorker builds the tenant reconciler's worker; the reconciler
// writes through writerURL.
func (s *stack) newTenantWorker() (*worker.Worker, error) {
	api, err := tenant.NewAPIClient(s.writerURL, "", s.ids.of(tenantID()))
	if err != nil {
		return nil, err
	}
	tenantRec := tenant.New(tenant.Config{API: api, Metrics: s.reg})
	tenantConn, err := s.dial(s.lis.worker.Addr().String(), s.ids.of(tenantID()), identity.Store)
	if err != nil {
		return nil, err
	}
	tenantNC, err := s.connect(tenantID())
	if err != nil {
		return nil, err
	}
	w, err := worker.New(tenantRec, worker.Config{Types: []sdk.TypeRef{tenant.Type}, NATS: tenantNC, Store: tenantConn},
		worker.WithReplicaID("no8s-dev"), worker.WithShutdownGrace(2*time.Second, time.Second), worker.WithFetchWait(time.Second),
		worker.WithLogger(s.base.With("service", "reconciler-tenant")), worker.WithMetrics(s.reg), worker.WithTracing(s.tr))
	if err != nil {
		return nil, fmt.Errorf("tenant reconciler: %w", err)
	}
	return w, nil
}

// serve runs every service until ctx ends or one of them stops, then stops
// them tier by tier.
func (s *stack) serve(ctx context.Context, svcs *services) error {
	// Each tier stops only after the tier in front of it has stopped.
	gatewayCtx, stopGateway := context.WithCancelCause(ctx)
	defer stopGateway(nil)
	admissionCtx, stopAdmission := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAdmission()
	storeCtx, stopStore := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStore()
	if s.cfg.storeFault != nil {
		go stopOnFault(storeCtx, s.cfg.storeFault, stopStore)
	}
	sup := supervisor{ctx: gatewayCtx, stop: stopGateway, down: &s.down, log: s.log}
	var g errgroup.Group
	g.Go(sup.run("store", func() error { return svcs.store.Serve(storeCtx, s.lis.store, s.lis.worker) }))
	g.Go(sup.run("admission", func() error { return svcs.admission.Serve(admissionCtx, s.lis.admission) }))
	schedulerDone := goTracked(&g, svcs.scheduler != nil, sup.run("scheduler", func() error { return svcs.scheduler.Run(gatewayCtx) }))
	syncDone := goTracked(&g, svcs.sync != nil, sup.run("registry-sync", func() error { return svcs.sync.Run(gatewayCtx) }))
	tenantDone := goTracked(&g, svcs.tenant != nil, func() error { return s.runTenant(sup, svcs.tenant) })
	g.Go(func() error {
		err := sup.run("gateway", func() error { return svcs.gateway.ServeListeners(gatewayCtx, s.lis.http, s.lis.service) })()
		<-schedulerDone
		<-syncDone
		<-tenantDone
		stopAdmission()
		stopStore()
		return err
	})
	ready := s.ready()
	g.Go(func() error { return s.announce(gatewayCtx, ready) })
	return g.Wait()
}

// stopOnFault calls stop when fault closes, unless ctx ends first.
func stopOnFault(ctx context.Context, fault <-chan struct{}, stop func()) {
	select {
	case <-fault:
		stop()
	case <-ctx.Done():
	}
}

// goTracked runs fn in g when on (else returns nil there at once), and
// returns a channel closed once it has returned.
func goTracked(g *errgroup.Group, on bool, fn func() error) <-chan struct{} {
	done := make(chan struct{})
	g.Go(func() error {
		defer close(done)
		if !on {
			return nil
		}
		return fn()
	})
	return done
}

// supervisor runs the stack's services: when one returns while the stack
// is still meant to run (ctx not ended), it is down, and the stack stops.
type supervisor struct {
	ctx  context.Context
	stop context.CancelCauseFunc
	down *stopped
	log  *slog.Logger
}

// run returns the function that runs the service name with run.
func (sup supervisor) run(name string, run func() error) func() error {
	return func() error {
		err := run()
		if sup.ctx.Err() != nil {
			return err // stopping, as asked
		}
		if err == nil {
			err = errors.New("it returned while the stack was running")
		}
		err = fmt.Errorf("embedded %s stopped: %w", name, err)
		sup.down.set(err)
		sup.log.Error("a service of no8s dev stopped; stopping the rest (restart no8s dev)", "err", err)
		sup.stop(err)
		return err
	}
}

// runTenant runs the tenant reconciler's worker w once the gateway, which
// it writes through, answers.
func (s *stack) runTenant(sup supervisor, w *worker.Worker) error {
	if err := waitReady(sup.ctx, s.api, s.apiURL()); err != nil {
		if sup.ctx.Err() != nil {
			return nil // stopping before the gateway was up
		}
		return fmt.Errorf("tenant reconciler: %w", err)
	}
	return sup.run("tenant reconciler", func() error { return w.Run(sup.ctx) })()
}

// ready is where the stack listens, for Config.ReadyFile.
func (s *stack) ready() Ready {
	cfg := s.cfg
	ready := Ready{
		APIURL: s.apiURL(), NATSURL: s.ns.ClientURL(),
		StoreAddr: s.lis.store.Addr().String(), WorkerAddr: s.lis.worker.Addr().String(), AdmissionAddr: s.lis.admission.Addr().String(),
		DataDir: cfg.DataDir, Store: redact(cfg.StoreURL()),
	}
	if cfg.Identities {
		ready.CADir, ready.IdentityDir, ready.ServiceURL = cfg.CADir(), cfg.IdentityDir(), s.writerURL
		ready.NATSPublisherCreds, ready.NATSReaderCreds = cfg.NATSCreds(identity.Publisher), cfg.NATSCreds(identity.Reader)
	}
	if cfg.TLS {
		ready.CAFile = cfg.TLSCAFile()
	}
	if s.lis.metrics != nil {
		ready.MetricsURL = "http://" + s.lis.metrics.Addr().String() + health.MetricsPath
	}
	if s.token != "" {
		ready.TokenFile = cfg.TokenFile()
	}
	if p := cfg.AuditLogPath(); p != audit.LogStderr && p != audit.LogNone {
		ready.AuditLog = p
	}
	return ready
}

// announce waits until the API answers, then says the stack is up and
// writes the ready file when one is configured.
func (s *stack) announce(ctx context.Context, ready Ready) error {
	if err := waitReady(ctx, s.api, ready.APIURL); err != nil {
		return err
	}
	api := "http://" + displayAddr(s.lis.http.Addr())
	if s.cfg.TLS {
		api = ready.APIURL
	}
	up := []any{"api", api, "metrics", ready.MetricsURL, "workers", displayAddr(s.lis.worker.Addr()), "nats", s.ns.ClientURL(), "store", ready.Store}
	if s.cfg.Identities {
		up = append(up, "ca", ready.CADir, "reconciler_credentials", ReconcilerHint(ready.CADir),
			"nats_publisher_creds", ready.NATSPublisherCreds, "nats_reader_creds", ready.NATSReaderCreds)
	}
	if s.cfg.TLS {
		up = append(up, "ca_file", ready.CAFile)
	}
	if ready.AuditLog != "" {
		up = append(up, "audit_log", ready.AuditLog)
	}
	s.log.Info("no8s dev is up", up...)
	if err := s.announceAuth(ready); err != nil {
		return err
	}
	if s.cfg.TLS {
		s.log.Info("the REST API serves HTTPS with a development CA; trust its CA file", "try",
			"curl --cacert "+ready.CAFile+" "+ready.APIURL+"/readyz", "cli", "no8s config set-context dev --server "+ready.APIURL+" --ca-file "+ready.CAFile)
	}
	if s.cfg.ReadyFile != "" {
		return writeReady(s.cfg.ReadyFile, ready)
	}
	return nil
}

// allowedHosts is the gateway's Host allow-list: the loopback names, the host
// of the listen address unless it is a wildcard (":8000", "0.0.0.0:8000",
// "[::]:8000"), and cfg.AllowedHosts.
func allowedHosts(cfg Config) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1", "[::1]"}
	if h, _, err := net.SplitHostPort(cfg.HTTPAddr); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	return append(hosts, cfg.AllowedHosts...)
}

// prepareTLS makes sure of the REST API's certificate with TLS on, and
// builds the stack's own client of the API.
func (s *stack) prepareTLS() error {
	if s.cfg.TLS {
		var err error
		if s.tlsCert, s.tlsKey, err = ensureAPICert(s.cfg, time.Now(), s.log); err != nil {
			return err
		}
	}
	var err error
	s.api, err = apiHTTPClient(s.cfg)
	return err
}

// apiURL is the REST API's base URL: http on the listener's address, or
// with TLS https on an address its certificate names (an unspecified host
// becomes loopback).
func (s *stack) apiURL() string {
	addr := s.lis.http.Addr().String()
	if !s.cfg.TLS {
		return "http://" + addr
	}
	if dial, err := healthcheck.DialAddr(addr); err == nil {
		addr = dial
	}
	return "https://" + addr
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
// and NATS) with client until it answers 200, for at most a minute.
func waitReady(ctx context.Context, client *http.Client, apiURL string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
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
		return fmt.Errorf("connect to %s: %w (is PostgreSQL running? set --database-url or NO8S_DATABASE_URL)", redact(dbURL), err)
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
