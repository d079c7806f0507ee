package gateway

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/authz"
)

// What one caller may take of the gateway: requests per second and open
// watches per identity, and request bodies read at once per source
// address. A caller over a limit is answered 429 rate_limited with a
// Retry-After of whole seconds; the others are served as usual.
//
// The identity is the principal's username when the request is
// authenticated, otherwise (authentication off, a public path) the
// source address: the peer's IP address (an IPv6 address by its /64, which
// one host commonly holds whole), never a forwarded-for header, which the
// client writes. Behind a proxy every caller without a token shares the
// proxy's address. The installation's own processes on the service
// listener (registry-sync, reconcilers: authenticated by their
// certificates) are not counted against the request and watch limits.
//
// A request whose credentials are refused (401) never has an identity: it
// counts against its source address in buckets of its own (the same rate
// and burst), and an address whose bucket is empty is answered 429 before
// its credentials are looked at, so that a flood of wrong tokens reaches
// the token store and the JWT verifier no faster than the rate.

// Defaults of Limits (DefaultConfig).
const (
	// DefaultRateLimit is the requests per second each identity may make.
	DefaultRateLimit = 200
	// DefaultRateBurst is the requests an identity may make at once above
	// its rate.
	DefaultRateBurst = 400
	// DefaultMaxWatches is the event streams each identity may hold open.
	DefaultMaxWatches = 100
	// DefaultMaxBodyReadsPerSource is the request bodies read at once from
	// one source address.
	DefaultMaxBodyReadsPerSource = 8
)

// codeRateLimited answers a caller over one of its limits (429).
const codeRateLimited = client.CodeRateLimited

// Retry-After of the refusals whose wait no bucket computes.
const (
	// watchRetryAfterSeconds: a watch slot frees when one of the
	// identity's streams ends.
	watchRetryAfterSeconds = 5
	// bodyRetryAfterSeconds: a body-read slot frees when one of the
	// source's bodies has arrived.
	bodyRetryAfterSeconds = 1
)

// Bounds of the rate buckets' memory.
const (
	// rateIdle is how long a bucket must go unused, and be full, before it
	// is dropped (a full bucket is what a new one would be: dropping it
	// changes nothing); also how often idle buckets are swept.
	rateIdle = time.Minute
	// maxRateKeys bounds the buckets kept: past it, idle full ones are
	// swept at once (at most once a second) and, if none is, an arbitrary
	// one is dropped (its identity starts again with a full bucket).
	maxRateKeys = 65536
)

// Limits bound what one caller may take of the gateway (handler_limits.go).
// DefaultConfig sets each to its default; zero turns that limit off;
// negative values are refused (Config.Validate).
type Limits struct {
	// RateLimit is the requests per second each identity may make, a token
	// bucket refilled at this rate (default DefaultRateLimit; 0: no rate
	// limit). The probes, /metrics and the OpenAPI document are not
	// counted.
	RateLimit float64
	// RateBurst is the bucket's size: the requests an identity may make at
	// once (default DefaultRateBurst). It must be at least 1 with a
	// RateLimit.
	RateBurst int
	// MaxWatches is the event streams (GET .../events) each identity may
	// hold open at once (default DefaultMaxWatches; 0: no limit).
	MaxWatches int
	// MaxBodyReadsPerSource is the request bodies read at once from one
	// source address: the next one is answered 429 at once rather than
	// wait for one of the MaxConcurrentBodyReads slots, so that clients
	// sending bodies slowly from one address leave the others' slots free
	// (default DefaultMaxBodyReadsPerSource; 0: no limit).
	MaxBodyReadsPerSource int
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{RateLimit: DefaultRateLimit, RateBurst: DefaultRateBurst,
		MaxWatches: DefaultMaxWatches, MaxBodyReadsPerSource: DefaultMaxBodyReadsPerSource}
}

// Validate refuses negative limits, and a rate without a burst.
func (l Limits) Validate() error {
	switch {
	case l.RateLimit < 0 || math.IsNaN(l.RateLimit) || math.IsInf(l.RateLimit, 0):
		return fmt.Errorf("rate limit %v: want requests per second, 0 for none (--rate-limit)", l.RateLimit)
	case l.RateBurst < 0:
		return fmt.Errorf("rate burst %d: want 0 or more (--rate-burst)", l.RateBurst)
	case l.RateLimit > 0 && l.RateBurst == 0:
		return fmt.Errorf("rate burst 0 with a rate limit of %v a second would refuse every request: want 1 or more (--rate-burst)", l.RateLimit)
	case l.MaxWatches < 0:
		return fmt.Errorf("max watches per identity %d: want 0 (no limit) or more (--max-watches-per-identity)", l.MaxWatches)
	case l.MaxBodyReadsPerSource < 0:
		return fmt.Errorf("max body reads per source %d: want 0 (no limit) or more (--max-body-reads-per-source)", l.MaxBodyReadsPerSource)
	}
	return nil
}

