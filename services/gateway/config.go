package gateway

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/sdk/health"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/gateway/watch"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultShutdownGrace bounds the graceful stop.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultRequestTimeout bounds each call to a backend.
	DefaultRequestTimeout = 30 * time.Second
	// MaxPatchAttempts bounds the read-merge-write rounds of a PATCH without
	// an explicit resource_version.
	MaxPatchAttempts = 5
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
	// Reconcile serves the reconcile endpoints (manual trigger, history);
	// nil answers them with 503. The store serves it beside StoreService.
	Reconcile reconcilev1.ReconcileServiceClient
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{ShutdownGrace: DefaultShutdownGrace, RequestTimeout: DefaultRequestTimeout}
}

func (c Config) withDefaults() Config {
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return c
}
