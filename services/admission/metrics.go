package admission

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
)

// webhookMetrics records admission webhook calls by webhook (the
// registered webhook's name: cluster-wide configuration an operator
// writes, as bounded as the types), outcome and latency.
type webhookMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	children sync.Map // [2]string{webhook, outcome} → *webhookChildren
}

type webhookChildren struct {
	calls    prometheus.Counter
	duration prometheus.Observer
}

func newWebhookMetrics(reg prometheus.Registerer) *webhookMetrics {
	return &webhookMetrics{
		calls: metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "admission",
			Name: "webhook_calls_total", Help: "Admission webhook calls by webhook and outcome (allowed, denied, error, canceled)."},
			[]string{"webhook", "outcome"})),
		duration: metrics.MustVec(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "admission",
			Name: "webhook_call_duration_seconds", Help: "Latency of admission webhook calls by webhook and outcome.", Buckets: metrics.DurationBuckets()},
			[]string{"webhook", "outcome"})),
	}
}

func (m *webhookMetrics) observe(webhook, outcome string, d time.Duration) {
	k := [2]string{webhook, outcome}
	c, ok := m.children.Load(k)
	if !ok {
		c, _ = m.children.LoadOrStore(k, &webhookChildren{calls: m.calls.WithLabelValues(webhook, outcome), duration: m.duration.WithLabelValues(webhook, outcome)})
	}
	wc := c.(*webhookChildren)
	wc.calls.Inc()
	wc.duration.Observe(d.Seconds())
}
