package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP records HTTP requests by route template, method and status code
// (no8s_http_requests_total) with a latency histogram by route and method
// (no8s_http_request_duration_seconds), and the requests in flight. The
// route is the router's template ("/api/v1/resources/:id"), never the
// path; requests that match no route are recorded under the route
// "unmatched". Children are cached per (route, method, code).
type HTTP struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inflight prometheus.Gauge
	children sync.Map // httpKey → *httpChildren
}

type httpKey struct {
	route, method string
	code          int
}

type httpChildren struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// NewHTTP returns the recorder, registered on reg.
func NewHTTP(reg prometheus.Registerer) *HTTP {
	return &HTTP{
		requests: MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "http",
			Name: "requests_total", Help: "HTTP requests answered, by route template, method and status code."}, []string{"route", "method", "code"})),
		duration: MustVec(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "http",
			Name: "request_duration_seconds", Help: "Latency of HTTP requests until the handler returned, by route template and method (watches: the stream's whole life).",
			Buckets: DurationBuckets()}, []string{"route", "method"})),
		inflight: MustVec(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "http",
			Name: "requests_in_flight", Help: "HTTP requests being served."})),
	}
}

// Start counts a request in flight, until Done.
func (h *HTTP) Start() { h.inflight.Inc() }

// Done records a request of route and method answered with code after d,
// and ends what Start counted.
func (h *HTTP) Done(route, method string, code int, d time.Duration) {
	h.inflight.Dec()
	if route == "" {
		route = "unmatched"
	}
	method = Method(method)
	k := httpKey{route, method, code}
	c, ok := h.children.Load(k)
	if !ok {
		c, _ = h.children.LoadOrStore(k, &httpChildren{
			requests: h.requests.WithLabelValues(route, method, strconv.Itoa(code)),
			duration: h.duration.WithLabelValues(route, method),
		})
	}
	ch := c.(*httpChildren)
	ch.requests.Inc()
	ch.duration.Observe(d.Seconds())
}

// Method bounds a request's method to the standard ones: any other is
// "other", so that a client cannot add series.
func Method(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		return m
	}
	return "other"
}
