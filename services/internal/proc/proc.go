// Package proc holds what every no8s binary does the same way: a logger,
// a context cancelled by SIGINT/SIGTERM, environment defaults for flags, the
// flags every service shares, and the start of a service process (Start).
package proc

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/sdk/identity"
	"github.com/no8s/no8s/libs/sdk/logging"
	"github.com/no8s/no8s/libs/sdk/metrics"
	"github.com/no8s/no8s/libs/sdk/outbound"
	"github.com/no8s/no8s/libs/sdk/profiling"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/grants"
)

// Logger returns the process logger (package logging: NO8S_LOG_FORMAT,
// NO8S_LOG_LEVEL) carrying service=service.
func Logger(service string) *slog.Logger {
	return BaseLogger().With("service", service)
}

// BaseLogger returns the process logger without attributes. A bad setting is
// reported on stderr and the default (text, info) used.
func BaseLogger() *slog.Logger {
	log, err := logging.New(os.Stderr, logging.FromEnv(os.Getenv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "no8s: %v; logging text at info\n", err)
		log, _ = logging.New(os.Stderr, logging.Options{})
	}
	return log
}

// SignalContext returns a context cancelled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Env returns the environment variable name, or def when unset or empty.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
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

// ProfileListenFlag defines --pprof-listen ($NO8S_PPROF_LISTEN): a loopback
// address for the runtime profiles (package profiling); "off", the default,
// serves none.
func ProfileListenFlag(fs *flag.FlagSet) *string {
	return fs.String("pprof-listen", Env(profiling.EnvListen, profiling.Off), `loopback address of the runtime profiles at /debug/pprof/ ($NO8S_PPROF_LISTEN; "off": none)`)
}

// HealthListenFlag defines --health-listen ($NO8S_HEALTH_LISTEN): the
// address of a process's /healthz and /readyz (package health), "off" for
// none.
func HealthListenFlag(fs *flag.FlagSet, def string) *string {
	return fs.String("health-listen", Env("NO8S_HEALTH_LISTEN", def), `address of the /healthz and /readyz probes ($NO8S_HEALTH_LISTEN; "off": none)`)
}

// EnvOutboundAllow is the environment variable behind --outbound-allow.
const EnvOutboundAllow = "NO8S_OUTBOUND_ALLOW"

// OutboundFlag sets p from $NO8S_OUTBOUND_ALLOW and defines --outbound-allow
// over it: the classes of address besides public ones that outbound calls
// (webhooks, registry-sync's datasources and HttpSource URLs) may reach. A bad environment value is an error.
func OutboundFlag(fs *flag.FlagSet, p *outbound.Policy) error {
	if err := p.Set(os.Getenv(EnvOutboundAllow)); err != nil {
		return fmt.Errorf("%s: %w", EnvOutboundAllow, err)
	}
	fs.Var(p, "outbound-allow", "classes of address besides public ones that outbound calls (webhooks, datasources, HttpSource URLs) may reach: loopback, private, link-local, comma-separated ($"+EnvOutboundAllow+"; default none)")
	return nil
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
}

// DialOptions are the options of the process's gRPC clients of the service
// named server (identity.Store, identity.Admission): the client metrics'
// interceptors on s.Metrics and, with identities on, TLS presenting the
// process's certificate to that service.
func (s *Service) DialOptions(server string) []grpc.DialOption {
	return append(metrics.NewGRPCClient(s.Metrics).DialOptions(), authz.DialOptions(s.Identity, server)...)
}

// IdentityServerOptions are, with identities on, the options of the
// process's gRPC servers that make them require a client certificate and
// enforce the policy (authz.ServerOptions); none with identities off.
func (s *Service) IdentityServerOptions() []grpc.ServerOption {
	return authz.ServerOptions(s.Identity, s.Authz, s.Log)
}

// Start defines --pprof-listen and the identity flags on fs, parses args
// into fs and starts what every service process has (Service). The caller
// defers Stop.
func Start(fs *flag.FlagSet, args []string, service string) (*Service, error) {
	pprofListen := ProfileListenFlag(fs)
	idf := IdentityFlags(fs)
	_ = fs.Parse(args)
	log := Logger(service)
	creds, mode, err := idf.Load(log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := SignalContext()
	stopProfiles, err := profiling.Serve(ctx, *pprofListen, log)
	if err != nil {
		cancel()
		return nil, err
	}
	return &Service{Ctx: ctx, Log: log, Stop: func() { stopProfiles(); cancel() }, Metrics: metrics.NewRegistry(),
		Identity: creds, Authz: mode}, nil
}

// EnvAuthz is the environment variable behind --authz (identity.EnvDir is
// --identity-dir's).
const EnvAuthz = "NO8S_AUTHZ"

// Identity is the identity flags of a process (IdentityFlags).
type Identity struct {
	dir, mode *string
}

// IdentityFlags defines --identity-dir ($NO8S_IDENTITY_DIR): the process's
// credentials directory (tls.crt, tls.key, ca.crt; docs/security.md), none
// for identities off; and --authz ($NO8S_AUTHZ): enforce or audit-only.
func IdentityFlags(fs *flag.FlagSet) *Identity {
	return &Identity{
		dir: fs.String("identity-dir", os.Getenv(identity.EnvDir),
			"credentials directory of this process: tls.crt, tls.key, ca.crt ($"+identity.EnvDir+"; none: identities off, every gRPC caller taken)"),
		mode: fs.String("authz", Env(EnvAuthz, string(authz.Enforce)),
			"with identities on, what gRPC servers do with a call the policy refuses: enforce, or audit-only (let it through and log it) ($"+EnvAuthz+")"),
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
func GrantsFlag(fs *flag.FlagSet) *string {
	return fs.String("credential-grants", os.Getenv(grants.EnvFile),
		"file of credential grants: which namespaces may use which secret references, for what, sent where ($"+grants.EnvFile+"; none: every secret reference is refused; "+grants.DocsRef+")")
}

// LoadGrants reads the grants file at path (internal/grants.Load) and says
// at INFO which file it is, or that there is none and so every secret
// reference is refused.
func LoadGrants(path string, log *slog.Logger) (*grants.Set, error) {
	g, err := grants.Load(path)
	if err != nil {
		return nil, err
	}
	if g == nil {
		log.Info("no credential grants file (--credential-grants, "+grants.EnvFile+"): every secret reference of a TenantRegistry or HttpSource is refused", "docs", grants.DocsRef)
	} else {
		log.Info("credential grants", "file", path, "grants", g.Len())
	}
	return g, nil
}
