// Package pgoutbox is the PostgreSQL side of the outbox relay: it
// implements storage.EventLog over the outbox table, relay_state and
// revision_seq. The relay's exclusive lock is an advisory lock held on a
// dedicated connection, and the settled revision waits for every
// transaction older than the relay's own id (docs/design/outbox.md).
package pgoutbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/services/store/storage"
)

// lockKey is the advisory lock key of the relay leader ("no8srely").
const lockKey int64 = 0x6e6f3873_72656c79

// Log is the PostgreSQL EventLog.
type Log struct {
	pool *pgxpool.Pool
}

var _ storage.EventLog = (*Log)(nil)

// New returns the EventLog of the database behind pool.
func New(pool *pgxpool.Pool) *Log { return &Log{pool: pool} }

// LockRelay takes the advisory lock on a dedicated connection, watched
// every second: when the connection breaks, the lock is gone and Lost
// closes.
func (g *Log) LockRelay(ctx context.Context) (storage.RelayLock, error) {
	conn, err := pgx.ConnectConfig(ctx, g.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect for relay lock: %w", err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockKey).Scan(&got); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("relay lock: %w", err)
	}
	if !got {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, nil
	}
	// The watcher outlives the caller's call, not its context: Release
	// stops it.
	base := context.WithoutCancel(ctx)
	wctx, stop := context.WithCancel(base)
	l := &relayLock{log: g, conn: conn, base: base, lost: make(chan struct{}), stop: stop, done: make(chan struct{})}
	go l.watch(wctx)
	return l, nil
}

type relayLock struct {
	log  *Log
	conn *pgx.Conn
	// base is the locker's context without its cancellation, for closing
	// the connection.
	base context.Context
	lost chan struct{}
	stop context.CancelFunc
	done chan struct{}

	mu  sync.Mutex
	err error

	releaseOnce sync.Once
}

// watch pings the lock's connection until it breaks or the lock is
// released.
func (l *relayLock) watch(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.conn.Ping(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.err = fmt.Errorf("relay lock connection lost: %w", err)
				l.mu.Unlock()
				close(l.lost)
				return
			}
		}
	}
}

func (l *relayLock) Lost() <-chan struct{} { return l.lost }

func (l *relayLock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *relayLock) Release() {
	l.releaseOnce.Do(func() {
		l.stop()
		<-l.done
		ctx, cancel := context.WithTimeout(l.base, 5*time.Second)
		defer cancel()
		// Unlock before closing: the server drops a closed connection's
		// locks only once its backend has exited, which a locker right
		// after us can outrun (TestConformance/RelayLockAndEpochFencing
		// failed so on a loaded machine).
		if !l.conn.IsClosed() {
			_, _ = l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lockKey)
		}
		_ = l.conn.Close(ctx)
	})
}

func (l *relayLock) Lead(ctx context.Context) (epoch, cursor int64, err error) {
	if err := l.log.pool.QueryRow(ctx, `UPDATE relay_state SET epoch = epoch + 1, updated_at = now() WHERE id = 1 RETURNING epoch, published_revision`).
		Scan(&epoch, &cursor); err != nil {
		return 0, 0, fmt.Errorf("take relay epoch: %w", err)
	}
	return epoch, cursor, nil
}

func (l *relayLock) BumpRevision(ctx context.Context, b int64) error {
	return pgx.BeginFunc(ctx, l.log.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT setval('revision_seq', $1, true)`, b); err != nil {
			return fmt.Errorf("bump revision: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE relay_state SET published_revision = $1, last_event_revision = $1, pruned_revision = $1,
			epoch = epoch + 1, updated_at = now() WHERE id = 1`, b); err != nil {
			return fmt.Errorf("move relay cursor: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE revision <= $1`, b); err != nil {
			return fmt.Errorf("compact outbox: %w", err)
		}
		return nil
	})
}

// lastRevisionSQL is the last revision handed out, 0 before the first.
//
// It reads the sequence with pg_sequence_last_value, which takes the
// sequence's buffer lock. nextval updates the sequence's tuple in place
// under that lock, and while it builds a WAL record (every 32nd call) the
// tuple holds the value 32 ahead; a plain SELECT last_value FROM
// revision_seq reads the tuple without the lock. A relay that read such a
// value would settle revisions no writer holds yet and move its cursor past
// them, and their events would never be published.
const lastRevisionSQL = `coalesce(pg_sequence_last_value('revision_seq'), 0)`

