package metrics

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every no8s metric.
const Namespace = "no8s"

// NewRegistry returns a registry with the Go runtime and process collectors
// registered: one per process, built in main.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves g in the Prometheus text (or OpenMetrics, when asked)
// format. Errors of single collectors are reported in the answer's log
// rather than failing the scrape.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Register registers cs on reg, and does nothing when reg is nil. A
// collector whose series are registered already (a second component of
// the same kind in one process, as in no8s dev) is skipped; any other
// registration error is a programming error and panics, as
// prometheus.MustRegister does.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) {
	if reg == nil {
		return
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			panic(err)
		}
	}
}

// MustVec registers c on reg and returns the collector that is registered
// under c's descriptors: c itself, or the one registered before (two
// components of one kind in one process share their series). With a nil
// reg it returns c, unregistered: recording into it costs little and is
// never scraped.
func MustVec[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// CounterFunc registers a counter whose value is read from f at every
// scrape: for a total a component keeps already (an atomic counter).
func CounterFunc(reg prometheus.Registerer, name, help string, f func() float64) {
	Register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, f))
}

// GaugeFunc registers a gauge whose value is read from f at every scrape.
func GaugeFunc(reg prometheus.Registerer, name, help string, f func() float64) {
	Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, f))
}

// DurationBuckets are the histogram buckets of request and call latencies
// in seconds: 1 ms to 10 s.
func DurationBuckets() []float64 {
	return []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
}

// LongBuckets are the buckets of longer operations in seconds (reconciles,
// syncs, backoff delays): 10 ms to 30 minutes.
func LongBuckets() []float64 {
	return []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
}

// SizeBuckets count items in a batch: 1 to 1024.
func SizeBuckets() []float64 { return prometheus.ExponentialBuckets(1, 2, 11) }
