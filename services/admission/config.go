package admission

import (
	"time"

	"github.com/no8s/no8s/services/admission/webhook"
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
