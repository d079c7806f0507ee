package watch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
)

// RegisterMetrics exposes the hub's counters (Stats) on reg, read at each
// scrape: open watches, events sent, slow consumers sent back to the
// stream or ended, resumes, 410s and foreign messages dropped.
func (h *Hub) RegisterMetrics(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	metrics.Register(reg, &hubCollector{h: h,
		open:      prometheus.NewDesc("no8s_watch_streams_open", "Watches (SSE streams) open.", nil, nil),
		live:      prometheus.NewDesc("no8s_watch_streams_live", "Open watches served from the live fan-out (the others are catching up from the stream).", nil, nil),
		events:    prometheus.NewDesc("no8s_watch_events_fanned_out_total", "Events the hub has fanned out to its watches.", nil, nil),
		overflows: prometheus.NewDesc("no8s_watch_slow_consumers_total", "Watches sent back from the live fan-out to the stream for being slow (they catch up, nothing is dropped).", nil, nil),
		tooSlow:   prometheus.NewDesc("no8s_watch_slow_consumers_dropped_total", "Watches ended with a too_slow event because their client accepted no data for the stall timeout.", nil, nil),
		catchUps:  prometheus.NewDesc("no8s_watch_catchups_total", "Catch-up consumers created: resumed watches and slow ones sent back to the stream.", nil, nil),
		gone:      prometheus.NewDesc("no8s_watch_gone_total", "Watches ended with 410 Gone because their resume point was compacted away.", nil, nil),
		foreign:   prometheus.NewDesc("no8s_watch_foreign_messages_total", "Messages of the event stream the hub dropped as not the store's.", nil, nil),
	})
}

type hubCollector struct {
	h                                                               *Hub
	open, live, events, overflows, tooSlow, catchUps, gone, foreign *prometheus.Desc
}

func (c *hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.live, c.events, c.overflows, c.tooSlow, c.catchUps, c.gone, c.foreign} {
		ch <- d
	}
}

func (c *hubCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.h.Stats()
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(st.Watchers))
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(st.Live))
	for _, v := range []struct {
		d *prometheus.Desc
		n int64
	}{{c.events, st.Events}, {c.overflows, st.Overflows}, {c.tooSlow, st.TooSlow}, {c.catchUps, st.CatchUps}, {c.gone, st.Gone}, {c.foreign, st.Foreign}} {
		ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n))
	}
}
