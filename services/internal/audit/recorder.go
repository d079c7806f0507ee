package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/api/subjects"
)

// Defaults of Config.
const (
	// DefaultQueueSize is how many records wait for Run at most.
	DefaultQueueSize = 8192
	// DefaultDrainTimeout bounds the drain once Run's context ended.
	DefaultDrainTimeout = 5 * time.Second
	// maxBatch is how many records Run writes and publishes at once.
	maxBatch = 256
	// publishTimeout bounds waiting for the stream's acknowledgements of
	// one batch.
	publishTimeout = 5 * time.Second
	// ensureRetry is how often a stream that could not be created is
	// tried again.
	ensureRetry = 5 * time.Second
	// warnEvery bounds how often dropped records are warned of.
	warnEvery = time.Second
	// maxRecordBytes bounds a record in the stream.
	maxRecordBytes = 64 << 10
)

// Config configures a Recorder.
type Config struct {
	// Log receives each record as one JSON line (nil: none).
	Log io.Writer
	// JetStream publishes each record on the audit stream, which Run
	// creates or updates (nil: no stream).
	JetStream jetstream.JetStream
	// Stream sets the audit stream's limits.
	Stream StreamConfig
	// QueueSize bounds the records waiting to be written (default
	// DefaultQueueSize).
	QueueSize int
	// DrainTimeout bounds writing what is queued once Run's context ended
	// (default DefaultDrainTimeout).
	DrainTimeout time.Duration
	// Metrics registers the recorder's counters (nil: none).
	Metrics prometheus.Registerer
}

// StreamConfig are the audit stream's limits.
type StreamConfig struct {
	// MaxAge drops records older than this (default subjects.AuditMaxAge).
	MaxAge time.Duration
	// MaxBytes drops the oldest records beyond this size (0: no limit).
	MaxBytes int64
	// Replicas is the stream's replication factor (default 1).
	Replicas int
}

// Recorder writes records to the audit log and the audit stream without
// blocking their callers (package doc). A nil *Recorder records nothing.
type Recorder struct {
	cfg   Config
	log   *slog.Logger
	queue chan Record
	// stopped is set once Run returned: later records are dropped.
	stopped atomic.Bool
	// dropped counts records dropped; warned how many were warned of.
	dropped, warned atomic.Uint64
	metrics         *recorderMetrics
}

type recorderMetrics struct {
	records, dropped, failures *prometheus.CounterVec
}

// New returns a recorder for cfg, or nil when cfg has neither a log nor a
// stream. A nil log discards the recorder's own messages.
func New(cfg Config, log *slog.Logger) *Recorder {
	if cfg.Log == nil && cfg.JetStream == nil {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	r := &Recorder{cfg: cfg, log: log, queue: make(chan Record, cfg.QueueSize)}
	if cfg.Metrics != nil {
		r.metrics = &recorderMetrics{
			records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "no8s_audit_records_total",
				Help: "Audit records queued, by outcome."}, []string{"outcome"}),
			dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "no8s_audit_records_dropped_total",
				Help: "Audit records dropped: the queue was full, or the recorder had stopped."}, nil),
			failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "no8s_audit_write_failures_total",
				Help: "Audit records that a sink failed to take, by sink (log, stream)."}, []string{"sink"}),
		}
		for _, c := range []prometheus.Collector{r.metrics.records, r.metrics.dropped, r.metrics.failures} {
			if err := cfg.Metrics.Register(c); err != nil {
				log.Warn("audit metrics not registered", "error", err)
			}
		}
	}
	return r
}

// Record queues rec for the audit log and stream and returns at once: a
// full queue, or a recorder that has stopped, drops it (counted and
// warned of). Log and Time are set here.
func (r *Recorder) Record(_ context.Context, rec Record) {
	if r == nil {
		return
	}
	rec.Log = LogTag
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	if r.metrics != nil {
		r.metrics.records.WithLabelValues(string(rec.Outcome)).Inc()
	}
	if !r.stopped.Load() {
		select {
		case r.queue <- rec:
			return
		default:
		}
	}
	r.dropped.Add(1)
	if r.metrics != nil {
		r.metrics.dropped.WithLabelValues().Inc()
	}
}

// Dropped is how many records were dropped so far.
func (r *Recorder) Dropped() uint64 {
	if r == nil {
		return 0
	}
	return r.dropped.Load()
}

// Run writes and publishes the queued records until ctx ends, then drains
// the queue within Config.DrainTimeout and returns nil. With a stream it
// first creates or updates it (EnsureStream), and tries again every few
// seconds while that fails.
func (r *Recorder) Run(ctx context.Context) error {
	if r == nil {
		return nil
	}
	w := &writer{r: r}
	// A batch taken from the queue is written in full, even when ctx ends
	// meanwhile: each step is bounded by its own timeout instead.
	wctx := context.WithoutCancel(ctx)
	tick := time.NewTicker(warnEvery)
	defer tick.Stop()
	batch := make([]Record, 0, maxBatch)
	for {
		select {
		case rec := <-r.queue:
			batch = r.fill(append(batch[:0], rec))
			w.write(wctx, batch)
		case <-tick.C:
			r.warnDropped()
			w.warnFailed()
		case <-ctx.Done():
			r.stopped.Store(true)
			dctx, cancel := context.WithTimeout(wctx, r.cfg.DrainTimeout)
			defer cancel()
			for {
				batch = r.fill(batch[:0])
				if len(batch) == 0 || dctx.Err() != nil {
					break
				}
				w.write(dctx, batch)
			}
			r.dropped.Add(uint64(len(r.queue)))
			r.warnDropped()
			w.warnFailed()
			return nil
		}
	}
}

