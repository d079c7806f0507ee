// Package outbox publishes the store's outbox to JetStream.
//
// Every write transaction takes a transaction id and then its revisions from
// revision_seq, and records its events in the outbox table. Transactions
// commit in any order, so "everything after the last revision published" is
// not safe to read (HARD-PARTS 1). The relay instead reads the sequence's last
// value V, then takes a transaction id X: every transaction that took a
// revision <= V took its id before, so below X. Once the oldest running
// transaction is past X, all of them have committed or rolled back, so the
// outbox rows up to V are final. The relay publishes them in revision order, each with its
// revision as Nats-Msg-Id and the stream's expected last sequence (a chain
// that keeps the stream in strict revision order even across failures and
// competing relays), then moves its cursor in relay_state, fenced by the
// leader epoch it was granted.
//
// One relay runs at a time: the leader holds the backend's relay lock (on
// PostgreSQL an advisory lock on a dedicated connection) and bumps the epoch
// when it takes over. The relay reads the database only through
// storage.EventLog, so every backend shares it; the PostgreSQL mechanics
// described above live in services/store/pgoutbox.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/failpoint"
	"github.com/no8s/no8s/services/store/storage"
)

// Config tunes the relay.
type Config struct {
	// BatchSize is the most events published before the cursor moves.
	BatchSize int
	// PollInterval is the fallback wake-up when no commit hint arrives.
	PollInterval time.Duration
	// Retention is how long published outbox rows are kept for republishing.
	Retention time.Duration
	// PruneInterval is how often published rows past retention are deleted.
	PruneInterval time.Duration
	// LeaderRetry is how often a standby tries to become the leader.
	LeaderRetry time.Duration
	// RoundGap is the longest pause after a round that published, so that
	// a busy store's commits are published in batches rather than one
	// round each (Pause).
	RoundGap time.Duration
	// BusyRound is the number of events in a round that earns the whole
	// RoundGap; a round of fewer is followed by its share (Pause). 0 or 1:
	// every round that published is followed by the whole gap.
	BusyRound int
	// GapCheckAfter is how long after passing revisions it did not find
	// the relay reads them again, to report a row committed there (gaps.go).
	GapCheckAfter time.Duration
	// DegradedHold is how long the relay reports itself degraded after it
	// last found something it did not publish in the stream (Degraded): the
	// report clears at the first clean publish after it.
	DegradedHold time.Duration
	// Tracer, when set, records a span for each publish of a row that
	// carries a trace context (storage.OutboxRow.TraceContext): a child
	// of the change's commit, whatever relay commits and publishes, and
	// the parent that the event's consumers continue. Nil records none
	// (the row's context still reaches the message's headers).
	Tracer trace.Tracer
	// Failpoints are the failpoints enabled (failpoint.RelayBeforePublish
	// stops the relay between reading rows and publishing them); none in a
	// build without the failpoint tag.
	Failpoints failpoint.Set
}

// TracerName is the instrumentation scope of the relay's publish spans
// (Config.Tracer).
const TracerName = "github.com/no8s/no8s/services/store/outbox"

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{BatchSize: 512, PollInterval: 500 * time.Millisecond, Retention: time.Hour, PruneInterval: time.Minute, LeaderRetry: time.Second, RoundGap: 5 * time.Millisecond, BusyRound: 8,
		GapCheckAfter: 2 * time.Second, DegradedHold: 30 * time.Second}
}

// Pause is how long the relay waits after a round that published n events
// before it looks for more: RoundGap × n / BusyRound, at most RoundGap. A
// quiet store's event is published as soon as it commits (a round of one
// event is followed by an eighth of the gap, by default); under load the
// rounds grow, and with them the pause, until each is followed by the whole
// gap and the events of many commits share a round.
func (c Config) Pause(n int64) time.Duration {
	if n <= 0 || c.RoundGap <= 0 {
		return 0
	}
	if c.BusyRound <= 1 || n >= int64(c.BusyRound) {
		return c.RoundGap
	}
	return c.RoundGap * time.Duration(n) / time.Duration(c.BusyRound)
}

