package github

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// readTries is how often a read (GET) is sent when it gets a 5xx or a
// broken connection, within one attempt.
const readTries = 3

// retryReads retries reads that GitHub answered with a 5xx, or that broke
// off, a few times with a short backoff (a Retry-After of up to 5 s is
// honoured). Writes (the dispatch) are never sent twice here: whether a
// failed one took effect is found out by looking for its run.
type retryReads struct{ next http.RoundTripper }

func (t retryReads) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return next.RoundTrip(req)
	}
	delay := 200 * time.Millisecond
	for try := 1; ; try++ {
		resp, err := next.RoundTrip(req)
		retry := err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
		if err == nil && resp.StatusCode >= 500 {
			retry = true
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 && s <= 5 {
				delay = time.Duration(s) * time.Second
			}
		}
		if !retry || try == readTries || req.Context().Err() != nil {
			return resp, err
		}
		if resp != nil {
			_ = resp.Body.Close()
		}
		timer := time.NewTimer(delay)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, req.Context().Err()
		case <-timer.C:
		}
		delay *= 2
	}
}

// rateGauge records x-ratelimit-remaining of every answer that has it.
type rateGauge struct {
	next      http.RoundTripper
	remaining prometheus.Gauge
}

func (t rateGauge) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		if n, perr := strconv.Atoi(resp.Header.Get("X-Ratelimit-Remaining")); perr == nil {
			t.remaining.Set(float64(n))
		}
	}
	return resp, err
}
