package store

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/services/store/storage"
)

// commitMetrics records every COMMIT (storage.Options.ObserveCommit).
type commitMetrics struct {
	commits  prometheus.Counter
	writes   prometheus.Counter
	duration prometheus.Observer
	batch    prometheus.Observer
}

func newCommitMetrics(reg prometheus.Registerer) *commitMetrics {
	return &commitMetrics{
		commits: metrics.MustVec(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "store",
			Name: "commits_total", Help: "Write transactions committed (one COMMIT may carry several writes: group commit)."})),
		writes: metrics.MustVec(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "store",
			Name: "committed_writes_total", Help: "Writes committed."})),
		duration: metrics.MustVec(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "store",
			Name: "commit_duration_seconds", Help: "Time from a write transaction's start to its COMMIT.", Buckets: metrics.DurationBuckets()})),
		batch: metrics.MustVec(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "store",
			Name: "commit_batch_writes", Help: "Writes per COMMIT: above 1 when the group commit shared a transaction among writes.", Buckets: metrics.SizeBuckets()})),
	}
}

func (m *commitMetrics) observe(writes int, d time.Duration) {
	m.commits.Inc()
	m.writes.Add(float64(writes))
	m.duration.Observe(d.Seconds())
	m.batch.Observe(float64(writes))
}

// pendingScan is the most outbox rows a scrape counts.
const pendingScan = 10000

// outboxCollector reads the outbox's backlog from the database at each
// scrape: the rows above the relay's cursor (counted up to pendingScan)
// and the age of the oldest. Only a revision gap costs a read of rows; an
// idle store answers from the relay state alone.
type outboxCollector struct {
	ctx     context.Context
	log     storage.EventLog
	pending *prometheus.Desc
	age     *prometheus.Desc
}

func newOutboxCollector(ctx context.Context, el storage.EventLog) *outboxCollector {
	return &outboxCollector{ctx: ctx, log: el,
		pending: prometheus.NewDesc("no8s_store_outbox_pending_rows", "Outbox rows committed and not yet published (counted up to 10000).", nil, nil),
		age:     prometheus.NewDesc("no8s_store_outbox_oldest_pending_age_seconds", "Age of the oldest outbox row not yet published (0 when none).", nil, nil),
	}
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.pending; ch <- c.age }

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
	defer cancel()
	st, err := c.log.State(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.pending, err)
		return
	}
	var rows []storage.OutboxRow
	if st.Revision > st.Cursor {
		if rows, err = c.log.ReadOutbox(ctx, st.Cursor, st.Revision, pendingScan); err != nil {
			ch <- prometheus.NewInvalidMetric(c.pending, err)
			return
		}
	}
	age := 0.0
	if len(rows) > 0 {
		age = max(time.Since(rows[0].CreatedAt).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(len(rows)))
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age)
}
