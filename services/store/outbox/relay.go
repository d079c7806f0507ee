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
// One relay runs at a time: the leader holds a PostgreSQL advisory lock on a
// dedicated connection and bumps the epoch when it takes over.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/services/internal/eventstream"
)

// lockKey is the advisory lock key of the relay leader ("no8srely").
const lockKey int64 = 0x6e6f3873_72656c79

// ErrLostLeadership means another relay took over.
var ErrLostLeadership = errors.New("outbox relay: lost leadership")

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
	// RoundGap is the pause after a round that published, so that a busy
	// store's commits are published in batches rather than one round each.
	RoundGap time.Duration
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{BatchSize: 512, PollInterval: 500 * time.Millisecond, Retention: time.Hour, PruneInterval: time.Minute, LeaderRetry: time.Second, RoundGap: 5 * time.Millisecond}
}

// Relay publishes outbox rows to JetStream.
type Relay struct {
	pool      *pgxpool.Pool
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

	published atomic.Int64
	cursor    atomic.Int64
	leader    atomic.Bool
}

// New returns a relay that publishes to the stream configured by sc (it
// creates the stream when missing). nc carries commit hints
// (eventstream.WakeSubject).
func New(pool *pgxpool.Pool, nc *nats.Conn, js jetstream.JetStream, sc eventstream.StreamConfig, cfg Config, log *slog.Logger) *Relay {
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
	return &Relay{pool: pool, nc: nc, js: js, streamCfg: sc, cfg: cfg, log: log, wake: make(chan struct{}, 1)}
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

// Leader reports whether this relay currently holds leadership.
func (r *Relay) Leader() bool { return r.leader.Load() }

// Run competes for leadership and publishes while leader, until ctx ends.
// It returns a *MismatchError when the event stream turns out not to belong
// to the database: the store must not go on.
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
		var mis *MismatchError
		if errors.As(err, &mis) {
			return err
		}
		if err != nil {
			r.log.Warn("outbox relay stopped; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.cfg.LeaderRetry):
		}
	}
}

