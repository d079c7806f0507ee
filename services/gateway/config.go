package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/tracing"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/gateway/watch"
	"github.com/no8s/no8s/services/internal/authz"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultShutdownGrace bounds the graceful stop.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultRequestTimeout bounds each call to a backend.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultBodyReadTimeout bounds reading a request's body, and waiting
	// for a body-read slot.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a kept-alive connection idle this long.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxConcurrentBodyReads bounds the request bodies read at once
	// (each up to 1 MiB).
	DefaultMaxConcurrentBodyReads = 64
	// maxSchemaRetries is how many times a write is re-admitted after the
	// store answered schema_changed.
	maxSchemaRetries = 2
)

// Config configures the gateway.
type Config struct {
	// ShutdownGrace bounds how long Serve waits for in-flight requests once
	// its context ends (default DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// RequestTimeout bounds each call to a backend (store or admission);
	// default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Health holds the probes (package health): GET /readyz and the seed's
	// GET /health run Health.Ready (the store, admission and NATS: 503
	// naming the failed ones), GET /healthz runs Health.Live.
	Health health.Config
	// JetStream reads the event stream for watches (GET .../events); nil
	// turns them off (503).
	JetStream jetstream.JetStream
	// Watch tunes event streaming (heartbeat, bookmark, slow clients).
	Watch watch.Config
	// ReadHeaderTimeout bounds reading a request's headers (default
	// DefaultReadHeaderTimeout).
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds reading one request body, from its first byte
	// read to its last, and the wait for a body-read slot (default
	// DefaultBodyReadTimeout). A body that does not arrive in time is
	// answered 408 and its connection closed.
	BodyReadTimeout time.Duration
	// IdleTimeout closes kept-alive connections idle this long (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxConcurrentBodyReads bounds the request bodies read at once; a
	// request waits for a slot up to BodyReadTimeout, then gets 503
	// (default DefaultMaxConcurrentBodyReads). One source address reads at
	// most Limits.MaxBodyReadsPerSource of them at once.
	//
	// No timeout applies to an event stream once it has started: watches
	// run as long as their client reads; the watch package's own
	// WriteTimeout ends one whose client stopped reading.
	MaxConcurrentBodyReads int
	// Outbound is the address rule applied to webhook URLs at registration
	// (admission applies it again when it connects): the zero Policy allows
	// public addresses only; `no8s dev` allows loopback and private ones.
	Outbound outbound.Policy
	// Input configures the queue input (package queueinput); it runs when
	// Input.Enabled and JetStream is set.
	Input InputConfig
	// Reconcile serves the reconcile endpoints (manual trigger, history);
	// nil answers them with 503. The store serves it beside StoreService.
	Reconcile reconcilev1.ReconcileServiceClient
	// Metrics is where the service records its metrics (package metrics);
	// nil records nothing.
	Metrics prometheus.Registerer
	// Tracing, when on, records a span for each request, continuing the
	// trace of a request that carries traceparent (nil: off).
	Tracing *tracing.Tracing
	// Identity is the gateway's credentials (--identity-dir). With them the
	// REST rules hold (authz.REST: fence headers are registry-sync's, the
	// reserved keys are their writers'), and the service listener
	// (ServeListeners) serves TLS with them, requiring a client
	// certificate. Nil: identities off, nothing of this is enforced and
	// every request is anonymous.
	Identity *identity.Credentials
	// Authz is what the REST rules do with a write they refuse: enforce
	// (403) or audit-only (log and allow). Only with Identity.
	Authz authz.Mode
	// Auth says who may call the public API (authentication is on unless
	// Auth.Mode is authn.ModeNone).
	Auth AuthConfig
	// Tokens is the store's TokenService, where API tokens are kept; nil
	// refuses API tokens and answers the token endpoints 503.
	Tokens storev1.TokenServiceClient
	// AllowedOrigins are the web origins (scheme://host[:port]) whose pages
	// may send writes (POST, PUT, PATCH, DELETE) from a browser besides the
	// gateway's own: any other cross-origin browser write is refused (403
	// cross_origin; crossOrigin in handler_edge.go).
	AllowedOrigins []string
	// AllowedHosts are the names the public listener answers to (the Host
	// header, port ignored): host names, IP addresses, or "*.example.com"
	// for any name under example.com. A request for another is answered
	// 421 host_not_allowed (DNS rebinding). Empty: any Host (the default;
	// `no8s dev` sets loopback names). Probes, metrics and the service
	// listener are not checked.
	AllowedHosts []string
	// TLSCertFile and TLSKeyFile, together, serve the public listener over
	// TLS (1.2 or later) with that certificate (and its chain) and key
	// (PEM). The files are read again when they change, at most once a
	// second, without a restart; a pair that does not load keeps the
	// previous one in use (and is logged). Neither: plain HTTP.
	TLSCertFile, TLSKeyFile string
	// Limits bound what one caller may take: requests per second
	// (RateLimit, RateBurst) and open watches (MaxWatches) per identity,
	// bodies read at once per source address (MaxBodyReadsPerSource); over
	// one, 429 rate_limited with Retry-After. DefaultConfig sets
	// DefaultLimits (200 requests a second, bursts of 400, 100 watches, 8
	// bodies); a zero field turns its limit off (handler_limits.go).
	Limits
	// Audit is the audit log: a record of every write and every denied
	// request (handler_audit.go; zero: none).
	Audit AuditConfig
}

// Validate reports the settings ServeListeners cannot serve with: a
// malformed allowed origin or host, half a TLS key pair, or a negative
// limit.
func (c Config) Validate() error {
	if _, err := newOriginCheck(c.AllowedOrigins); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if _, err := newHostList(c.AllowedHosts); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("gateway: TLS needs both a certificate file and a key file (--tls-cert-file, --tls-key-file)")
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// InputConfig configures the queue input.
type InputConfig struct {
	// Enabled serves the queue input (Serve runs it beside HTTP).
	Enabled bool
	queueinput.Config
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{ShutdownGrace: DefaultShutdownGrace, RequestTimeout: DefaultRequestTimeout,
		ReadHeaderTimeout: DefaultReadHeaderTimeout, BodyReadTimeout: DefaultBodyReadTimeout,
		IdleTimeout: DefaultIdleTimeout, MaxConcurrentBodyReads: DefaultMaxConcurrentBodyReads,
		Input: InputConfig{Enabled: true}, Limits: DefaultLimits()}
}

func (c Config) withDefaults() Config {
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.BodyReadTimeout <= 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxConcurrentBodyReads <= 0 {
		c.MaxConcurrentBodyReads = DefaultMaxConcurrentBodyReads
	}
	c.Auth = c.Auth.withDefaults()
	return c
}