// limiter holds the state of the limits; a nil part is a limit that is
// off.
type limiter struct {
	rate *rateBuckets
	// refusedBuckets count refused credentials per source address.
	refusedBuckets *rateBuckets
	watches        *counter
	bodies         *counter
	// counts are the requests each limit refused (limits_metrics.go).
	counts limitCounts
}

// newLimiter builds the state of l, its metrics on reg (nil: none).
// Limits that do not validate are off (ServeListeners refuses them).
func newLimiter(l Limits, reg prometheus.Registerer) *limiter {
	lim := &limiter{}
	lim.registerMetrics(reg)
	if l.Validate() != nil {
		return lim
	}
	if l.RateLimit > 0 {
		lim.rate = newRateBuckets(rate.Limit(l.RateLimit), l.RateBurst)
		lim.refusedBuckets = newRateBuckets(rate.Limit(l.RateLimit), l.RateBurst)
	}
	if l.MaxWatches > 0 {
		lim.watches = newCounter(l.MaxWatches)
	}
	if l.MaxBodyReadsPerSource > 0 {
		lim.bodies = newCounter(l.MaxBodyReadsPerSource)
	}
	return lim
}

// limitRequests applies the rate limit and the watch limit to the
// request's identity (limitKey). It runs after authenticate, which names
// the identity.
func (s *Service) limitRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		key, ok := limitKey(c)
		if !ok {
			return next(c)
		}
		if s.limits.rate != nil {
			if wait := s.limits.rate.take(key, time.Now()); wait > 0 {
				s.limits.refused(limitRate)
				secs := retryAfterSeconds(wait)
				return tooManyRequests(c, secs, fmt.Sprintf(
					"too many requests from this caller: at most %g a second (bursts of %d); retry after %d s",
					s.cfg.RateLimit, s.cfg.RateBurst, secs))
			}
		}
		if s.limits.watches != nil && c.Request().Method == http.MethodGet && isEventStream(c.Path()) {
			if !s.limits.watches.acquire(key) {
				s.limits.refused(limitWatches)
				return tooManyRequests(c, watchRetryAfterSeconds, fmt.Sprintf(
					"this caller holds %d event streams open, its limit: close one, or retry after %d s", s.cfg.MaxWatches, watchRetryAfterSeconds))
			}
			defer s.limits.watches.release(key)
		}
		return next(c)
	}
}

// limitRefused counts the requests whose credentials authenticate refuses
// (401) against their source address, and answers 429 without looking at
// the credentials of an address that has run out of refusals. It runs
// just before authenticate.
func (s *Service) limitRefused(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if s.limits.refusedBuckets == nil || s.cfg.Auth.Open() {
			return next(c)
		}
		key, ok := limitKey(c)
		if !ok {
			return next(c)
		}
		if wait := s.limits.refusedBuckets.wait(key, time.Now()); wait > 0 {
			s.limits.refused(limitRefusedCredentials)
			secs := retryAfterSeconds(wait)
			return tooManyRequests(c, secs, fmt.Sprintf(
				"too many requests with refused credentials from this address: at most %g a second (bursts of %d); retry after %d s",
				s.cfg.RateLimit, s.cfg.RateBurst, secs))
		}
		err := next(c)
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusUnauthorized {
			s.limits.refusedBuckets.take(key, time.Now())
		}
		return err
	}
}

// limitKey is the identity whose limits a request counts against:
// "user:<username>" when authenticated, "source:<address>" otherwise
// (sourceKey). Requests that are not limited report false: the probes,
// /metrics, the OpenAPI document, and the installation's own processes
// on the service listener.
func limitKey(c *echo.Context) (string, bool) {
	switch c.Path() {
	case "/health", health.ReadyPath, health.LivePath, health.MetricsPath, "/api/v1/openapi.json":
		return "", false
	}
	req := c.Request()
	if _, ok := authz.Caller(req.Context()); ok {
		return "", false
	}
	if p := authn.FromContext(req.Context()); p != nil && p.Method != authn.MethodNone && p.Username != "" {
		return "user:" + p.Username, true
	}
	return "source:" + sourceKey(req.RemoteAddr), true
}