// lead takes the advisory lock on a dedicated connection and publishes until
// the connection or ctx ends. It returns nil when another relay is leader.
func (r *Relay) lead(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, r.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect for relay lock: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockKey).Scan(&got); err != nil {
		return fmt.Errorf("relay lock: %w", err)
	}
	if !got {
		return nil
	}
	var epoch, cursor int64
	if err := r.pool.QueryRow(ctx, `UPDATE relay_state SET epoch = epoch + 1, updated_at = now() WHERE id = 1 RETURNING epoch, published_revision`).Scan(&epoch, &cursor); err != nil {
		return fmt.Errorf("take relay epoch: %w", err)
	}
	r.leader.Store(true)
	r.log.Info("outbox relay is leader", "epoch", epoch, "cursor", cursor)

	// The lock lives as long as the connection: watch it.
	lctx, cancel := context.WithCancelCause(ctx)
	watchDone := make(chan struct{})
	// Runs before the deferred conn.Close: the watcher must be done with conn.
	defer func() {
		cancel(nil)
		<-watchDone
	}()
	go func() {
		defer close(watchDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
				if err := conn.Ping(lctx); err != nil {
					cancel(fmt.Errorf("relay lock connection lost: %w", err))
					return
				}
			}
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
	r.cursor.Store(cursor)
	prune := time.NewTicker(r.cfg.PruneInterval)
	defer prune.Stop()
	poll := time.NewTicker(r.cfg.PollInterval)
	defer poll.Stop()
	for {
		next, err := r.settledRevision(ctx, cursor)
		if err != nil {
			return err
		}
		for next > cursor {
			moved, err := r.publishUpTo(ctx, epoch, cursor, next)
			if err != nil {
				return err
			}
			cursor = moved
			r.cursor.Store(cursor)
		}
		if next > 0 {
			// More may have committed meanwhile: look again after a short gap.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.cfg.RoundGap):
			}
			continue
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

// settledRevision returns a revision V > cursor such that every transaction
// that could write an outbox row <= V has ended, or 0 when nothing new exists.
//
// It reads V from the sequence and only then takes a transaction id X of its
// own: ids are handed out in increasing order, and every writer takes its id
// before its revisions, so every transaction holding a revision <= V has an
// id below X. Once the oldest running transaction is past X, all of them have
// committed or rolled back. (A snapshot's xmax is not enough: it is one past
// the last *completed* id, and running transactions above it are not listed.)
func (r *Relay) settledRevision(ctx context.Context, cursor int64) (int64, error) {
	var last int64
	var called bool
	if err := r.pool.QueryRow(ctx, `SELECT last_value, is_called FROM revision_seq`).Scan(&last, &called); err != nil {
		return 0, fmt.Errorf("read revision sequence: %w", err)
	}
	if !called || last <= cursor {
		return 0, nil
	}
	var xid string
	if err := r.pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid); err != nil {
		return 0, fmt.Errorf("take transaction id: %w", err)
	}
	wait := 200 * time.Microsecond
	for {
		var settled bool
		if err := r.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::xid8`, xid).Scan(&settled); err != nil {
			return 0, fmt.Errorf("read snapshot: %w", err)
		}
		if settled {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 20*time.Millisecond)
	}
}

// publishUpTo publishes one batch of rows in (cursor, upTo] and returns the
// new cursor.
func (r *Relay) publishUpTo(ctx context.Context, epoch, cursor, upTo int64) (int64, error) {
	rows, err := r.pool.Query(ctx, `SELECT revision, subject, payload FROM outbox WHERE revision > $1 AND revision <= $2 ORDER BY revision LIMIT $3`,
		cursor, upTo, r.cfg.BatchSize)
	if err != nil {
		return cursor, fmt.Errorf("read outbox: %w", err)
	}
	type row struct {
		rev     int64
		subject string
		payload []byte
	}
	var batch []row
	for rows.Next() {
		var x row
		if err := rows.Scan(&x.rev, &x.subject, &x.payload); err != nil {
			rows.Close()
			return cursor, fmt.Errorf("read outbox: %w", err)
		}
		batch = append(batch, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return cursor, fmt.Errorf("read outbox: %w", err)
	}
	newCursor := upTo
	if len(batch) == r.cfg.BatchSize {
		newCursor = batch[len(batch)-1].rev
	}
	if len(batch) > 0 {
		info, err := r.stream.Info(ctx)
		if err != nil {
			return cursor, fmt.Errorf("stream info: %w", err)
		}
		seq := info.State.LastSeq
		futures := make([]jetstream.PubAckFuture, 0, len(batch))
		for i, x := range batch {
			msg := &nats.Msg{Subject: x.subject, Data: x.payload, Header: nats.Header{}}
			msg.Header.Set(jetstream.MsgIDHeader, eventstream.MsgID(x.rev))
			msg.Header.Set(eventstream.StoreIDHeader, r.storeID)
			msg.Header.Set(eventstream.BaseHeader, r.base)
			f, err := r.js.PublishMsgAsync(msg, jetstream.WithExpectLastSequence(seq+uint64(i)))
			if err != nil {
				return cursor, fmt.Errorf("publish revision %d: %w", x.rev, err)
			}
			futures = append(futures, f)
		}
		for i, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return cursor, fmt.Errorf("publish revision %d: %w", batch[i].rev, err)
			case <-ctx.Done():
				return cursor, ctx.Err()
			}
		}
		r.published.Add(int64(len(batch)))
		r.log.Debug("published", "first", batch[0].rev, "last", batch[len(batch)-1].rev, "count", len(batch), "cursor", newCursor)
	}
	lastEvent := int64(0)
	if len(batch) > 0 {
		lastEvent = batch[len(batch)-1].rev
	}
	if err := r.moveCursor(ctx, epoch, newCursor, lastEvent); err != nil {
		return cursor, err
	}
	return newCursor, nil
}

// moveCursor moves the cursor forward to cursor and, when lastEvent > 0,
// records it as the newest event published; fenced by epoch.
func (r *Relay) moveCursor(ctx context.Context, epoch, cursor, lastEvent int64) error {
	tag, err := r.pool.Exec(ctx, `UPDATE relay_state SET published_revision = $1, last_event_revision = greatest(last_event_revision, $3), updated_at = now()
		WHERE id = 1 AND epoch = $2 AND published_revision < $1`, cursor, epoch, lastEvent)
	if err != nil {
		return fmt.Errorf("move relay cursor: %w", err)
	}
	if tag.RowsAffected() == 0 {
		var cur int64
		var e int64
		if err := r.pool.QueryRow(ctx, `SELECT epoch, published_revision FROM relay_state WHERE id = 1`).Scan(&e, &cur); err != nil {
			return fmt.Errorf("read relay state: %w", err)
		}
		if e != epoch {
			return ErrLostLeadership
		}
	}
	return nil
}

// prune deletes published rows past retention and records the newest one
// deleted: a stream rebuilt from the outbox starts after it.
func (r *Relay) prune(ctx context.Context, epoch, cursor int64) error {
	var n int64
	err := r.pool.QueryRow(ctx, `WITH d AS (
			DELETE FROM outbox WHERE revision <= $1 AND created_at < now() - make_interval(secs => $2)
				AND EXISTS (SELECT 1 FROM relay_state WHERE id = 1 AND epoch = $3) RETURNING revision
		), u AS (
			UPDATE relay_state SET pruned_revision = greatest(pruned_revision, (SELECT max(revision) FROM d))
			WHERE id = 1 AND EXISTS (SELECT 1 FROM d)
		)
		SELECT count(*) FROM d`, cursor, r.cfg.Retention.Seconds(), epoch).Scan(&n)
	if err != nil {
		return err
	}
	if n > 0 {
		r.log.Info("pruned published outbox rows", "rows", n)
	}
	return nil
}
