package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/api/subjects"
	apiclient "github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
	"github.com/no8s/no8s/libs/sdk/registry"
)

// Sentinel errors, matchable with errors.Is.
var (
	// ErrInvalidConfig: the Config is incomplete or inconsistent.
	ErrInvalidConfig = errors.New("worker: invalid config")
	// ErrInvalidOption: an Option's value is out of range.
	ErrInvalidOption = errors.New("worker: invalid option")
	// ErrTypeTaken: another reconciler serves one of the types (registration
	// refused). Same as registry.ErrTypeTaken.
	ErrTypeTaken = registry.ErrTypeTaken
	// ErrAlreadyRunning: Run was called twice.
	ErrAlreadyRunning = errors.New("worker: already running")
)

// Defaults.
const (
	DefaultMaxConcurrency = 8
	DefaultLease          = 30 * time.Second
	DefaultShutdownGrace  = 25 * time.Second
	DefaultInterruptWait  = 5 * time.Second
	DefaultFetchWait      = 5 * time.Second
	// DefaultStream is the work queue's name (subjects.ReconcileStream).
	DefaultStream = subjects.ReconcileStream
)

// Subject is the work item subject of type t (subjects.Reconcile).
func Subject(t sdk.TypeRef) string { return subjects.Reconcile(t.Name, t.Version) }

// Config is what the worker registers and connects to (the server side).
type Config struct {
	// Types are the resource types the reconciler serves. Required.
	Types []sdk.TypeRef
	// NATS is the connection to the JetStream server. Required.
	NATS *nats.Conn
	// Store is the connection to the store's worker address (its
	// WorkerService, no8s-store --worker-listen). Required.
	Store grpc.ClientConnInterface
}

func (c Config) validate(rec Reconciler) error {
	if rec == nil {
		return fmt.Errorf("%w: no reconciler", ErrInvalidConfig)
	}
	if err := registry.ValidName(rec.Name()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if len(c.Types) == 0 {
		return fmt.Errorf("%w: Types is empty: name at least one type the reconciler serves", ErrInvalidConfig)
	}
	seen := map[sdk.TypeRef]bool{}
	for _, t := range c.Types {
		if err := registry.ValidType(t); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		if seen[t] {
			return fmt.Errorf("%w: type %s listed twice", ErrInvalidConfig, t)
		}
		seen[t] = true
	}
	if err := registry.ValidFinalizers(ownedFinalizers(rec)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	owns, _ := ownedTypes(rec)
	for _, t := range owns {
		if err := registry.ValidType(t); err != nil {
			return fmt.Errorf("%w: owned type: %w", ErrInvalidConfig, err)
		}
	}
	if c.NATS == nil {
		return fmt.Errorf("%w: NATS connection is nil", ErrInvalidConfig)
	}
	if c.Store == nil {
		return fmt.Errorf("%w: Store connection is nil", ErrInvalidConfig)
	}
	return nil
}

// ownedFinalizers are the finalizers rec owns beyond its own
// (wire.FinalizerOwner), declared in its registration.
func ownedFinalizers(rec Reconciler) []string {
	if o, ok := rec.(wire.FinalizerOwner); ok {
		return o.OwnedFinalizers()
	}
	return nil
}

// ownedTypes are the types rec owns (wire.TypeOwner), declared in its
// registration.
func ownedTypes(rec Reconciler) ([]sdk.TypeRef, bool) {
	if o, ok := rec.(wire.TypeOwner); ok {
		return o.OwnedTypes()
	}
	return nil, false
}

// Option tunes the worker's behaviour; each validates its value.
type Option func(*options) error

type options struct {
	maxConcurrency int
	lease          time.Duration
	shutdownGrace  time.Duration
	interruptWait  time.Duration
	fetchWait      time.Duration
	heartbeat      time.Duration
	registryTTL    time.Duration
	maxTimeout     time.Duration
	linkCheck      time.Duration
	replicaID      string
	stream         string
	createStream   bool
	log            *slog.Logger
	secrets        secret.Resolver
	api            *apiclient.Client
	wrapClient     func(wire.Client) wire.Client
	metrics        prometheus.Registerer
	tracing        *tracing.Tracing
}

func defaults() options {
	return options{
		maxConcurrency: DefaultMaxConcurrency, lease: DefaultLease, shutdownGrace: DefaultShutdownGrace,
		interruptWait: DefaultInterruptWait, fetchWait: DefaultFetchWait, linkCheck: DefaultLinkCheck,
		heartbeat: subjects.RegistryHeartbeat, registryTTL: subjects.RegistryTTL,
		stream: DefaultStream, createStream: true, secrets: secret.Local{},
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
}

// WithMaxConcurrency bounds the attempts run at once by this replica
// (default DefaultMaxConcurrency).
func WithMaxConcurrency(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 10000 {
			return invalid("max concurrency %d: want 1..10000", n)
		}
		o.maxConcurrency = n
		return nil
	}
}

// WithLease sets the reconcile lease length, which is also the consumer's
// AckWait: a crashed worker's item returns after it (default 30 s).
func WithLease(d time.Duration) Option {
	return func(o *options) error {
		if d < 3*time.Second || d > time.Hour {
			return invalid("lease %s: want 3s..1h", d)
		}
		if d%time.Second != 0 {
			return invalid("lease %s: want whole seconds", d)
		}
		o.lease = d
		return nil
	}
}

// WithShutdownGrace sets how long in-flight attempts may finish after Run's
// context ends before they are interrupted (default 25 s), and how long
// interrupted ones then get to save (default 5 s).
func WithShutdownGrace(grace, interruptWait time.Duration) Option {
	return func(o *options) error {
		if grace < 0 || interruptWait < 0 {
			return invalid("negative shutdown grace")
		}
		o.shutdownGrace, o.interruptWait = grace, interruptWait
		return nil
	}
}

// WithFetchWait sets how long one fetch waits for items (default 5 s).
func WithFetchWait(d time.Duration) Option {
	return func(o *options) error {
		if d < 100*time.Millisecond || d > time.Minute {
			return invalid("fetch wait %s: want 100ms..1m", d)
		}
		o.fetchWait = d
		return nil
	}
}

// WithHeartbeat sets the registry heartbeat interval and the TTL used when
// the worker creates the bucket (defaults 5 s and 15 s; ttl must be at
// least twice the interval).
func WithHeartbeat(interval, ttl time.Duration) Option {
	return func(o *options) error {
		if interval < 100*time.Millisecond || ttl < 2*interval {
			return invalid("heartbeat %s with ttl %s: want interval >= 100ms and ttl >= 2 intervals", interval, ttl)
		}
		o.heartbeat, o.registryTTL = interval, ttl
		return nil
	}
}

// WithLinkCheck sets how often the worker checks that it reaches the
// store's worker address and NATS (default DefaultLinkCheck). While the
// store does not answer, the worker is not ready, takes no work and keeps
// no registration.
func WithLinkCheck(d time.Duration) Option {
	return func(o *options) error {
		if d < 50*time.Millisecond || d > time.Minute {
			return invalid("link check %s: want 50ms..1m", d)
		}
		o.linkCheck = d
		return nil
	}
}

// WithMaxTimeout caps the per-reconcile timeout the type's policy sets
// (default: no cap).
func WithMaxTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalid("max timeout %s: want > 0", d)
		}
		o.maxTimeout = d
		return nil
	}
}

