package admission

import (
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/services/admission/webhook"
	"github.com/no8s/no8s/services/internal/grants"
)

// Config configures the admission service.
type Config struct {
	// ShutdownGrace bounds the graceful stop.
	ShutdownGrace time.Duration
	// StoreTimeout bounds each read of a resource type from the store.
	StoreTimeout time.Duration
	// WebhookRefresh is how often the registered admission webhooks are
	// polled from the store (a cheap query while they do not change).
	WebhookRefresh time.Duration
	// WebhookChainTimeout bounds one request's whole webhook chain.
	WebhookChainTimeout time.Duration
	// JetStream reaches the live reconciler registry (KV NO8S_RECONCILERS)
	// for the live-reconciler rule: a new resource of a type that no live
	// reconciler serves is refused (400 no_reconciler), and one that is
	// admitted carries its reconciler's finalizer. Nil turns the rule off
	// (admission tests of schemas and webhooks alone); every deployment sets it.
	JetStream jetstream.KeyValueManager
	// Outbound is the address rule for calls to webhooks: the zero Policy
	// allows public addresses only; `no8s dev` allows loopback and private
	// ones too. Link-local addresses (cloud metadata) are refused unless
	// named.
	Outbound outbound.Policy
	// Resolver resolves webhook host names (net.DefaultResolver when nil).
	Resolver outbound.Resolver
	// Grants are the credential grants (--credential-grants): a
	// TenantRegistry's or HttpSource's secret reference outside them is
	// refused. Nil (no file): every secret reference is refused.
	Grants *grants.Set
	// Metrics is where the service records its metrics (package metrics);
	// nil records nothing.
	Metrics prometheus.Registerer
	// GRPCServerOptions go first on every gRPC server of the service: with
	// identities on, TLS requiring a client certificate and the policy
	// (proc.Service.ServerOptions, which add tracing); none: any caller is taken.
	GRPCServerOptions []grpc.ServerOption
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		ShutdownGrace:       10 * time.Second,
		StoreTimeout:        5 * time.Second,
		WebhookRefresh:      250 * time.Millisecond,
		WebhookChainTimeout: webhook.DefaultChainTimeout,
	}
}
