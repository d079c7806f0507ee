package scheduler

import (
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/scheduler/dispatch"
)

// Config configures the scheduler.
type Config struct {
	// Holder names this process in the leadership lease (default
	// hostname-pid).
	Holder string
	// Lease is the leadership lease (default 6 s; whole seconds). A standby
	// takes over within Lease + Renew of the leader's death.
	Lease time.Duration
	// Renew is how often the leader renews and a standby campaigns (default
	// Lease/3).
	Renew time.Duration
	// ItemLease is how long a dispatched item may wait for a worker to start
	// it before the scheduler looks whether it is still queued and, if it is
	// gone and no attempt took it, dispatches again (default 30 s). Still
	// queued while no item of its type was taken in that time either, the
	// resource gets condition ReconcilerAvailable=False of reason
	// ReconcilerNotResponding and a Warning Event; so does one whose work
	// has waited that long for a type no live reconciler serves.
	ItemLease time.Duration
	// Dispatchers is how many dispatches run concurrently (default 8).
	Dispatchers int
	// LivenessPoll is how often the reconciler registry is read (default 2 s).
	LivenessPoll time.Duration
	// Relist is how often the leader re-reads every resource's state as a
	// safety net besides the event stream (default 5 min; negative: never).
	Relist time.Duration
	// RetryDelay is the wait after a dispatch failed for a reason other than
	// leadership (default 1 s).
	RetryDelay time.Duration
	// StatePage is the ListReconcileState page size (default 1000).
	StatePage int
	// Stream configures NO8S_RECONCILE when the scheduler creates it.
	Stream dispatch.StreamConfig
	// CallTimeout bounds each call to the store (default 10 s).
	CallTimeout time.Duration
	// Metrics is where the service records its metrics (package metrics);
	// nil records nothing.
	Metrics prometheus.Registerer
	// Tracing records a dispatch span per work item and carries its
	// context in the item's headers (package tracing); nil or off records
	// nothing.
	Tracing *tracing.Tracing
	// GarbageCollector runs the garbage collector (package collector) in
	// this process, on a leader lease of its own (default true).
	GarbageCollector bool
	// GCSweep is how often the collector sweeps every resource with owner
	// references besides the hints of the event stream (default 1 min).
	GCSweep time.Duration
	// APIURL is the public REST API where the collector's writes go (with
	// Identity: the gateway's service listener, https).
	APIURL string
	// Identity is the scheduler's credentials, presented to the gateway's
	// service listener by the collector's API client (nil: none).
	Identity *identity.Credentials
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Lease:        6 * time.Second,
		ItemLease:    30 * time.Second,
		Dispatchers:  8,
		LivenessPoll: 2 * time.Second,
		Relist:       5 * time.Minute,
		RetryDelay:   time.Second,
		StatePage:    1000,
		Stream:       dispatch.DefaultStreamConfig(),
		CallTimeout:  10 * time.Second,

		GarbageCollector: true,
		GCSweep:          time.Minute,
		APIURL:           "http://127.0.0.1:8000",
	}
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.Holder == "" {
		host, _ := os.Hostname()
		c.Holder = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.Lease == 0 {
		c.Lease = d.Lease
	}
	if c.Lease < time.Second || c.Lease%time.Second != 0 {
		return c, fmt.Errorf("scheduler lease %v: must be whole seconds, at least 1s", c.Lease)
	}
	if c.Renew <= 0 {
		c.Renew = c.Lease / 3
	}
	if c.Renew >= c.Lease {
		return c, fmt.Errorf("scheduler renew interval %v must be shorter than the lease %v", c.Renew, c.Lease)
	}
	if c.ItemLease <= 0 {
		c.ItemLease = d.ItemLease
	}
	if c.Dispatchers <= 0 {
		c.Dispatchers = d.Dispatchers
	}
	if c.LivenessPoll <= 0 {
		c.LivenessPoll = d.LivenessPoll
	}
	if c.Relist == 0 {
		c.Relist = d.Relist
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = d.RetryDelay
	}
	if c.StatePage <= 0 {
		c.StatePage = d.StatePage
	}
	if c.Stream == (dispatch.StreamConfig{}) {
		c.Stream = d.Stream
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = d.CallTimeout
	}
	if c.GCSweep <= 0 {
		c.GCSweep = d.GCSweep
	}
	if c.GarbageCollector && c.APIURL == "" {
		return c, fmt.Errorf("the garbage collector needs the API's URL (--api-url), or --garbage-collector=false")
	}
	return c, nil
}