// Relay publishes outbox rows to JetStream.
type Relay struct {
	events    storage.EventLog
	js        jetstream.JetStream
	streamCfg eventstream.StreamConfig
	nc        *nats.Conn
	cfg       Config
	log       *slog.Logger
	wake      chan struct{}

	// Owned by the leading goroutine: set by align at each leadership.
	stream  jetstream.Stream
	storeID string
	base    string // the stream's base revision, for eventstream.BaseHeader
	// lastSeq is the stream's last sequence after the previous batch (or as
	// align left it), when lastSeqKnown: every publish expects it, so a
	// message anyone else publishes fails the relay's next publish, and the
	// relay realigns (and reports the stranger) rather than chain after it.
	lastSeq      uint64
	lastSeqKnown bool
	// gaps are the revisions passed as absent, to be read again.
	gaps gapWatch

	// reportedSeq is the newest foreign message reported (reportForeign).
	reportedSeq uint64

	published atomic.Int64
	// identityOK and identityMismatch count the checks that the stream
	// belongs to the database (align, at every leadership).
	identityOK, identityMismatch atomic.Int64
	late                         atomic.Int64
	foreign                      atomic.Int64
	degraded                     degradation
	cursor                       atomic.Int64
	leader                       atomic.Bool
}

// New returns a relay that publishes the outbox of el to the stream
// configured by sc (it creates the stream when missing). nc carries commit
// hints (eventstream.WakeSubject).
func New(el storage.EventLog, nc *nats.Conn, js jetstream.JetStream, sc eventstream.StreamConfig, cfg Config, log *slog.Logger) *Relay {
	d := DefaultConfig()
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = d.BatchSize
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = d.PollInterval
	}
	if cfg.Retention <= 0 {
		cfg.Retention = d.Retention
	}
	if cfg.PruneInterval <= 0 {
		cfg.PruneInterval = d.PruneInterval
	}
	if cfg.LeaderRetry <= 0 {
		cfg.LeaderRetry = d.LeaderRetry
	}
	if cfg.GapCheckAfter <= 0 {
		cfg.GapCheckAfter = d.GapCheckAfter
	}
	if cfg.DegradedHold <= 0 {
		cfg.DegradedHold = d.DegradedHold
	}
	return &Relay{events: el, nc: nc, js: js, streamCfg: sc, cfg: cfg, log: log, wake: make(chan struct{}, 1)}
}

// Wake tells the relay that a change was committed. It never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Hint wakes this relay, or the leader in another store replica when this
// one is a standby.
func (r *Relay) Hint() {
	r.Wake()
	if r.nc != nil && !r.leader.Load() {
		_ = r.nc.Publish(eventstream.WakeSubject, nil)
	}
}

// Published is the number of events this relay has published.
func (r *Relay) Published() int64 { return r.published.Load() }

// Cursor is the highest revision known to be published.
func (r *Relay) Cursor() int64 { return r.cursor.Load() }

// Foreign is the number of messages the relay found in the stream that it
// did not publish (docs/design/outbox.md, "Foreign messages").
func (r *Relay) Foreign() int64 { return r.foreign.Load() }

// Degraded says why the relay is degraded, "" when it is not: foreign
// messages found in the stream (for DegradedHold after the last one, until
// the next clean publish), or a stream that does not belong to the
// database (until the stream is rebuilt).
func (r *Relay) Degraded() string { return r.degraded.reason() }

// Leader reports whether this relay currently holds leadership.
func (r *Relay) Leader() bool { return r.leader.Load() }

