package queueinput

import (
	"github.com/prometheus/client_golang/prometheus"
	"time"

	"github.com/no8s/no8s/libs/api/subjects"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultAckWait is how long a gateway may hold a message without a
	// sign of life before it is redelivered (a running request extends it
	// every AckWait/3).
	DefaultAckWait = 30 * time.Second
	// DefaultConcurrency bounds the messages one gateway handles at once,
	// requests and queue messages each.
	DefaultConcurrency = 32
	// DefaultRetryDelay is the first retry's delay; it doubles per
	// delivery up to DefaultMaxRetryDelay.
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = 30 * time.Second
	// DefaultRestartDelay is the pause before the consumer is set up again
	// after it failed (the broker restarted without its storage).
	DefaultRestartDelay = time.Second
	// DefaultDrainGrace bounds how long running messages may finish once
	// the listener stops; the ones still running then are left
	// unacknowledged and redelivered.
	DefaultDrainGrace = 10 * time.Second
)

// Config configures the listener.
type Config struct {
	// Metrics is where the listener counts messages by outcome
	// (no8s_queue_input_messages_total); nil counts nothing.
	Metrics prometheus.Registerer
	// AckWait is the consumer's ack wait (default DefaultAckWait). The
	// gateway that creates or updates the consumer sets it for all.
	AckWait time.Duration
	// MaxDeliver bounds the deliveries of a message (default
	// subjects.InputMaxDeliver).
	MaxDeliver int
	// Concurrency bounds the messages handled at once (default
	// DefaultConcurrency).
	Concurrency int
	// RetryDelay and MaxRetryDelay shape the retries of answers a retry
	// may change.
	RetryDelay, MaxRetryDelay time.Duration
	// KeyTTL is how long idempotency keys are remembered (default
	// subjects.InputKeysTTL).
	KeyTTL time.Duration
	// Replicas is the replication factor of the streams and the bucket
	// (default 1).
	Replicas int
	// RestartDelay is the pause before the consumer is set up again after
	// a failure (default DefaultRestartDelay).
	RestartDelay time.Duration
	// DrainGrace bounds the wait for running messages at stop (default
	// DefaultDrainGrace).
	DrainGrace time.Duration
}

func (c Config) withDefaults() Config {
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = subjects.InputMaxDeliver
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.MaxRetryDelay <= 0 {
		c.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if c.KeyTTL <= 0 {
		c.KeyTTL = subjects.InputKeysTTL
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.RestartDelay <= 0 {
		c.RestartDelay = DefaultRestartDelay
	}
	if c.DrainGrace <= 0 {
		c.DrainGrace = DefaultDrainGrace
	}
	return c
}
