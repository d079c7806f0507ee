package litestore

// Events (records attached to a resource; storage/records.go has the rules)
// and leader leases with the fence of client writes. Writers serialize on
// the write lock, so a repeat's lookup and its update or insert cannot
// race.

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

const eventColumns = `id, resource_id, resource_uid, resource_name, resource_type_name, resource_type_version,
	type, reason, message, source, count, first_time, last_time`

func scanEvent(row interface{ Scan(...any) error }) (*storage.EventRecord, error) {
	var e storage.EventRecord
	var first, last int64
	if err := row.Scan(&e.ID, &e.ResourceID, &e.ResourceUID, &e.ResourceName, &e.ResourceTypeName, &e.ResourceTypeVersion,
		&e.Type, &e.Reason, &e.Message, &e.Source, &e.Count, &first, &last); err != nil {
		return nil, err
	}
	e.FirstTime, e.LastTime = timeOf(first), timeOf(last)
	return &e, nil
}

// recordEvent records e on r in tx and prunes (storage/records.go).
func (s *Store) recordEvent(ctx context.Context, tx *wtx, r *resource.Resource, e storage.EventInput) (*storage.EventRecord, error) {
	now := micros(tx.now)
	cutoff := micros(tx.now.Add(-s.opts.EventDedupWindow()))
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM events WHERE resource_id = ? AND type = ? AND reason = ? AND message = ? AND last_time >= ?
		ORDER BY id DESC LIMIT 1`, r.ID, e.Type, e.Reason, e.Message, cutoff).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		err = tx.QueryRowContext(ctx, `INSERT INTO events (resource_id, resource_uid, resource_name, resource_type_name, resource_type_version,
			type, reason, message, source, count, first_time, last_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?) RETURNING id`,
			r.ID, r.UID, r.Name, r.ResourceTypeName, r.ResourceTypeVersion, e.Type, e.Reason, e.Message, e.Source, now, now).Scan(&id)
	case err == nil:
		_, err = tx.ExecContext(ctx, `UPDATE events SET count = count + 1, last_time = ?, source = ? WHERE id = ?`, now, e.Source, id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE resource_id = ?1 AND id < (
		SELECT id FROM events WHERE resource_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)`, r.ID, s.opts.MaxEventsPerResource()-1); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE last_time < ? ORDER BY last_time LIMIT ?)`,
		micros(tx.now.Add(-s.opts.EventRetentionAge())), storage.EventPruneBatch()); err != nil {
		return nil, err
	}
	return scanEvent(tx.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = ?`, id))
}

// RecordEvent records an event on a resource (storage/records.go).
func (s *Store) RecordEvent(ctx context.Context, req storage.RecordEventRequest) (*storage.EventRecord, error) {
	if err := req.Event.Validate(""); err != nil {
		return nil, err
	}
	var out *storage.EventRecord
	err := s.write(ctx, false, func(tx *wtx) error {
		r, err := lockResource(ctx, tx, req.ResourceID, 0)
		if err != nil {
			return err
		}
		out, err = s.recordEvent(ctx, tx, r, req.Event)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListEvents pages through events, newest first.
func (s *Store) ListEvents(ctx context.Context, req storage.ListEventsRequest) ([]storage.EventRecord, error) {
	limit, err := req.PageLimit()
	if err != nil {
		return nil, err
	}
	out := []storage.EventRecord{}
	err = s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+eventColumns+` FROM events
			WHERE (?1 = 0 OR resource_id = ?1) AND (?2 = '' OR type = ?2) AND (?3 = '' OR reason = ?3) AND (?4 = 0 OR id < ?4)
			ORDER BY id DESC LIMIT ?5`, req.ResourceID, req.Type, req.Reason, req.BeforeID, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanEvent(rows)
			if err != nil {
				return err
			}
			out = append(out, *e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CampaignLeader takes or renews the named leader lease (storage.Campaign).
func (s *Store) CampaignLeader(ctx context.Context, name, holder string, d time.Duration, epoch int64) (*storage.SchedulerLease, error) {
	d, err := storage.ValidateLeaderCampaign(name, holder, d)
	if err != nil {
		return nil, err
	}
	var out storage.SchedulerLease
	err = s.write(ctx, false, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO leader_leases (name) VALUES (?)`, name); err != nil {
			return err
		}
		cur := storage.SchedulerState{Now: tx.now}
		var expires sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT epoch, holder, lease_expires_at FROM leader_leases WHERE name = ?`, name).
			Scan(&cur.Epoch, &cur.Holder, &expires); err != nil {
			return err
		}
		cur.ExpiresAt = timeOrNil(expires)
		out = storage.Campaign(cur, holder, d, epoch)
		if !out.Leader {
			return nil
		}
		_, err := tx.ExecContext(ctx, `UPDATE leader_leases SET epoch = ?, holder = ?, lease_expires_at = ?, updated_at = ? WHERE name = ?`,
			out.Epoch, holder, micros(out.ExpiresAt), micros(tx.now), name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ReleaseLeader gives up the named leader lease of the given epoch.
func (s *Store) ReleaseLeader(ctx context.Context, name, holder string, epoch int64) error {
	return s.write(ctx, false, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `UPDATE leader_leases SET lease_expires_at = ?1, updated_at = ?1 WHERE name = ?2 AND epoch = ?3 AND holder = ?4`,
			micros(tx.now), name, epoch, holder)
		return err
	})
}

// checkFence refuses the transaction's write when the context's fence does
// not hold (storage.CheckFence).
func checkFence(ctx context.Context, tx *wtx) error {
	f := storage.FenceOf(ctx)
	if f.IsZero() {
		return nil
	}
	cur := storage.LeaderState{Found: true, Now: tx.now}
	var expires sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT epoch, lease_expires_at FROM leader_leases WHERE name = ?`, f.Lease).Scan(&cur.Epoch, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		cur.Found = false
	} else if err != nil {
		return err
	}
	cur.ExpiresAt = timeOrNil(expires)
	return storage.CheckFence(f, cur)
}
