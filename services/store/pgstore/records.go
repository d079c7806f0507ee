package pgstore

// Events (records attached to a resource; storage/records.go has the rules)
// and leader leases with the fence of client writes.

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

const eventColumns = `id, resource_id, resource_uid, resource_name, resource_type_name, resource_type_version,
	type, reason, message, source, count, first_time, last_time`

// eventLockSQL serializes the recordings of one resource's events, so that
// two repeats never both insert. It runs as a statement of its own: the
// upsert after it reads a snapshot taken once the lock is held.
const eventLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('events/' || $1::bigint::text, 7))`

// eventUpsertSQL raises the count of the newest record of the same (type,
// reason, message) last seen at or after the cutoff ($8), or inserts one.
const eventUpsertSQL = `WITH upd AS (
	UPDATE events SET count = count + 1, last_time = $9, source = $7
	WHERE id = (SELECT id FROM events WHERE resource_id = $1 AND type = $4 AND reason = $5 AND message = $6 AND last_time >= $8
		ORDER BY id DESC LIMIT 1)
	RETURNING ` + eventColumns + `
), ins AS (
	INSERT INTO events (resource_id, resource_uid, resource_name, resource_type_name, resource_type_version, type, reason, message, source, count, first_time, last_time)
	SELECT $1, $2, $3, $10, $11, $4, $5, $6, $7, 1, $9, $9 WHERE NOT EXISTS (SELECT 1 FROM upd)
	RETURNING ` + eventColumns + `
)
SELECT ` + eventColumns + ` FROM upd UNION ALL SELECT ` + eventColumns + ` FROM ins`

// eventPruneSQL drops a resource's records beyond the newest $2, and up to
// $4 records of any resource last seen before $3.
const eventPruneSQL = `WITH a AS (
	DELETE FROM events WHERE resource_id = $1 AND id < (SELECT id FROM events WHERE resource_id = $1 ORDER BY id DESC OFFSET $2 - 1 LIMIT 1)
), b AS (
	DELETE FROM events WHERE id IN (SELECT id FROM events WHERE last_time < $3 ORDER BY last_time LIMIT $4)
)
SELECT 1`

// queueEvent queues the recording of e on r at now, and the pruning that
// follows it.
func (s *Store) queueEvent(b *pgx.Batch, r *resource.Resource, e storage.EventInput, now time.Time) {
	b.Queue(eventLockSQL, r.ID)
	b.Queue(eventUpsertSQL, r.ID, r.UID, r.Name, e.Type, e.Reason, e.Message, e.Source,
		now.Add(-s.opts.EventDedupWindow()), now, r.ResourceTypeName, r.ResourceTypeVersion)
	b.Queue(eventPruneSQL, r.ID, s.opts.MaxEventsPerResource(), now.Add(-s.opts.EventRetentionAge()), storage.EventPruneBatch())
}

func scanEvent(row pgx.Row) (*storage.EventRecord, error) {
	var e storage.EventRecord
	if err := row.Scan(&e.ID, &e.ResourceID, &e.ResourceUID, &e.ResourceName, &e.ResourceTypeName, &e.ResourceTypeVersion,
		&e.Type, &e.Reason, &e.Message, &e.Source, &e.Count, &e.FirstTime, &e.LastTime); err != nil {
		return nil, err
	}
	e.FirstTime, e.LastTime = e.FirstTime.UTC(), e.LastTime.UTC()
	return &e, nil
}

// RecordEvent records an event on a resource (storage/records.go).
func (s *Store) RecordEvent(ctx context.Context, req storage.RecordEventRequest) (*storage.EventRecord, error) {
	if err := req.Event.Validate(""); err != nil {
		return nil, err
	}
	var out *storage.EventRecord
	err := s.write(ctx, false, func(tx pgx.Tx) error {
		var r resource.Resource
		var now time.Time
		err := tx.QueryRow(ctx, `SELECT id, uid::text, name, resource_type_name, resource_type_version, now() FROM resources WHERE id = $1`, req.ResourceID).
			Scan(&r.ID, &r.UID, &r.Name, &r.ResourceTypeName, &r.ResourceTypeVersion, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.NotFound("resource %d not found", req.ResourceID)
		}
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		s.queueEvent(b, &r, req.Event, now.UTC())
		br := tx.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
		if out, err = scanEvent(br.QueryRow()); err != nil {
			_ = br.Close()
			return err
		}
		return br.Close()
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
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events
		WHERE ($1 = 0 OR resource_id = $1) AND ($2 = '' OR type = $2) AND ($3 = '' OR reason = $3) AND ($4 = 0 OR id < $4)
		ORDER BY id DESC LIMIT $5`, req.ResourceID, req.Type, req.Reason, req.BeforeID, limit)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []storage.EventRecord{}
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, translate(err)
		}
		out = append(out, *e)
	}
	return out, translate(rows.Err())
}

// CampaignLeader takes or renews the named leader lease (storage.Campaign).
func (s *Store) CampaignLeader(ctx context.Context, name, holder string, d time.Duration, epoch int64) (*storage.SchedulerLease, error) {
	d, err := storage.ValidateLeaderCampaign(name, holder, d)
	if err != nil {
		return nil, err
	}
	var out storage.SchedulerLease
	err = s.write(ctx, false, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO leader_leases (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, name); err != nil {
			return err
		}
		var cur storage.SchedulerState
		if err := tx.QueryRow(ctx, `SELECT epoch, holder, lease_expires_at, now() FROM leader_leases WHERE name = $1 FOR UPDATE`, name).
			Scan(&cur.Epoch, &cur.Holder, &cur.ExpiresAt, &cur.Now); err != nil {
			return err
		}
		out = storage.Campaign(cur, holder, d, epoch)
		if !out.Leader {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE leader_leases SET epoch = $2, holder = $3, lease_expires_at = $4, updated_at = $5 WHERE name = $1`,
			name, out.Epoch, holder, out.ExpiresAt, cur.Now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ReleaseLeader gives up the named leader lease of the given epoch.
func (s *Store) ReleaseLeader(ctx context.Context, name, holder string, epoch int64) error {
	return s.write(ctx, false, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE leader_leases SET lease_expires_at = now(), updated_at = now() WHERE name = $1 AND epoch = $2 AND holder = $3`,
			name, epoch, holder)
		return err
	})
}

// fenceSQL reads a leader lease for a fenced write; FOR SHARE keeps a
// takeover (which updates the row) from committing before the write does.
const fenceSQL = `SELECT epoch, lease_expires_at, now() FROM leader_leases WHERE name = $1 FOR SHARE`

// scanFence checks a fence against the row fenceSQL read.
func scanFence(row pgx.Row, f storage.Fence) error {
	cur := storage.LeaderState{Found: true}
	err := row.Scan(&cur.Epoch, &cur.ExpiresAt, &cur.Now)
	if errors.Is(err, pgx.ErrNoRows) {
		cur.Found = false
	} else if err != nil {
		return err
	}
	return storage.CheckFence(f, cur)
}
