// Package proc holds what every no8s binary does the same way: a logger,
// a context cancelled by SIGINT/SIGTERM, the flags every service shares,
// the start of a service process (Flags.Start), and the run of a daemon's
// command with its flags on the environment rule (Main, package flagenv).
package proc

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/logging"
	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/profiling"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/platform/tracing/otlp"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/flagenv"
	"github.com/no8s/no8s/services/internal/grants"
)

// Logger returns the process logger (package logging: NO8S_LOG_FORMAT,
// NO8S_LOG_LEVEL) carrying service=service.
func Logger(service string) *slog.Logger {
	return BaseLogger().With("service", service)
}

// BaseLogger returns the process logger without attributes. A bad setting is
// reported on stderr and the default (text, info) used. A line logged
// with the context of a traced operation carries its trace_id and span_id
// (tracing.LogHandler).
func BaseLogger() *slog.Logger {
	log, err := logging.New(os.Stderr, logging.FromEnv(os.Getenv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "no8s: %v; logging text at info\n", err)
		log, _ = logging.New(os.Stderr, logging.Options{})
	}
	return slog.New(tracing.LogHandler(log.Handler()))
}

// SignalContext returns a context cancelled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// List splits a comma-separated flag value into its items, each trimmed,
// blank ones dropped (nil for "").
func List(s string) []string {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// ProfileListenFlag defines --pprof-listen: a loopback address for the
// runtime profiles (package profiling); "off", the default, serves none.
func ProfileListenFlag(fs *pflag.FlagSet) *string {
	return fs.String("pprof-listen", profiling.Off, `loopback address of the runtime profiles at /debug/pprof/ ("off": none)`)
}

// HealthListenFlag defines --health-listen: the address of a process's
// /healthz and /readyz (package health), "off" for none.
func HealthListenFlag(fs *pflag.FlagSet, def string) *string {
	return fs.String("health-listen", def, `address of the /healthz and /readyz probes ("off": none)`)
}

// OutboundFlag defines --outbound-allow over p: the classes of address
// besides public ones that outbound calls (webhooks, registry-sync's
// datasources and HttpSource URLs) may reach.
func OutboundFlag(fs *pflag.FlagSet, p *outbound.Policy) {
	fs.Var(p, "outbound-allow", "classes of address besides public ones that outbound calls (webhooks, datasources, HttpSource URLs) may reach: loopback, private, link-local, comma-separated (default none)")
}

// Service is a started service process: its logger, a context cancelled by
// SIGINT or SIGTERM, its metrics registry, and Stop, which stops the runtime
// profiles and releases the context.
type Service struct {
	Ctx  context.Context
	Log  *slog.Logger
	Stop func()
	// Metrics is the process's registry (metrics.NewRegistry): every
	// component records there, and the health listener serves it on
	// /metrics.
	Metrics *prometheus.Registry
	// Identity is the process's credentials (--identity-dir), nil when
	// identities are off.
	Identity *identity.Credentials
	// Authz is what the process's gRPC servers do with a call the policy
	// refuses (--authz).
	Authz authz.Mode
	// Tracing is the process's traces (the OTEL_* environment; off
	// without an endpoint).
	Tracing *tracing.Tracing
}

// DialOptions are the options of the process's gRPC clients of the service
// named server (identity.Store, identity.Admission): the client metrics'
// interceptors on s.Metrics, with identities on, TLS presenting the
// process's certificate to that service, and with tracing on, a span per
// call whose context the call carries.
func (s *Service) DialOptions(server string) []grpc.DialOption {
	opts := append(metrics.NewGRPCClient(s.Metrics).DialOptions(), authz.DialOptions(s.Identity, server)...)
	return append(opts, s.Tracing.GRPCDialOptions()...)
}

// ServerOptions are the options of the process's gRPC servers: with
// identities on, a client certificate required and the policy enforced
// (authz.ServerOptions); with tracing on, a span per call continuing the
// caller's trace.
func (s *Service) ServerOptions() []grpc.ServerOption {
	return append(authz.ServerOptions(s.Identity, s.Authz, s.Log), s.Tracing.GRPCServerOptions()...)
}

// Flags are the flags every service process has (ServiceFlags).
type Flags struct {
	pprofListen *string
	identity    *Identity
}

// ServiceFlags defines on fs the flags every service process has:
// --pprof-listen and the identity flags.
func ServiceFlags(fs *pflag.FlagSet) *Flags {
	return &Flags{pprofListen: ProfileListenFlag(fs), identity: IdentityFlags(fs)}
}

// Start starts what every service process has (Service), from the flags
// once parsed. The caller defers Stop.
func (f *Flags) Start(service string) (*Service, error) {
	log := Logger(service)
	creds, mode, err := f.identity.Load(log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := SignalContext()
	stopProfiles, err := profiling.Serve(ctx, *f.pprofListen, log)
	if err != nil {
		cancel()
		return nil, err
	}
	tr, err := otlp.Start(ctx, "no8s-"+service, log)
	if err != nil {
		stopProfiles()
		cancel()
		return nil, err
	}
	stop := func() {
		if err := tr.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not sent at shutdown", "error", err)
		}
		stopProfiles()
		cancel()
	}
	return &Service{Ctx: ctx, Log: log, Stop: stop, Metrics: metrics.NewRegistry(),
		Identity: creds, Authz: mode, Tracing: tr}, nil
}

// Identity returns the identity flags.
func (f *Flags) Identity() *Identity { return f.identity }

// EnvAuthz is the environment variable behind --authz (flagenv.Name;
// identity.EnvDir is --identity-dir's).
const EnvAuthz = "NO8S_AUTHZ"

// Identity is the identity flags of a process (IdentityFlags).
type Identity struct {
	dir, mode *string
}

// IdentityFlags defines --identity-dir: the process's credentials
// directory (tls.crt, tls.key, ca.crt; docs/security.md), none for
// identities off; and --authz: enforce or audit-only.
func IdentityFlags(fs *pflag.FlagSet) *Identity {
	return &Identity{
		dir: fs.String("identity-dir", "",
			"credentials directory of this process: tls.crt, tls.key, ca.crt (none: identities off, every gRPC caller taken)"),
		mode: fs.String("authz", string(authz.Enforce),
			"with identities on, what gRPC servers do with a call the policy refuses: enforce, or audit-only (let it through and log it)"),
	}
}

// Load reads the credentials the flags name (nil when none) and the mode.
func (f *Identity) Load(log *slog.Logger) (*identity.Credentials, authz.Mode, error) {
	mode, err := authz.ParseMode(*f.mode)
	if err != nil {
		return nil, "", fmt.Errorf("--authz: %w", err)
	}
	if *f.dir == "" {
		return nil, mode, nil
	}
	creds, err := identity.Load(*f.dir)
	if err != nil {
		return nil, "", fmt.Errorf("--identity-dir: %w", err)
	}
	log.Info("identity", "id", creds.ID().String(), "valid_until", creds.NotAfter().UTC().Format("2006-01-02T15:04:05Z"), "authz", string(mode))
	return creds, mode, nil
}

// GCPercent is the garbage collector's target of the no8s services: a
// collection when the heap has grown by 200% since the last one, instead of
// Go's 100%. Under load the services' collections cost 8-13% of their CPU
// (docs/design/performance.md); their live heaps are tens of MiB, so the
// larger target costs little memory.
const GCPercent = 200

// TuneGC sets the garbage collector's target to GCPercent unless GOGC says
// otherwise. Every service's main calls it first.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}

// GrantsFlag registers --credential-grants: the file of credential grants
// (internal/grants) that admission and registry-sync enforce. Without one
// nothing is granted: every secret reference is refused.
func GrantsFlag(fs *pflag.FlagSet) *string {
	return fs.String("credential-grants", "",
		"file of credential grants: which namespaces may use which secret references, for what, sent where (none: every secret reference is refused; "+grants.DocsRef+")")
}

// LoadGrants reads the grants file at path (internal/grants.Load) and says
// at INFO which file it is, or that there is none and so every secret
// reference is refused. The services and no8s dev load their grants so.
func LoadGrants(path string, log *slog.Logger) (*grants.Set, error) {
	g, err := grants.Load(path)
	if err != nil {
		return nil, err
	}
	if g == nil {
		log.Info("no credential grants file (--credential-grants, "+grants.EnvFile+"): every secret reference of a TenantRegistry or HttpSource is refused", "docs", grants.DocsRef)
	} else {
		log.Info("credential grants", "file", path, "grants", g.Len(), "docs", grants.DocsRef)
	}
	return g, nil
}

// DefaultNATSURL is the default of --nats-url.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// NATSURLFlag defines --nats-url, the NATS server URL, read from
// $NATS_URL too (deprecated, flagenv.Alias). help says what for.
func NATSURLFlag(fs *pflag.FlagSet, help string) *string {
	p := fs.String("nats-url", DefaultNATSURL, help)
	flagenv.Alias(fs, "nats-url", "NATS_URL")
	return p
}

// ServeProbes serves the process's /healthz, /readyz (ready while every
// check passes) and /metrics (s.Metrics) on addr ("off": none) until s.Ctx
// ends (package health). The caller defers stop.
func (s *Service) ServeProbes(addr string, ready ...health.Check) (stop func(), err error) {
	return health.Serve(s.Ctx, addr, health.Handler(health.Config{Metrics: metrics.Handler(s.Metrics), Ready: ready}), s.Log)
}