// WithReplicaID names this replica (default: host name, process id and a
// random suffix).
func WithReplicaID(id string) Option {
	return func(o *options) error {
		if id == "" {
			return invalid("empty replica id")
		}
		o.replicaID = id
		return nil
	}
}

// WithStream sets the work item stream's name (default NO8S_RECONCILE) and
// whether the worker creates it when missing (default true).
func WithStream(name string, create bool) Option {
	return func(o *options) error {
		if name == "" {
			return invalid("empty stream name")
		}
		o.stream, o.createStream = name, create
		return nil
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		o.log = l
		return nil
	}
}

// WithMetrics records the worker's metrics on reg (package metrics):
// attempts by result and their durations, step durations, lease renewals
// and losses, attempts in flight and work items by broker action. RunMain
// builds the process's registry and serves it on the probe listener's
// /metrics; without this option nothing is recorded.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(o *options) error {
		o.metrics = reg
		return nil
	}
}

// WithTracing records the worker's spans with tr (package tracing; build
// it with otlp.Start from the OTEL_* environment): an attempt span that
// continues the work item's trace, a span per step and per action plugin
// call, and the attempt's calls to the store (its lease, finalizers and
// the completion) as client spans inside it. Without it (or with tracing
// off) nothing is recorded.
func WithTracing(tr *tracing.Tracing) Option {
	return func(o *options) error {
		o.tracing = tr
		return nil
	}
}

// WithSecretResolver sets how secret references are resolved (default
// secret.Local{}: the worker's environment and files).
func WithSecretResolver(r secret.Resolver) Option {
	return func(o *options) error {
		if r == nil {
			return invalid("nil secret resolver")
		}
		o.secrets = r
		return nil
	}
}

// WithAPI sets the REST API client each attempt's steps get (Request.API):
// a client of the control plane's gateway, authenticated as the
// reconciler. RunMain sets one from the environment (EnvAPIURL).
func WithAPI(c *apiclient.Client) Option {
	return func(o *options) error {
		if c == nil {
			return invalid("nil API client")
		}
		o.api = c
		return nil
	}
}

// WithClientWrapper wraps the client each attempt gets (reads, finalizers
// and the fenced save), for tests that inject faults into a real client
// (package client/interceptor) rather than fake it.
func WithClientWrapper(wrap func(wire.Client) wire.Client) Option {
	return func(o *options) error {
		if wrap == nil {
			return invalid("nil client wrapper")
		}
		o.wrapClient = wrap
		return nil
	}
}
