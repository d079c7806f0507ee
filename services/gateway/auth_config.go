package gateway

import (
	"errors"
	"log/slog"
	"time"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/services/internal/authn"
)

// Defaults of AuthConfig.
const (
	// DefaultTokenExpiry is the expiry of a token created without one.
	DefaultTokenExpiry = 30 * 24 * time.Hour
	// DefaultStreamRecheck is how often an open event stream's credential
	// is checked again: a stream of a revoked or expired credential ends
	// within about this bound plus authn.DefaultCacheTTL.
	DefaultStreamRecheck = time.Second
)

// AuthConfig configures who may call the public API.
type AuthConfig struct {
	// Mode is authn.ModeOn (also the zero value) or authn.ModeNone, which
	// runs open: every request is anonymous and allowed.
	Mode string
	// BootstrapToken authenticates as the first administrator
	// (--bootstrap-token-file).
	BootstrapToken string
	// JWT verifies OIDC JWTs (--oidc-issuer); nil refuses them.
	JWT authn.JWTVerifier
	// AdminGroups are the JWT groups whose members are administrators
	// (--oidc-admin-group).
	AdminGroups []string
	// PublicPaths are answered without credentials (default: the health
	// probes and /metrics).
	PublicPaths []string
	// TokenExpiry is the expiry of a token created without one (default
	// DefaultTokenExpiry).
	TokenExpiry time.Duration
	// StreamRecheck is how often an open event stream's credential is
	// checked again (default DefaultStreamRecheck).
	StreamRecheck time.Duration
	// RolesRefresh is the age at which the roles and bindings are read
	// again (default rbac.DefaultRefresh); RolesMaxStaleness the oldest
	// read a decision is made on (default rbac.DefaultMaxStaleness).
	RolesRefresh, RolesMaxStaleness time.Duration
}

// DefaultPublicPaths are the paths answered without credentials by
// default: probes and metrics, which orchestrators and scrapers call
// without a token.
func DefaultPublicPaths() []string {
	return []string{health.LivePath, health.ReadyPath, "/health", health.MetricsPath}
}

// Open reports whether authentication is off.
func (c AuthConfig) Open() bool { return c.Mode == authn.ModeNone }

// WarnIfOpen says on log, at WARN, that the API is open to anyone when
// authentication is off. The binary and no8s dev say it at start.
func (c AuthConfig) WarnIfOpen(log *slog.Logger) {
	if c.Open() {
		log.Warn("AUTHENTICATION IS OFF (--auth=none): anyone who reaches the API may read, change and delete everything")
	}
}

// Validate refuses a configuration that could never authenticate an
// administrator: with authentication on, a bootstrap token or a JWT
// issuer with admin groups is needed, or --auth=none to run open.
func (c AuthConfig) Validate() error {
	switch c.Mode {
	case authn.ModeNone:
		return nil
	case "", authn.ModeOn:
	default:
		return errors.New("--auth: want on or none")
	}
	if c.BootstrapToken == "" && (c.JWT == nil || len(c.AdminGroups) == 0) {
		return errors.New("authentication is on but no administrator can sign in: give --bootstrap-token-file, or --oidc-issuer with --oidc-admin-group; --auth=none runs the API open to anyone who reaches it")
	}
	return nil
}

func (c AuthConfig) withDefaults() AuthConfig {
	if c.PublicPaths == nil {
		c.PublicPaths = DefaultPublicPaths()
	}
	if c.TokenExpiry <= 0 {
		c.TokenExpiry = DefaultTokenExpiry
	}
	if c.StreamRecheck <= 0 {
		c.StreamRecheck = DefaultStreamRecheck
	}
	return c
}
