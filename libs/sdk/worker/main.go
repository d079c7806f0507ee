package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	apiclient "github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/logging"
	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/platform/profiling"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/sdk"
)

// Environment variables read by Main and RunMain.
const (
	// EnvNATSURL is the NATS server (default nats://127.0.0.1:4222).
	EnvNATSURL = "NATS_URL"
	// EnvStoreAddr is the store's worker address: its worker listener, on
	// which only WorkerService is served (default 127.0.0.1:7003).
	EnvStoreAddr = "NO8S_STORE_ADDR"
	// EnvAPIURL is the control plane's REST API, where a reconciler writes
	// the resources it manages (Request.API; default DefaultAPIURL). With
	// identity.EnvDir, the gateway's service listener (https://…): the
	// worker then calls it as its reconciler.
	EnvAPIURL = "NO8S_API_URL"
	// EnvToken is the bearer token the API client sends when it does not
	// call as the reconciler (no identity, or an http EnvAPIURL).
	EnvToken = "NO8S_TOKEN"
	// EnvHealthListen is the probe address ("off" disables). Unset, it is
	// DefaultHealthListen, or a free port when that is taken (a second
	// reconciler on one machine); set, it must be free.
	EnvHealthListen = "NO8S_HEALTH_LISTEN"
	// EnvMaxConcurrency bounds concurrent attempts (default 8).
	EnvMaxConcurrency = "NO8S_MAX_CONCURRENCY"
	// EnvReplicaID names the replica (default host-pid-random).
	EnvReplicaID = "NO8S_REPLICA_ID"
	// EnvLogLevel is debug, info, warn or error (default info).
	EnvLogLevel = logging.EnvLevel
	// EnvLogFormat is text (default) or json: the format of every no8s
	// process (package logging).
	EnvLogFormat = logging.EnvFormat
)

// DefaultStoreAddr is the store's worker address when EnvStoreAddr is unset
// (no8s-store --worker-listen, and no8s dev).
const DefaultStoreAddr = "127.0.0.1:7003"

// DefaultAPIURL is the REST API when EnvAPIURL is unset (the gateway's
// default listener).
const DefaultAPIURL = "http://127.0.0.1:8000"

// DefaultHealthListen is the probe address when EnvHealthListen is unset.
const DefaultHealthListen = ":8081"

// listenProbes listens on addr, or on def when addr is empty, falling back
// to a free port when def is taken: two reconcilers started side by side on
// a laptop must not clash, while a deployment that names the address gets
// exactly it.
func listenProbes(addr, def string, log *slog.Logger) (net.Listener, error) {
	if addr != "" {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("probe listener: %w", err)
		}
		return lis, nil
	}
	lis, err := net.Listen("tcp", def)
	if errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(def)
		if lis, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err == nil {
			log.Warn("the default probe address is taken (another reconciler on this machine?); probes listen on a free port instead",
				"default", def, "addr", lis.Addr().String(), "set", EnvHealthListen)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("probe listener: %w", err)
	}
	return lis, nil
}

// Main runs rec as a worker process configured from the environment, until
// SIGTERM or SIGINT, and exits: a reconciler binary's whole main is
//
//	func main() { worker.Main(engine, sdk.Type("Widget", "v1")) }
func Main(rec Reconciler, types ...sdk.TypeRef) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := RunMain(ctx, rec, types, os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", rec.Name(), err)
		stop()
		os.Exit(1)
	}
}