// fill adds what is queued to batch, up to maxBatch records.
func (r *Recorder) fill(batch []Record) []Record {
	for len(batch) < maxBatch {
		select {
		case rec := <-r.queue:
			batch = append(batch, rec)
		default:
			return batch
		}
	}
	return batch
}

// warnDropped logs the records dropped since the last warning.
func (r *Recorder) warnDropped() {
	total := r.dropped.Load()
	if prev := r.warned.Swap(total); total > prev {
		r.log.Warn("audit records dropped: the audit queue was full or the recorder had stopped",
			"dropped", total-prev, "dropped_total", total, "queue_size", r.cfg.QueueSize)
	}
}

// writer is Run's state: whether the stream exists, and the failures not
// yet warned of.
type writer struct {
	r          *Recorder
	ensured    bool
	lastEnsure time.Time
	failures   map[string]int
	lastErr    map[string]error
	lastWarn   time.Time
}

// write writes batch to the log and publishes it on the stream.
func (w *writer) write(ctx context.Context, batch []Record) {
	lines := make([][]byte, 0, len(batch))
	for _, rec := range batch {
		b, err := json.Marshal(rec)
		if err != nil {
			w.failed("log", 1, fmt.Errorf("encode audit record: %w", err))
			continue
		}
		lines = append(lines, b)
	}
	if w.r.cfg.Log != nil {
		w.writeLog(lines)
	}
	if w.r.cfg.JetStream != nil {
		w.publish(ctx, batch, lines)
	}
}

func (w *writer) writeLog(lines [][]byte) {
	var (
		n    int
		werr error
	)
	for _, b := range lines {
		// One write per line: lines of several writers to one file or
		// pipe (stderr) stay whole.
		if _, err := w.r.cfg.Log.Write(append(b, '\n')); err != nil {
			n, werr = n+1, err
		}
	}
	if n > 0 {
		w.failed("log", n, fmt.Errorf("write audit log: %w", werr))
	}
}

// publish publishes lines (of batch) on the stream and waits for the
// acknowledgements.
func (w *writer) publish(ctx context.Context, batch []Record, lines [][]byte) {
	js := w.r.cfg.JetStream
	if !w.ensured {
		if time.Since(w.lastEnsure) < ensureRetry && !w.lastEnsure.IsZero() {
			w.failed("stream", len(lines), errors.New("the audit stream is not there yet"))
			return
		}
		w.lastEnsure = time.Now()
		ectx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := EnsureStream(ectx, js, w.r.cfg.Stream)
		cancel()
		if err != nil {
			w.failed("stream", len(lines), err)
			return
		}
		w.ensured = true
	}
	futures := make([]jetstream.PubAckFuture, 0, len(lines))
	var (
		n    int
		perr error
	)
	for i, b := range lines {
		f, err := js.PublishAsync(subjects.Audit(string(batch[i].Outcome)), b)
		if err != nil {
			n, perr = n+1, err
			continue
		}
		futures = append(futures, f)
	}
	timeout := time.NewTimer(publishTimeout)
	defer timeout.Stop()
wait:
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
				w.ensured = false // the stream is gone: create it again
			}
			n, perr = n+1, err
		case <-timeout.C:
			n, perr = n+len(futures)-i, errors.New("no acknowledgement in time")
			break wait
		case <-ctx.Done():
			n, perr = n+len(futures)-i, ctx.Err()
			break wait
		}
	}
	if n > 0 {
		w.failed("stream", n, fmt.Errorf("publish audit records: %w", perr))
	}
}

// failed counts n records a sink did not take; warnFailed logs them.
func (w *writer) failed(sink string, n int, err error) {
	if w.r.metrics != nil {
		w.r.metrics.failures.WithLabelValues(sink).Add(float64(n))
	}
	if w.failures == nil {
		w.failures = map[string]int{}
		w.lastErr = map[string]error{}
	}
	w.failures[sink] += n
	w.lastErr[sink] = err
	if time.Since(w.lastWarn) >= warnEvery {
		w.warnFailed()
	}
}

// warnFailed logs the records each sink did not take since the last
// warning, with the last error: at most one warning per sink a second,
// however many batches fail.
func (w *writer) warnFailed() {
	for sink, n := range w.failures {
		if n > 0 {
			w.r.log.Warn("audit records not written", "sink", sink, "records", n, "error", w.lastErr[sink])
			w.failures[sink] = 0
		}
	}
	w.lastWarn = time.Now()
}

// EnsureStream creates or updates the audit stream (subjects.AuditStream
// on subjects.AuditAll) with cfg's limits: file storage, old records
// discarded first.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = subjects.AuditMaxAge
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	maxBytes := cfg.MaxBytes
	if maxBytes <= 0 {
		maxBytes = -1
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        subjects.AuditStream,
		Description: "no8s audit records: one per write and per denied request through the API gateways",
		Subjects:    []string{subjects.AuditAll},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.MaxAge,
		MaxBytes:    maxBytes,
		MaxMsgSize:  maxRecordBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("ensure stream %s: %w", subjects.AuditStream, err)
	}
	return nil
}
