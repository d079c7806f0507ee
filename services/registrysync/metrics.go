package registrysync

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
)

// syncMetrics are registry-sync's series. Their labels are outcomes only:
// the per-registry and per-HttpSource figures are in each one's status.
type syncMetrics struct {
	regDuration *prometheus.HistogramVec
	rows        prometheus.Counter
	polls       *prometheus.CounterVec
	pollTime    prometheus.Observer
	// leading is the syncer of the current term; nil on a standby.
	leading atomic.Pointer[syncer]
}

func newSyncMetrics(reg prometheus.Registerer) *syncMetrics {
	m := &syncMetrics{
		regDuration: metrics.MustVec(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "registry",
			Name: "sync_duration_seconds", Help: "Duration of TenantRegistry syncs by result (ok, partial, failed).", Buckets: metrics.LongBuckets()},
			[]string{"result"})),
		rows: metrics.MustVec(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "registry",
			Name: "sync_rows_read_total", Help: "Rows read from TenantRegistry datasources (active and invalid)."})),
		polls: metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "httpsource",
			Name: "polls_total", Help: "HttpSource polls by outcome (ok, not_modified, partial, failed)."}, []string{"outcome"})),
		pollTime: metrics.MustVec(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "httpsource",
			Name: "poll_duration_seconds", Help: "Duration of HttpSource polls, their writes included.", Buckets: metrics.LongBuckets()})),
	}
	for _, r := range []string{"ok", "partial", "failed"} {
		m.regDuration.WithLabelValues(r)
	}
	for _, o := range []string{"ok", "not_modified", "partial", "failed"} {
		m.polls.WithLabelValues(o)
	}
	gauge := func(name, help string, f func(*result) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "registry", Name: name, Help: help}, func() float64 {
			sy := m.leading.Load()
			if sy == nil {
				return 0
			}
			sy.mu.Lock()
			defer sy.mu.Unlock()
			n := 0
			for _, st := range sy.state {
				if st.last != nil {
					n += f(st.last)
				}
			}
			return float64(n)
		})
	}
	metrics.Register(reg,
		gauge("desired", "Tenants the TenantRegistries want (active rows × referencing templates), summed over every registry; the leading replica reports, a standby 0.", func(r *result) int { return r.Desired }),
		gauge("ready", "Tenants of TenantRegistries that are ready, summed over every registry (leader only).", func(r *result) int { return r.Ready }),
		gauge("failed", "Tenants of TenantRegistries that failed, summed over every registry (leader only).", func(r *result) int { return r.Failed }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "registry", Name: "sync_leader",
			Help: "1 while this registry-sync replica leads, else 0."}, func() float64 {
			if m.leading.Load() != nil {
				return 1
			}
			return 0
		}),
	)
	return m
}

func (m *syncMetrics) registrySynced(res *result) {
	r := "ok"
	switch {
	case res.Err != nil:
		r = "failed"
	case res.Partial:
		r = "partial"
	}
	m.regDuration.WithLabelValues(r).Observe(res.Duration.Seconds())
	m.rows.Add(float64(res.ActiveRows + res.InvalidRows))
}

func (m *syncMetrics) sourcePolled(res *srcResult, d time.Duration) {
	o := "ok"
	switch {
	case res.Err != nil:
		o = "failed"
	case res.NotModified:
		o = "not_modified"
	case res.Partial:
		o = "partial"
	}
	m.polls.WithLabelValues(o).Inc()
	m.pollTime.Observe(d.Seconds())
}
