package scheduler

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// snapshotEvery is how often the leader recomputes the gauges that need a
// walk over every resource it tracks (queue depth and age, resources by
// type and status), for up to snapshotPer resources; each further
// snapshotPer adds snapshotEvery, so that the walk takes about the same
// small share of the loop's time at any scale (a million resources: every
// 22 s).
const (
	snapshotEvery = 2 * time.Second
	snapshotPer   = 100_000
)

// snapshotInterval is the walk's interval over n resources.
func snapshotInterval(n int) time.Duration { return snapshotEvery * time.Duration(1+n/snapshotPer) }

// schedMetrics are the scheduler's series.
type schedMetrics struct {
	dispatches [lifecycle.LastReason + 1]prometheus.Counter
	backoff    prometheus.Observer
	// snap is the leader's latest walk; nil on a standby.
	snap atomic.Pointer[snapshot]
}

// snapshot is what the leader computed from its state of every resource.
type snapshot struct {
	// queued counts, per type (Name/version), the dispatched items no
	// worker has started yet; oldest is the dispatch time of the oldest.
	queued map[string]int
	oldest map[string]time.Time
	// resources counts resources per type and lifecycle status.
	resources map[[2]string]int
}

func newSchedMetrics(reg prometheus.Registerer, s *Service) *schedMetrics {
	m := &schedMetrics{}
	dv := metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "scheduler",
		Name: "dispatches_total", Help: "Work items published, by reason (generation, deletion, manual, annotation, resync, retry, pending, requeue, dependency)."},
		[]string{"reason"}))
	for r := lifecycle.ReasonGeneration; r <= lifecycle.LastReason; r++ {
		m.dispatches[r] = dv.WithLabelValues(r.String())
	}
	m.backoff = metrics.MustVec(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "scheduler",
		Name: "backoff_delay_seconds", Help: "Delays before the retries of failed resources: from the failed attempt to the retry's dispatch.",
		Buckets: metrics.LongBuckets()}))
	metrics.Register(reg,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "scheduler", Name: "leader",
			Help: "1 while this scheduler leads, else 0: the sum over all schedulers is 1 when one leads."}, func() float64 {
			if s.Status().Leader {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "scheduler", Name: "foreign_messages_total",
			Help: "Messages of the event stream this scheduler dropped because the store did not publish them."}, func() float64 {
			return float64(s.foreign.Load())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "scheduler", Name: "tracked_resources",
			Help: "Resources the leader tracks (0 on a standby)."}, func() float64 {
			st := s.Status()
			if !st.Leader {
				return 0
			}
			return float64(st.Tracked)
		}),
		&snapshotCollector{m: m,
			depth: prometheus.NewDesc("no8s_scheduler_queue_depth", "Work items dispatched and not started by a worker yet, by type (leader only).", []string{"type"}, nil),
			age:   prometheus.NewDesc("no8s_scheduler_queue_oldest_age_seconds", "Age of the oldest work item dispatched and not started yet, by type (leader only).", []string{"type"}, nil),
			resources: prometheus.NewDesc("no8s_resources", "Resources by type and lifecycle status (pending, reconciling, ready, failed, deleting), as the leading scheduler tracks them: only the leader reports.",
				[]string{"type", "status"}, nil),
		},
	)
	return m
}

func (m *schedMetrics) dispatched(r lifecycle.Reason) {
	if r > lifecycle.ReasonNone && int(r) < len(m.dispatches) {
		m.dispatches[r].Inc()
	}
}

// walk computes a snapshot from the leader's entries at now.
func walk(entries map[int64]*entry, now time.Time) *snapshot {
	s := &snapshot{queued: map[string]int{}, oldest: map[string]time.Time{}, resources: map[[2]string]int{}}
	for _, e := range entries {
		typ := e.st.TypeName + "/" + e.st.TypeVersion
		s.resources[[2]string{typ, status(&e.st)}]++
		s.queued[typ] += 0 // every type tracked has a depth, 0 included
		if f := e.flight; f != nil && f.sent && !e.st.LeaseActive(now) && e.st.LeaseEpoch <= f.baseEpoch {
			s.queued[typ]++
			if o, ok := s.oldest[typ]; !ok || f.at.Before(o) {
				s.oldest[typ] = f.at
			}
		}
	}
	return s
}

// status is the lifecycle status a resource is counted under.
func status(st *trigger.State) string {
	if st.Deleting {
		return "deleting"
	}
	if st.Status == "" {
		return "pending"
	}
	return st.Status
}

type snapshotCollector struct {
	m                     *schedMetrics
	depth, age, resources *prometheus.Desc
}

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.age
	ch <- c.resources
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.snap.Load()
	if s == nil {
		return
	}
	now := time.Now()
	for typ, n := range s.queued {
		age := 0.0
		if at, ok := s.oldest[typ]; ok {
			age = max(now.Sub(at).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(n), typ)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, typ)
	}
	for k, n := range s.resources {
		ch <- prometheus.MustNewConstMetric(c.resources, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
