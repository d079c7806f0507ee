package watch

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// errTooSlow means a write to the client blocked longer than StallTimeout.
var errTooSlow = errors.New("the client stopped reading")

// sseWriter writes SSE frames to a response. Every write is bounded by
// WriteTimeout; a write that took longer than StallTimeout marks the client
// as too slow, which the watcher turns into a final event.
type sseWriter struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	stall, limit time.Duration
	last         time.Time // the last flush
	start        time.Time // the start of the current batch
	armed        bool      // a batch is being written
	dirty        bool      // written since the last flush
	err          error     // the first write error; every later write fails
	slow         bool
}

func newSSEWriter(w http.ResponseWriter, cfg Config) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), stall: cfg.StallTimeout, limit: cfg.WriteTimeout, last: time.Now()}
}

// Header writes the response header and the reconnection delay.
func (o *sseWriter) header(retry time.Duration) error {
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
	if err := o.write([]byte("retry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\n\n")); err != nil {
		return err
	}
	return o.flush()
}

// arm starts a batch of writes: one deadline covers it, and its duration
// up to the flush decides whether the client is too slow.
func (o *sseWriter) arm() {
	if !o.armed {
		o.armed = true
		o.start = time.Now()
		_ = o.rc.SetWriteDeadline(o.start.Add(o.limit))
	}
}

func (o *sseWriter) write(b []byte) error {
	if o.err != nil {
		return o.err
	}
	o.arm()
	if _, err := o.w.Write(b); err != nil {
		o.err = err
	}
	o.dirty = true
	return o.err
}

func (o *sseWriter) flush() error {
	if o.err != nil {
		return o.err
	}
	if !o.dirty {
		return nil
	}
	o.arm()
	err := o.rc.Flush()
	now := time.Now()
	o.last, o.dirty, o.armed = now, false, false
	switch {
	case err != nil:
		o.err = err
	case now.Sub(o.start) > o.stall:
		o.slow = true
		o.err = errTooSlow
	}
	return o.err
}

// heartbeat writes a comment when the stream has been silent for d.
func (o *sseWriter) heartbeat(d time.Duration) error {
	if time.Since(o.last) < d {
		return nil
	}
	if err := o.write([]byte(": heartbeat\n\n")); err != nil {
		return err
	}
	return o.flush()
}

// final writes a last frame after the stream has ended for a reason: it
// works after a slow write (the connection is healthy), not after a failed
// one.
func (o *sseWriter) final(frame []byte) {
	if o.slow {
		// The client has been slow for StallTimeout already: it gets as
		// long again to take the reason.
		o.err, o.limit = nil, o.stall
	}
	if o.err != nil {
		return
	}
	_ = o.write(frame)
	_ = o.flush()
}
