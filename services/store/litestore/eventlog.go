package litestore

// The embedded store's side of the outbox relay: storage.EventLog over the
// outbox table, relay_state and revision_counter. It is the outbox's reader;
// writes to the outbox and the counter happen in the commit path
// (commit.go), except the relay's pruning and a stream rebuild's revision
// bump, here.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/no8s/no8s/services/store/storage"
)

// eventLog is the Store's storage.EventLog.
type eventLog struct{ s *Store }

var _ storage.EventLog = eventLog{}

// EventLog returns the store's event log, for the outbox relay and the
// stream's identity checks.
func (s *Store) EventLog() storage.EventLog { return eventLog{s: s} }

// LockRelay takes the relay lock file's write lock (filelock.go) without
// waiting, or returns nil when another relay, in this process or another,
// holds it.
func (g eventLog) LockRelay(ctx context.Context) (storage.RelayLock, error) {
	l, err := takeFileLock(ctx, relayLockFile(g.s.path), 0)
	if err != nil || l == nil {
		return nil, err
	}
	return &heldRelayLock{s: g.s, lock: l}, nil
}

// heldRelayLock is a held relay lock as storage sees it.
type heldRelayLock struct {
	s    *Store
	lock *fileLock
}

// Lost is nil: the lock is held by this process's open file, which nothing
// but Release (or the process's end) gives up.
func (l *heldRelayLock) Lost() <-chan struct{} { return nil }

// Err is always nil: the lock cannot be lost.
func (l *heldRelayLock) Err() error { return nil }

// Release gives the lock up.
func (l *heldRelayLock) Release() { l.lock.release() }