// RunMain is Main without the signals and the exit: it connects to NATS and
// the store as getenv says, serves the probes and the process's Prometheus
// metrics (/metrics, beside the probes) and runs the worker until ctx ends.
// opts come after the environment's; WithMetrics among them names the
// registry to record on and serve (build it with metrics.NewRegistry, for
// the runtime collectors), else RunMain builds one; WithTracing among them
// (otlp.Start) traces the attempts and their calls to the store.
func RunMain(ctx context.Context, rec Reconciler, types []sdk.TypeRef, getenv func(string) string, opts ...Option) error {
	env := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	log, err := logging.New(os.Stderr, logging.FromEnv(getenv))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	// Lines logged inside a span (WithTracing) carry its ids.
	log = slog.New(tracing.LogHandler(log.Handler()))
	all := []Option{WithLogger(log)}
	if v := getenv(EnvMaxConcurrency); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%w: %s=%q is not a number", ErrInvalidConfig, EnvMaxConcurrency, v)
		}
		all = append(all, WithMaxConcurrency(n))
	}
	if v := getenv(EnvReplicaID); v != "" {
		all = append(all, WithReplicaID(v))
	}
	reg := metrics.NewRegistry()
	all = append(all, WithMetrics(reg))
	all = append(all, opts...)
	// A caller that records metrics of its own passes its registry with
	// WithMetrics: the probe port then serves that one.
	var served prometheus.Gatherer = reg
	var o options
	for _, opt := range all {
		_ = opt(&o) // New validates them
	}
	if g, ok := o.metrics.(prometheus.Gatherer); ok {
		served = g
	}

	stopProfiles, err := profiling.Serve(ctx, env(profiling.EnvListen, profiling.Off), log)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	defer stopProfiles()

	creds, err := workerIdentity(getenv(identity.EnvDir), rec.Name(), log)
	if err != nil {
		return err
	}
	natsURL := env(EnvNATSURL, nats.DefaultURL)
	// A server not up yet is retried like a lost one: the worker waits for
	// it, not ready meanwhile, rather than exiting. So is a refused NATS
	// user: a renewed one may replace it on disk.
	natsOpts := []nats.Option{nats.Name("no8s-reconciler-" + rec.Name()), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(250 * time.Millisecond), nats.IgnoreAuthErrorAbort(),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				// The worker logs NATS's state once per change (WARN).
				log.Debug("nats disconnected", "error", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("nats", "error", err) })}
	transport := insecure.NewCredentials()
	if creds != nil {
		user, err := creds.NATSOptions()
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, identity.EnvDir, err)
		}
		natsOpts = append(natsOpts, user...)
		transport = credentials.NewTLS(creds.ClientTLS(identity.ServiceID(identity.Store)))
	}
	nc, err := nats.Connect(natsURL, natsOpts...)
	if err != nil {
		return fmt.Errorf("connect to nats at %s: %w", natsURL, identity.ExplainNATSError(err))
	}
	defer nc.Close()
	api, err := NewAPIClient(env(EnvAPIURL, DefaultAPIURL), getenv(EnvToken), creds, rec.Name())
	if err != nil {
		return err
	}
	all = append([]Option{WithAPI(api)}, all...)
	storeAddr := env(EnvStoreAddr, DefaultStoreAddr)
	dialOpts := append(metrics.NewGRPCClient(o.metrics).DialOptions(), o.tracing.GRPCDialOptions()...)
	conn, err := grpc.NewClient(storeAddr, append(dialOpts, grpc.WithTransportCredentials(transport),
		// Find the store again within seconds of its return, however long
		// it was away (gRPC's default backoff grows to two minutes).
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: grpcbackoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: 5 * time.Second}))...)
	if err != nil {
		return fmt.Errorf("store at %s: %w", storeAddr, err)
	}
	defer conn.Close()

	w, err := New(rec, Config{Types: types, NATS: nc, Store: conn}, all...)
	if err != nil {
		return err
	}
	stopProbes := func() {}
	if addr := getenv(EnvHealthListen); addr != health.Off {
		lis, err := listenProbes(addr, DefaultHealthListen, log)
		if err != nil {
			return err
		}
		probes := w.Probes()
		probes.Metrics = metrics.Handler(served)
		stopProbes = health.ServeListener(ctx, lis, health.Handler(probes), log)
	}
	defer stopProbes()
	return w.Run(ctx)
}

// NewAPIClient is the REST API client of the attempts of the reconciler
// called name (Request.API, WithAPI): on an https apiURL with creds (the
// gateway's service listener), it presents creds' certificate and checks
// that the server is service/gateway (identity.Credentials.GatewayTLS), so
// that it calls as the reconciler; otherwise it sends token when set. Its
// requests carry the attempt's trace. RunMain builds it from EnvAPIURL,
// EnvToken and identity.EnvDir.
func NewAPIClient(apiURL, token string, creds *identity.Credentials, name string) (*apiclient.Client, error) {
	tlsConf := creds.GatewayTLS(apiURL)
	tr := &http.Transport{MaxIdleConnsPerHost: 64, TLSClientConfig: tlsConf}
	opts := []apiclient.Option{apiclient.WithHTTPClient(&http.Client{Transport: tracing.Propagating(tr)}),
		apiclient.WithUserAgent("no8s-reconciler-" + name), apiclient.WithTimeout(30 * time.Second)}
	if tlsConf == nil && token != "" {
		opts = append(opts, apiclient.WithToken(token))
	}
	c, err := apiclient.New(apiURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, EnvAPIURL, err)
	}
	return c, nil
}

// workerIdentity reads the credentials in dir (identity.EnvDir), which must
// be the reconciler's own identity: the worker presents them to the store
// (TLS) and to NATS (their NATS user, when they hold one). Without dir it
// has none (nil): a control plane with identities off.
func workerIdentity(dir, name string, log *slog.Logger) (*identity.Credentials, error) {
	if dir == "" {
		return nil, nil
	}
	creds, err := identity.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, identity.EnvDir, err)
	}
	if id := creds.ID(); !id.Is(identity.Reconciler, name) {
		return nil, fmt.Errorf("%w: %s holds the identity %s, not reconciler/%s: the store would refuse this reconciler's calls", ErrInvalidConfig, identity.EnvDir, id, name)
	}
	log.Info("identity", "id", creds.ID().String(), "types", strings.Join(creds.ID().Types, ","), "valid_until", creds.NotAfter().UTC().Format(time.RFC3339))
	return creds, nil
}
