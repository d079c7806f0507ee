package worker

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// workerMetrics are the worker's series (WithMetrics). Labels are the
// reconciler's name, the resource's type (Name/version), the outcome and
// the step's name: all bounded by the reconciler's code, never by the
// resources it serves.
type workerMetrics struct {
	reconciler string
	total      *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	steps      *prometheus.HistogramVec
	stepErrors *prometheus.CounterVec
	renewals   *prometheus.CounterVec
	lost       prometheus.Counter
	results    sync.Map // resultKey → *resultChildren
	stepCache  sync.Map // stepKey → prometheus.Observer
}

type resultKey struct{ typ, result string }

type resultChildren struct {
	total    prometheus.Counter
	duration prometheus.Observer
}

type stepKey struct{ step, stage string }

func newWorkerMetrics(reg prometheus.Registerer, w *Worker) *workerMetrics {
	name := w.name
	m := &workerMetrics{
		reconciler: name,
		total: metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "reconcile",
			Name: "total", Help: "Reconcile attempts finished, by reconciler, resource type and result (success, requeue, error, terminal, skipped)."},
			[]string{"reconciler", "type", "result"})),
		duration: metrics.MustVec(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "reconcile",
			Name: "duration_seconds", Help: "Duration of reconcile attempts, from the lease to the saved result, by reconciler, resource type and result.",
			Buckets: metrics.LongBuckets()}, []string{"reconciler", "type", "result"})),
		steps: metrics.MustVec(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "reconcile",
			Name: "step_duration_seconds", Help: "Duration of the engine's steps, by reconciler, step and stage (do, cleanup, post).",
			Buckets: metrics.LongBuckets()}, []string{"reconciler", "step", "stage"})),
		stepErrors: metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "reconcile",
			Name: "step_errors_total", Help: "Steps that returned an error or panicked, by reconciler, step and stage."},
			[]string{"reconciler", "step", "stage"})),
		renewals: metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "reconcile",
			Name: "lease_renewals_total", Help: "Reconcile lease renewals by reconciler and result (ok, failed)."},
			[]string{"reconciler", "result"})),
		lost: metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "reconcile",
			Name: "lease_lost_total", Help: "Reconcile leases lost during an attempt (taken over or gone), by reconciler: the attempt was cancelled."},
			[]string{"reconciler"})).WithLabelValues(name),
	}
	m.renewals.WithLabelValues(name, "ok")
	m.renewals.WithLabelValues(name, "failed")
	// Live values the worker keeps already.
	labels := prometheus.Labels{"reconciler": name}
	metrics.Register(reg,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "reconcile", Name: "in_flight",
			Help: "Reconcile attempts running in this replica.", ConstLabels: labels}, func() float64 {
			w.mu.Lock()
			defer w.mu.Unlock()
			return float64(len(w.inflight))
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "worker", Name: "ready",
			Help: "1 while the worker is registered and consuming, else 0.", ConstLabels: labels}, func() float64 {
			if w.Ready() {
				return 1
			}
			return 0
		}),
		newItemsCollector(name, &w.stats),
	)
	return m
}

// itemsCollector exposes the worker's Stats as no8s_worker_items_total by
// broker action.
type itemsCollector struct {
	desc  *prometheus.Desc
	name  string
	stats *Stats
}

func newItemsCollector(name string, s *Stats) *itemsCollector {
	return &itemsCollector{name: name, stats: s, desc: prometheus.NewDesc("no8s_worker_items_total",
		"Work items by what the worker did with them: fetched, and settled as ack, nak or term.", []string{"action"}, prometheus.Labels{"reconciler": name})}
}

func (c *itemsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *itemsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range []struct {
		action string
		n      int64
	}{{"fetched", c.stats.Fetched.Load()}, {"ack", c.stats.Acked.Load()}, {"nak", c.stats.Naked.Load()}, {"term", c.stats.Termed.Load()}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(v.n), v.action)
	}
}

// attempt records one finished attempt.
func (m *workerMetrics) attempt(typ sdk.TypeRef, rep wire.Report, d time.Duration) {
	if m == nil {
		return
	}
	result := rep.Outcome.String()
	if rep.Skipped {
		result = "skipped"
	}
	k := resultKey{typ.String(), result}
	c, ok := m.results.Load(k)
	if !ok {
		c, _ = m.results.LoadOrStore(k, &resultChildren{
			total:    m.total.WithLabelValues(m.reconciler, k.typ, result),
			duration: m.duration.WithLabelValues(m.reconciler, k.typ, result),
		})
	}
	rc := c.(*resultChildren)
	rc.total.Inc()
	rc.duration.Observe(d.Seconds())
}

// observeStep records a step's duration and failure (stepHook); nothing
// without metrics.
func (m *workerMetrics) observeStep(step, stage string, d time.Duration, failed bool) {
	if m == nil {
		return
	}
	k := stepKey{step, stage}
	o, ok := m.stepCache.Load(k)
	if !ok {
		o, _ = m.stepCache.LoadOrStore(k, m.steps.WithLabelValues(m.reconciler, step, stage))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
	if failed {
		m.stepErrors.WithLabelValues(m.reconciler, step, stage).Inc()
	}
}

func (m *workerMetrics) renewed(err error) {
	if m == nil {
		return
	}
	r := "ok"
	if err != nil {
		r = "failed"
	}
	m.renewals.WithLabelValues(m.reconciler, r).Inc()
}

func (m *workerMetrics) leaseLost() {
	if m != nil {
		m.lost.Inc()
	}
}
