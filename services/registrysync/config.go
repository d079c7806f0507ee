package registrysync

import (
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/prometheus/client_golang/prometheus"
	"time"

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/registrysync/datasource"
	"github.com/no8s/no8s/services/registrysync/httppoll"
)

// Config configures registry-sync.
type Config struct {
	// APIURL is the public REST API (the gateway): every Tenant, managed
	// resource and Event write goes there, fenced, through admission like
	// any client's.
	APIURL string
	// Identity is registry-sync's credentials (--identity-dir): with an
	// https APIURL (the gateway's service listener) its API client presents
	// them, and the gateway takes its fenced writes. Nil: identities off.
	Identity *identity.Credentials
	// ReplicaID names this replica; the leader lease holder is
	// registry-sync/<ReplicaID>.
	ReplicaID string
	// Lease is the leader lease; Renew how often it is renewed (Lease/3
	// when zero).
	Lease, Renew time.Duration
	// WorkerLease is the reconcile lease of the registries' and templates'
	// own reconciles.
	WorkerLease time.Duration
	// SecretEnvPrefix is required of every environment variable a
	// registry's credentials name; SecretDir, when set, must contain every
	// file they name (file references are refused without it).
	SecretEnvPrefix, SecretDir string
	// Outbound is the address rule for datasources and HttpSource URLs
	// (webhooks' rule).
	Outbound outbound.Policy
	// Grants are the credential grants (--credential-grants), checked
	// again before a registry's credential or a source's header is
	// resolved. Nil (no file): every secret reference is refused.
	Grants *grants.Set
	// Limits bound every datasource read; RowLimit also bounds the items
	// of an HttpSource's list.
	Limits datasource.Limits
	// BodyLimit bounds the body of an HttpSource's poll, in bytes.
	BodyLimit int64
	// Writes is the number of Tenant writes in flight during a sync.
	Writes int
	// Poll is how often registries, templates and HttpSources are listed
	// for changes.
	Poll time.Duration
	// Settle is how soon a registry is synced again while its Tenants are
	// not all ready or failed yet (so that its status counts converge),
	// when that is sooner than its syncInterval.
	Settle time.Duration
	// Syncs is how many registries and HttpSources sync at once, each on
	// its own: one that hangs holds one slot, not the loop.
	Syncs int
	// Tracing traces each sync (a trace of its own, its API writes in it);
	// nil: off.
	Tracing *tracing.Tracing
	// SyncTimeout bounds one sync of one registry or HttpSource, its
	// writes included (its read has its own, shorter bound: the
	// datasource's statement timeout, the source's timeoutSeconds).
	SyncTimeout time.Duration
	// Metrics is where the service records its metrics (package metrics);
	// nil records nothing.
	Metrics prometheus.Registerer
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		APIURL:          "http://127.0.0.1:8000",
		Lease:           6 * time.Second,
		WorkerLease:     15 * time.Second,
		SecretEnvPrefix: "NO8S_REGISTRY_",
		Limits:          datasource.Limits{StatementTimeout: 10 * time.Second, RowLimit: 100000},
		BodyLimit:       httppoll.DefaultBodyLimit,
		Writes:          8,
		Poll:            500 * time.Millisecond,
		Settle:          2 * time.Second,
		Syncs:           8,
		SyncTimeout:     5 * time.Minute,
	}
}
