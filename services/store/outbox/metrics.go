package outbox

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
)

// RegisterMetrics exposes the relay's own counters and state on reg, read
// at each scrape (no8s_store_relay_...): what it published, the rows it
// found committed below its cursor (Late), the foreign messages
// (Foreign), whether it is degraded and whether it leads. A nil reg
// registers nothing.
func (r *Relay) RegisterMetrics(reg prometheus.Registerer) {
	metrics.CounterFunc(reg, "store_relay_published_total", "Events the outbox relay of this process published to the event stream.",
		func() float64 { return float64(r.Published()) })
	metrics.CounterFunc(reg, "store_relay_late_total", "Outbox rows found committed below the relay's cursor after it had passed their revision: events that will never be published (see the relay's ERROR log for the revisions).",
		func() float64 { return float64(r.Late()) })
	metrics.CounterFunc(reg, "store_relay_foreign_total", "Messages found in the event stream that this store's relay did not publish.",
		func() float64 { return float64(r.Foreign()) })
	metrics.GaugeFunc(reg, "store_relay_degraded", "1 while the relay reports itself degraded (foreign messages in the stream, or a stream that does not belong to the database), else 0.",
		func() float64 { return boolGauge(r.Degraded() != "") })
	metrics.GaugeFunc(reg, "store_relay_leader", "1 while this process's outbox relay holds the relay lock and publishes, else 0.",
		func() float64 { return boolGauge(r.Leader()) })
	for result, n := range map[string]*atomic.Int64{"ok": &r.identityOK, "mismatch": &r.identityMismatch} {
		metrics.Register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: "store_stream_identity_checks_total",
			Help:        "Checks that the event stream belongs to the database (at each relay leadership), by result: ok, or mismatch (the relay does not publish; the store is degraded until the stream is rebuilt).",
			ConstLabels: prometheus.Labels{"result": result}}, func() float64 { return float64(n.Load()) }))
	}
	metrics.GaugeFunc(reg, "store_relay_cursor_revision", "The highest revision known to be published by this process's relay.",
		func() float64 { return float64(r.Cursor()) })
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