// SettledRevision reads the sequence's last value V and only then takes a
// transaction id X of its own: ids are handed out in increasing order, and
// every writer takes its id before its revisions, so every transaction
// holding a revision <= V has an id below X. Once the oldest running
// transaction is past X, all of them have committed or rolled back. (A
// snapshot's xmax is not enough: it is one past the last *completed* id,
// and running transactions above it are not listed.)
func (g *Log) SettledRevision(ctx context.Context, cursor int64) (int64, error) {
	var last int64
	var xid string
	// One round trip reads the sequence and takes a transaction id. The id
	// is taken only when there is something to publish: reading the
	// sequence first (the materialized CTE) keeps an idle relay from using
	// up transaction ids (CASE evaluates the id lazily).
	if err := g.pool.QueryRow(ctx, `WITH s AS MATERIALIZED (SELECT `+lastRevisionSQL+` AS last)
		SELECT last, CASE WHEN last > $1 THEN pg_current_xact_id()::text ELSE '' END FROM s`, cursor).Scan(&last, &xid); err != nil {
		return 0, fmt.Errorf("read revision sequence: %w", err)
	}
	if last <= cursor {
		return 0, nil
	}
	wait, start := settleFirstWait, time.Now()
	for {
		var settled bool
		if err := g.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::xid8`, xid).Scan(&settled); err != nil {
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
		// Writers in flight commit within a few milliseconds: look often
		// then, so that the wait ends close to their commit; a long
		// transaction is waited for with fewer looks.
		wait = min(wait*2, settleMaxWait)
		if time.Since(start) < settleShortFor {
			wait = min(wait, settleShortWait)
		}
	}
}

// The settled revision's wait for writers in flight (SettledRevision): the
// first look after settleFirstWait, then doubling, at most settleShortWait
// apart for the first settleShortFor and settleMaxWait apart after.
const (
	settleFirstWait = 200 * time.Microsecond
	settleShortWait = 500 * time.Microsecond
	settleShortFor  = 10 * time.Millisecond
	settleMaxWait   = 20 * time.Millisecond
)

// ReadOutbox returns the outbox rows in (after, upTo], by revision.
func (g *Log) ReadOutbox(ctx context.Context, after, upTo int64, limit int) ([]storage.OutboxRow, error) {
	rows, err := g.pool.Query(ctx, `SELECT revision, resource_id, event_type, subject, payload, created_at, coalesce(trace_context, '') FROM outbox
		WHERE revision > $1 AND revision <= $2 ORDER BY revision LIMIT $3`, after, upTo, limit)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	defer rows.Close()
	var out []storage.OutboxRow
	for rows.Next() {
		var x storage.OutboxRow
		if err := rows.Scan(&x.Revision, &x.ResourceID, &x.EventType, &x.Subject, &x.Payload, &x.CreatedAt, &x.TraceContext); err != nil {
			return nil, fmt.Errorf("read outbox: %w", err)
		}
		x.CreatedAt = x.CreatedAt.UTC()
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	return out, nil
}

// AdvanceCursor moves the cursor forward, fenced by epoch. Its own
// transaction commits asynchronously (synchronous_commit off for it alone):
// the cursor is the relay's bookmark, not data, and a round per commit would
// otherwise add a WAL flush per round that the writers' commits wait behind.
// WAL is written in order, so the next synchronous commit of any writer
// flushes it too; a database crash can lose only the newest cursor moves,
// and the relay then finds its newest event in the stream past
// last_event_revision and continues after it (align), as after a relay
// that died between publishing and saving its cursor.
func (g *Log) AdvanceCursor(ctx context.Context, epoch, cursor, lastEvent int64) error {
	tag, err := g.pool.Exec(ctx, `WITH async AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true))
		UPDATE relay_state SET published_revision = $1, last_event_revision = greatest(last_event_revision, $3), updated_at = now()
		FROM async WHERE id = 1 AND epoch = $2 AND published_revision < $1`, cursor, epoch, lastEvent)
	if err != nil {
		return fmt.Errorf("move relay cursor: %w", err)
	}
	if tag.RowsAffected() == 0 {
		var e int64
		if err := g.pool.QueryRow(ctx, `SELECT epoch FROM relay_state WHERE id = 1`).Scan(&e); err != nil {
			return fmt.Errorf("read relay state: %w", err)
		}
		if e != epoch {
			return storage.ErrLostLeadership
		}
	}
	return nil
}

// SetCursor sets the cursor and the newest published event, fenced by
// epoch.
func (g *Log) SetCursor(ctx context.Context, epoch, cursor, lastEvent int64) error {
	tag, err := g.pool.Exec(ctx, `UPDATE relay_state SET published_revision = $1, last_event_revision = $2, updated_at = now() WHERE id = 1 AND epoch = $3`,
		cursor, lastEvent, epoch)
	if err != nil {
		return fmt.Errorf("set relay cursor: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return storage.ErrLostLeadership
	}
	return nil
}

// Prune deletes published rows past retention and records the newest one
// deleted.
func (g *Log) Prune(ctx context.Context, epoch, cursor int64, retention time.Duration) (int64, error) {
	var n int64
	err := g.pool.QueryRow(ctx, `WITH d AS (
			DELETE FROM outbox WHERE revision <= $1 AND created_at < now() - make_interval(secs => $2)
				AND EXISTS (SELECT 1 FROM relay_state WHERE id = 1 AND epoch = $3) RETURNING revision
		), u AS (
			UPDATE relay_state SET pruned_revision = greatest(pruned_revision, (SELECT max(revision) FROM d))
			WHERE id = 1 AND EXISTS (SELECT 1 FROM d)
		)
		SELECT count(*) FROM d`, cursor, retention.Seconds(), epoch).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("prune outbox: %w", err)
	}
	return n, nil
}

// State reads the database's identity and the relay's state.
func (g *Log) State(ctx context.Context) (storage.LogState, error) {
	var s storage.LogState
	var lastEvent *int64
	if err := g.pool.QueryRow(ctx, `SELECT r.store_id::text, r.published_revision, r.last_event_revision, r.pruned_revision, `+lastRevisionSQL+`
		FROM relay_state r WHERE r.id = 1`).Scan(&s.StoreID, &s.Cursor, &lastEvent, &s.Pruned, &s.Revision); err != nil {
		return s, fmt.Errorf("read relay state: %w", err)
	}
	if lastEvent != nil {
		s.LastEvent, s.LastEventKnown = *lastEvent, true
	}
	return s, nil
}

// Payload returns the payload of the outbox row of revision rev.
func (g *Log) Payload(ctx context.Context, rev int64) ([]byte, bool, error) {
	var payload []byte
	err := g.pool.QueryRow(ctx, `SELECT payload FROM outbox WHERE revision = $1`, rev).Scan(&payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read outbox revision %d: %w", rev, err)
	}
	return payload, true, nil
}