// Run competes for leadership and publishes while leader, until ctx ends.
// Nothing found in the stream stops it: a stream that turns out not to
// belong to the database (a *MismatchError) is reported (Degraded) and
// checked again every MismatchRetry, while writes go on into the outbox.
func (r *Relay) Run(ctx context.Context) error {
	if r.nc != nil {
		sub, err := r.nc.Subscribe(eventstream.WakeSubject, func(*nats.Msg) { r.Wake() })
		if err != nil {
			return fmt.Errorf("subscribe to outbox hints: %w", err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	for {
		err := r.lead(ctx)
		r.leader.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		retry := r.cfg.LeaderRetry
		var mis *MismatchError
		switch {
		case errors.As(err, &mis):
			r.degraded.set(mis.Error(), time.Time{})
			retry = max(retry, MismatchRetry)
		case err != nil:
			r.log.Warn("outbox relay stopped; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

// lead takes the relay lock and publishes until the lock is lost or ctx
// ends. It returns nil when another relay is leader.
func (r *Relay) lead(ctx context.Context) error {
	lock, err := r.events.LockRelay(ctx)
	if err != nil {
		return err
	}
	if lock == nil {
		return nil
	}
	defer lock.Release()
	epoch, cursor, err := lock.Lead(ctx)
	if err != nil {
		return err
	}
	r.leader.Store(true)
	r.log.Info("outbox relay is leader", "epoch", epoch, "cursor", cursor)

	lctx, cancel := context.WithCancelCause(ctx)
	watchDone := make(chan struct{})
	// Runs before the deferred Release: the watcher must be done first.
	defer func() {
		cancel(nil)
		<-watchDone
	}()
	go func() {
		defer close(watchDone)
		select {
		case <-lctx.Done():
		case <-lock.Lost():
			cancel(lock.Err())
		}
	}()
	err = r.publishLoop(lctx, epoch, cursor)
	if cause := context.Cause(lctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

func (r *Relay) publishLoop(ctx context.Context, epoch, cursor int64) error {
	cursor, err := r.align(ctx, epoch, cursor)
	if err != nil {
		return err
	}
	r.gaps = gapWatch{}
	r.cursor.Store(cursor)
	prune := time.NewTicker(r.cfg.PruneInterval)
	defer prune.Stop()
	poll := time.NewTicker(r.cfg.PollInterval)
	defer poll.Stop()
	for {
		next, err := r.events.SettledRevision(ctx, cursor)
		if err != nil {
			return err
		}
		before := r.published.Load()
		for next > cursor {
			moved, err := r.publishUpTo(ctx, epoch, cursor, next)
			if wrongLastSequence(err) {
				// Something else published to the stream since the relay's
				// last message: find the relay's newest event again (part of
				// the batch may have landed) and go on after it.
				r.log.Info("the event stream moved under the relay; realigning", "err", err, "cursor", cursor)
				r.lastSeqKnown = false
				if cursor, err = r.align(ctx, epoch, cursor); err != nil {
					return err
				}
				r.cursor.Store(cursor)
				continue
			}
			if err != nil {
				return err
			}
			cursor = moved
			r.cursor.Store(cursor)
		}
		if err := r.checkGaps(ctx); err != nil {
			return err
		}
		if next > 0 {
			// More may have committed meanwhile: pause as long as the round
			// was busy, then look again if a commit's hint came since the
			// round began (the wait below takes it at once); none came, the
			// relay waits for one without a look that would find nothing.
			if pause := r.cfg.Pause(r.published.Load() - before); pause > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(pause):
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.wake:
		case <-poll.C:
		case <-prune.C:
			if err := r.prune(ctx, epoch, cursor); err != nil {
				r.log.Warn("prune outbox", "err", err)
			}
		}
	}
}

// publishUpTo publishes one batch of rows in (cursor, upTo] and returns the
// new cursor.
func (r *Relay) publishUpTo(ctx context.Context, epoch, cursor, upTo int64) (int64, error) {
	batch, err := r.events.ReadOutbox(ctx, cursor, upTo, r.cfg.BatchSize)
	if err != nil {
		return cursor, err
	}
	if len(batch) > 0 && r.cfg.Failpoints.Enabled(failpoint.RelayBeforePublish) {
		return cursor, r.stopBeforePublish(ctx, batch)
	}
	newCursor := upTo
	if len(batch) == r.cfg.BatchSize {
		newCursor = batch[len(batch)-1].Revision
	}
	if len(batch) > 0 {
		// The stream's last sequence: known from the previous batch's acks,
		// else asked. Every publish expects it, so a stream that changed
		// under the relay fails the publish (and the next round asks again).
		seq, known := r.lastSeq, r.lastSeqKnown
		r.lastSeqKnown = false
		if !known {
			info, err := r.stream.Info(ctx)
			if err != nil {
				return cursor, fmt.Errorf("stream info: %w", err)
			}
			seq = info.State.LastSeq
		}
		futures := make([]jetstream.PubAckFuture, 0, len(batch))
		spans := r.publishSpans(ctx, batch)
		defer endSpans(spans)
		for i, x := range batch {
			// Each message expects the stream's last sequence and, after
			// the first, the previous message's id: a sequence alone lets a
			// foreign message that lands inside a pipelined batch shift the
			// rest by one, so that every later message matches again and
			// the stream holds the batch without the message it displaced.
			opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequence(seq + uint64(i))}
			if i > 0 {
				opts = append(opts, jetstream.WithExpectLastMsgID(eventstream.MsgID(batch[i-1].Revision)))
			}
			msg := Message(x, r.storeID, r.base)
			if spans != nil && spans[i] != nil {
				tracing.InjectHeaders(trace.ContextWithSpan(ctx, spans[i]), msg.Header)
			}
			f, err := r.js.PublishMsgAsync(msg, opts...)
			if err != nil {
				failSpans(spans, i, err)
				return cursor, fmt.Errorf("publish revision %d: %w", x.Revision, err)
			}
			futures = append(futures, f)
		}
		var ack *jetstream.PubAck
		for i, f := range futures {
			select {
			case ack = <-f.Ok():
				if spans != nil && spans[i] != nil {
					spans[i].SetAttributes(attribute.Int64("messaging.nats.stream.sequence", int64(ack.Sequence)))
					spans[i].End()
					spans[i] = nil
				}
			case err := <-f.Err():
				failSpans(spans, i, err)
				return cursor, fmt.Errorf("publish revision %d: %w", batch[i].Revision, err)
			case <-ctx.Done():
				return cursor, ctx.Err()
			}
		}
		if ack != nil && ack.Sequence == seq+uint64(len(batch)) {
			r.lastSeq, r.lastSeqKnown = ack.Sequence, true
		}
		r.published.Add(int64(len(batch)))
		r.degraded.clean(time.Now(), r.cfg.DegradedHold)
		r.log.Debug("published", "first", batch[0].Revision, "last", batch[len(batch)-1].Revision, "count", len(batch), "cursor", newCursor)
	}
	lastEvent := int64(0)
	if len(batch) > 0 {
		lastEvent = batch[len(batch)-1].Revision
	}
	if err := r.events.AdvanceCursor(ctx, epoch, newCursor, lastEvent); err != nil {
		return cursor, err
	}
	r.gaps.note(cursor, newCursor, batch, time.Now())
	return newCursor, nil
}

// stopBeforePublish is the failpoint RelayBeforePublish: the relay has
// read batch and stops there, publishing nothing, until ctx ends (a test
// kills the process meanwhile). Only a build with the failpoint tag
// reaches it.
func (r *Relay) stopBeforePublish(ctx context.Context, batch []storage.OutboxRow) error {
	r.log.Warn("failpoint "+string(failpoint.RelayBeforePublish)+": the relay read committed rows and stops before publishing them",
		"first", batch[0].Revision, "last", batch[len(batch)-1].Revision, "count", len(batch))
	<-ctx.Done()
	return ctx.Err()
}

// publishSpans starts a span for each row of batch that carries a trace
// context, as a child of that context (nil for the others); nil without a
// tracer, so that a relay without tracing allocates nothing for them.
func (r *Relay) publishSpans(ctx context.Context, batch []storage.OutboxRow) []trace.Span {
	if r.cfg.Tracer == nil {
		return nil
	}
	spans := make([]trace.Span, len(batch))
	for i, x := range batch {
		if x.TraceContext == "" {
			continue
		}
		_, spans[i] = r.cfg.Tracer.Start(tracing.Decode(ctx, x.TraceContext), "outbox publish",
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", x.Subject),
				attribute.Int64("no8s.revision", x.Revision), attribute.Int64("no8s.resource_id", x.ResourceID), attribute.String("no8s.event_type", x.EventType)))
	}
	return spans
}

// failSpans records err on the spans from the from-th on that are still
// open, and ends them.
func failSpans(spans []trace.Span, from int, err error) {
	for i := from; i < len(spans); i++ {
		if s := spans[i]; s != nil {
			s.RecordError(err)
			s.SetStatus(codes.Error, err.Error())
			s.End()
			spans[i] = nil
		}
	}
}

// endSpans ends the spans still open (a publish abandoned with its
// context).
func endSpans(spans []trace.Span) {
	for _, s := range spans {
		if s != nil {
			s.End()
		}
	}
}

// Message is the message that publishes outbox row x of the store storeID
// into a stream whose base revision is base: the row's payload on its
// subject, the revision as Nats-Msg-Id (the dedup id), the stream identity
// headers (No8s-Store-Id, No8s-Stream-Base) and the CloudEvents attributes
// (eventstream.SetCloudEvent), all derived from the row and the relay's
// identity: the outbox stores nothing for them.
func Message(x storage.OutboxRow, storeID, base string) *nats.Msg {
	msg := &nats.Msg{Subject: x.Subject, Data: x.Payload, Header: make(nats.Header, 10)}
	msg.Header.Set(jetstream.MsgIDHeader, eventstream.MsgID(x.Revision))
	msg.Header.Set(eventstream.StoreIDHeader, storeID)
	msg.Header.Set(eventstream.BaseHeader, base)
	eventstream.SetCloudEvent(msg.Header, eventstream.CloudEventSource(storeID), x.Revision, x.EventType, x.CreatedAt, x.Payload)
	tracing.SetHeaders(msg.Header, x.TraceContext)
	return msg
}

// prune deletes published rows past retention; the backend records the
// newest one deleted: a stream rebuilt from the outbox starts after it.
func (r *Relay) prune(ctx context.Context, epoch, cursor int64) error {
	n, err := r.events.Prune(ctx, epoch, cursor, r.cfg.Retention)
	if err != nil {
		return err
	}
	if n > 0 {
		r.log.Info("pruned published outbox rows", "rows", n)
	}
	return nil
}
