package admission

import "time"

// Config configures the admission service.
type Config struct {
	// ShutdownGrace bounds the graceful stop.
	ShutdownGrace time.Duration
	// StoreTimeout bounds each read of a resource type from the store.
	StoreTimeout time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{ShutdownGrace: 10 * time.Second, StoreTimeout: 5 * time.Second}
}