// Lead bumps the relay epoch and returns it with the published cursor.
func (l *heldRelayLock) Lead(ctx context.Context) (epoch, cursor int64, err error) {
	err = l.s.transact(ctx, func(tx *wtx) (bool, error) {
		err := tx.QueryRowContext(ctx, `UPDATE relay_state SET epoch = epoch + 1, updated_at = ? WHERE id = 1 RETURNING epoch, published_revision`,
			micros(tx.now)).Scan(&epoch, &cursor)
		return err == nil, err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("take relay epoch: %w", err)
	}
	return epoch, cursor, nil
}

// BumpRevision is the database side of a stream rebuild, in one
// transaction.
func (l *heldRelayLock) BumpRevision(ctx context.Context, b int64) error {
	err := l.s.transact(ctx, func(tx *wtx) (bool, error) {
		if _, err := tx.ExecContext(ctx, `UPDATE revision_counter SET value = ? WHERE id = 1`, b); err != nil {
			return false, fmt.Errorf("bump revision: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE relay_state SET published_revision = ?1, last_event_revision = ?1, pruned_revision = ?1,
			epoch = epoch + 1, updated_at = ?2 WHERE id = 1`, b, micros(tx.now)); err != nil {
			return false, fmt.Errorf("move relay cursor: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE revision <= ?`, b); err != nil {
			return false, fmt.Errorf("compact outbox: %w", err)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("bump revision to %d: %w", b, err)
	}
	return nil
}

// SettledRevision is the highest committed revision, when it is past
// cursor. Writers are serialized and take their revisions inside their
// transaction, so a snapshot that sees the counter at V sees every outbox
// row up to V, and no transaction can still add one: nothing to wait for.
func (g eventLog) SettledRevision(ctx context.Context, cursor int64) (int64, error) {
	var last int64
	if err := g.s.r.QueryRowContext(ctx, `SELECT value FROM revision_counter WHERE id = 1`).Scan(&last); err != nil {
		return 0, fmt.Errorf("read revision counter: %w", translate(err))
	}
	if last <= cursor {
		return 0, nil
	}
	return last, nil
}

// ReadOutbox returns the outbox rows in (after, upTo], by revision.
func (g eventLog) ReadOutbox(ctx context.Context, after, upTo int64, limit int) ([]storage.OutboxRow, error) {
	rows, err := g.s.r.QueryContext(ctx, `SELECT revision, resource_id, event_type, subject, payload, created_at, coalesce(trace_context, '') FROM outbox
		WHERE revision > ? AND revision <= ? ORDER BY revision LIMIT ?`, after, upTo, limit)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", translate(err))
	}
	defer rows.Close()
	var out []storage.OutboxRow
	for rows.Next() {
		var x storage.OutboxRow
		var created int64
		if err := rows.Scan(&x.Revision, &x.ResourceID, &x.EventType, &x.Subject, &x.Payload, &created, &x.TraceContext); err != nil {
			return nil, fmt.Errorf("read outbox: %w", translate(err))
		}
		x.CreatedAt = timeOf(created)
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox: %w", translate(err))
	}
	return out, nil
}

// AdvanceCursor moves the cursor forward, fenced by epoch.
func (g eventLog) AdvanceCursor(ctx context.Context, epoch, cursor, lastEvent int64) error {
	err := g.s.transact(ctx, func(tx *wtx) (bool, error) {
		var cur int64
		if err := tx.QueryRowContext(ctx, `SELECT epoch FROM relay_state WHERE id = 1`).Scan(&cur); err != nil {
			return false, err
		}
		if cur != epoch {
			return false, storage.ErrLostLeadership
		}
		_, err := tx.ExecContext(ctx, `UPDATE relay_state SET published_revision = ?1, last_event_revision = max(coalesce(last_event_revision, 0), ?2),
			updated_at = ?3 WHERE id = 1 AND published_revision < ?1`, cursor, lastEvent, micros(tx.now))
		return err == nil, err
	})
	if err != nil && !errors.Is(err, storage.ErrLostLeadership) {
		return fmt.Errorf("move relay cursor: %w", err)
	}
	return err
}

// SetCursor sets the cursor and the newest published event, fenced by
// epoch.
func (g eventLog) SetCursor(ctx context.Context, epoch, cursor, lastEvent int64) error {
	err := g.s.transact(ctx, func(tx *wtx) (bool, error) {
		res, err := tx.ExecContext(ctx, `UPDATE relay_state SET published_revision = ?, last_event_revision = ?, updated_at = ? WHERE id = 1 AND epoch = ?`,
			cursor, lastEvent, micros(tx.now), epoch)
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = storage.ErrLostLeadership
			}
			return false, err
		}
		return true, nil
	})
	if err != nil && !errors.Is(err, storage.ErrLostLeadership) {
		return fmt.Errorf("set relay cursor: %w", err)
	}
	return err
}

// Prune deletes published rows past retention and records the newest one
// deleted, fenced by epoch.
func (g eventLog) Prune(ctx context.Context, epoch, cursor int64, retention time.Duration) (int64, error) {
	var n int64
	err := g.s.transact(ctx, func(tx *wtx) (bool, error) {
		var cur int64
		if err := tx.QueryRowContext(ctx, `SELECT epoch FROM relay_state WHERE id = 1`).Scan(&cur); err != nil || cur != epoch {
			return false, err
		}
		before := micros(tx.now.Add(-retention))
		var newest sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT count(*), max(revision) FROM outbox WHERE revision <= ? AND created_at < ?`, cursor, before).
			Scan(&n, &newest); err != nil || n == 0 {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE revision <= ? AND created_at < ?`, cursor, before); err != nil {
			return false, err
		}
		_, err := tx.ExecContext(ctx, `UPDATE relay_state SET pruned_revision = max(pruned_revision, ?) WHERE id = 1`, newest.Int64)
		return err == nil, err
	})
	if err != nil {
		return 0, fmt.Errorf("prune outbox: %w", err)
	}
	return n, nil
}

// State reads the database's identity and the relay's state in one
// snapshot.
func (g eventLog) State(ctx context.Context) (storage.LogState, error) {
	var st storage.LogState
	var lastEvent sql.NullInt64
	err := g.s.r.QueryRowContext(ctx, `SELECT r.store_id, r.published_revision, r.last_event_revision, r.pruned_revision, c.value
		FROM relay_state r, revision_counter c WHERE r.id = 1 AND c.id = 1`).Scan(&st.StoreID, &st.Cursor, &lastEvent, &st.Pruned, &st.Revision)
	if err != nil {
		return st, fmt.Errorf("read relay state: %w", translate(err))
	}
	st.LastEvent, st.LastEventKnown = lastEvent.Int64, lastEvent.Valid
	return st, nil
}

// Payload returns the payload of the outbox row of revision rev.
func (g eventLog) Payload(ctx context.Context, rev int64) ([]byte, bool, error) {
	var p []byte
	err := g.s.r.QueryRowContext(ctx, `SELECT payload FROM outbox WHERE revision = ?`, rev).Scan(&p)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read outbox revision %d: %w", rev, translate(err))
	}
	return p, true, nil
}
