package store

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/storage"
)

// DefaultDatabaseURL is the local PostgreSQL server's no8s database.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/no8s?sslmode=disable"

// Config configures the store service.
type Config struct {
	// DatabaseURL names the database: a PostgreSQL connection string
	// (postgres://, postgresql:// or key=value), or sqlite:<path> for the
	// embedded backend (Open).
	DatabaseURL string
	// MaxConns is the pool size.
	MaxConns int32
	// Migrate applies pending migrations at start (under an advisory lock).
	// Without it the store waits until another process (no8s-store
	// migrate) has brought the schema to the newest version it knows.
	Migrate bool
	// SchemaPoll is how often a store without Migrate checks the schema
	// while it waits for it (2 s when zero).
	SchemaPoll time.Duration
	// Relay tunes the outbox relay.
	Relay outbox.Config
	// Stream configures the NO8S_EVENTS stream.
	Stream eventstream.StreamConfig
	// ShutdownGrace bounds the graceful stop.
	ShutdownGrace time.Duration
	// HistoryLimit bounds the reconciliation history rows kept per resource.
	HistoryLimit int
	// RebuildStreamOnMismatch rebuilds the event stream at start when it
	// does not belong to the database (outbox.Rebuild) instead of refusing
	// to start. no8s dev sets it.
	RebuildStreamOnMismatch bool
	// RevisionMargin is how far a rebuild moves the revision past the
	// highest one the database or the stream has seen.
	RevisionMargin int64
	// NamespaceSweep is how often terminating namespaces are finalized
	// (removed once their last resource is gone).
	NamespaceSweep time.Duration
	// Metrics is where the store records its metrics (commits, the relay,
	// the outbox's backlog, gRPC calls); nil records nothing.
	Metrics prometheus.Registerer
	// GRPCServerOptions go first on every gRPC server of the store: with
	// identities on, TLS requiring a client certificate and the policy
	// (proc.Service.ServerOptions, which add tracing); none: any caller is taken.
	GRPCServerOptions []grpc.ServerOption
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		DatabaseURL:   DefaultDatabaseURL,
		MaxConns:      32,
		Migrate:       true,
		Relay:         outbox.DefaultConfig(),
		Stream:        eventstream.DefaultStreamConfig(),
		ShutdownGrace: 10 * time.Second,
		HistoryLimit:  storage.DefaultHistoryLimit,

		RevisionMargin: outbox.DefaultRevisionMargin,
		NamespaceSweep: DefaultNamespaceSweep,
	}
}
