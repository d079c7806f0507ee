package gateway

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
)

// limitKind is one of the limits per caller, as the metrics name it.
type limitKind int

const (
	limitRate limitKind = iota
	limitRefusedCredentials
	limitWatches
	limitBodiesPerSource
	limitKinds
)

func (k limitKind) String() string {
	switch k {
	case limitRate:
		return "rate"
	case limitRefusedCredentials:
		return "refused_credentials"
	case limitWatches:
		return "watches"
	case limitBodiesPerSource:
		return "bodies_per_source"
	}
	return "unknown"
}

// limitCounts counts the requests each limit refused.
type limitCounts [limitKinds]atomic.Uint64

// refused counts one request refused by limit k.
func (l *limiter) refused(k limitKind) { l.counts[k].Add(1) }

// registerMetrics exposes on reg the requests each limit refused and the
// rate buckets kept, read at each scrape; nil reg records nothing.
func (l *limiter) registerMetrics(reg prometheus.Registerer) {
	metrics.Register(reg, &limitCollector{l: l,
		refused: prometheus.NewDesc("no8s_http_limited_requests_total",
			"Requests answered 429 rate_limited, by the limit they were over: rate (requests per identity), refused_credentials (refused tokens per address), watches (open event streams per identity), bodies_per_source (bodies read at once per address).",
			[]string{"limit"}, nil),
		buckets: prometheus.NewDesc("no8s_http_rate_limit_buckets",
			"Token buckets kept for the request rate limit: identities, and addresses that sent refused tokens, seen in the last minute or not yet full.", nil, nil),
	})
}

type limitCollector struct {
	l                *limiter
	refused, buckets *prometheus.Desc
}

func (c *limitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.refused
	ch <- c.buckets
}

func (c *limitCollector) Collect(ch chan<- prometheus.Metric) {
	for k := range limitKinds {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(c.l.counts[k].Load()), k.String())
	}
	n := 0
	for _, b := range []*rateBuckets{c.l.rate, c.l.refusedBuckets} {
		if b != nil {
			n += b.len()
		}
	}
	ch <- prometheus.MustNewConstMetric(c.buckets, prometheus.GaugeValue, float64(n))
}