// sourceKey is the source address of a request's peer (RemoteAddr): its
// IP address, an IPv6 one reduced to its /64.
func sourceKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String()
	}
	return addr.String()
}

// tooManyRequests is the 429 of a caller over a limit, with Retry-After
// secs. A request whose body is left unread closes its connection after
// the answer: net/http would otherwise wait for the rest of the body
// before answering, as long as its sender takes.
func tooManyRequests(c *echo.Context, secs int, detail string) error {
	h := c.Response().Header()
	h.Set("Retry-After", strconv.Itoa(secs))
	if hasBody(c.Request()) {
		h.Set("Connection", "close")
	}
	return &httpError{status: http.StatusTooManyRequests, code: codeRateLimited, detail: detail}
}

// retryAfterSeconds is wait in whole seconds, rounded up, at least 1.
func retryAfterSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

// rateBuckets is a token bucket per identity, bounded in number: buckets
// unused for rateIdle and full again are dropped, and at most maxRateKeys
// are kept.
type rateBuckets struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rateBucket
	// swept is when idle buckets were last swept; forced is when a sweep
	// was last forced by the bound.
	swept, forced time.Time
}

type rateBucket struct {
	lim  *rate.Limiter
	used time.Time
}

func newRateBuckets(limit rate.Limit, burst int) *rateBuckets {
	return &rateBuckets{limit: limit, burst: burst, buckets: map[string]*rateBucket{}}
}

// take counts one request of key at now and returns zero, or refuses it
// (counting nothing) and returns how long until it would be allowed.
func (b *rateBuckets) take(key string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.swept) >= rateIdle {
		b.sweep(now)
	}
	bk := b.buckets[key]
	if bk == nil {
		if len(b.buckets) >= maxRateKeys {
			b.makeRoom(now)
		}
		bk = &rateBucket{lim: rate.NewLimiter(b.limit, b.burst)}
		b.buckets[key] = bk
	}
	bk.used = now
	r := bk.lim.ReserveN(now, 1)
	if !r.OK() {
		return rateIdle
	}
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return wait
	}
	return 0
}

// wait is how long until key's bucket holds a token again, without
// counting a request (zero: it holds one).
func (b *rateBuckets) wait(key string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	bk := b.buckets[key]
	if bk == nil {
		return 0
	}
	tokens := bk.lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(b.limit) * float64(time.Second))
}

// sweep drops the buckets unused for rateIdle that are full again.
func (b *rateBuckets) sweep(now time.Time) {
	b.swept = now
	for k, bk := range b.buckets {
		if now.Sub(bk.used) >= rateIdle && bk.lim.TokensAt(now) >= float64(b.burst) {
			delete(b.buckets, k)
		}
	}
}

// makeRoom frees a place for a new bucket when maxRateKeys are kept: a
// sweep (at most once a second), else an arbitrary bucket is dropped.
func (b *rateBuckets) makeRoom(now time.Time) {
	if now.Sub(b.forced) >= time.Second {
		b.forced = now
		b.sweep(now)
	}
	for k := range b.buckets {
		if len(b.buckets) < maxRateKeys {
			return
		}
		delete(b.buckets, k)
	}
}

// len is the number of buckets kept.
func (b *rateBuckets) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buckets)
}

// counter bounds how many of something each key holds at once; keys
// holding none take no memory.
type counter struct {
	max int

	mu   sync.Mutex
	held map[string]int
}

func newCounter(max int) *counter {
	return &counter{max: max, held: map[string]int{}}
}

// acquire takes one for key, or reports false when key holds max.
func (c *counter) acquire(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[key] >= c.max {
		return false
	}
	c.held[key]++
	return true
}

// release gives back one that key acquired.
func (c *counter) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[key] <= 1 {
		delete(c.held, key)
		return
	}
	c.held[key]--
}

// bodySourceError refuses a body read beyond MaxBodyReadsPerSource: 429
// (bodyReadError), with Retry-After and the connection closed
// (boundBody).
type bodySourceError struct{ max int }

func (e *bodySourceError) Error() string {
	return fmt.Sprintf("%d request bodies are being read from this address, its limit: retry after %d s", e.max, bodyRetryAfterSeconds)
}
