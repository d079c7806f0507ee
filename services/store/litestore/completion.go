package litestore

// Completion of an attempt: storage.Complete decides, this file writes the
// resource, its history row and its event in one transaction, and reads
// the history back.

import (
	"context"
	"database/sql"

	"github.com/no8s/no8s/services/store/storage"
)

// CompleteReconcile saves the outcome of one attempt in one transaction
// (storage.Complete's rules): the resource, a history row (the oldest pruned
// beyond the limit), the lease released, one event.
func (s *Store) CompleteReconcile(ctx context.Context, req storage.CompleteReconcileRequest) (*storage.CompleteResult, error) {
	outputs, err := req.Validate()
	if err != nil {
		return nil, err
	}
	limit := s.opts.MaxHistory()
	var res storage.CompleteResult
	err = s.write(ctx, false, func(tx *wtx) error {
		r, l, err := lockForReconcile(ctx, tx, req.ResourceID)
		if err != nil {
			return err
		}
		c, err := storage.Complete(r, l, &req, outputs, tx.now)
		if err != nil {
			return err
		}
		res.Resource, res.Purged = r, c.Purge
		for _, e := range req.Events {
			if _, err := s.recordEvent(ctx, tx, r, e); err != nil {
				return err
			}
		}
		if c.Purge {
			return tx.emit(ctx, change{event: c.Event, r: r, write: deleteRow(r.ID)})
		}
		return tx.emit(ctx, change{event: c.Event, r: r, write: func(ctx context.Context, tx *wtx) error {
			v, err := encodeJSON(r.Conditions, r.Finalizers, r.Annotations)
			if err != nil {
				return err
			}
			now := micros(tx.now)
			if _, err := tx.ExecContext(ctx, `UPDATE resources SET status = ?, status_message = ?, observed_generation = ?, conditions = ?, phase = ?,
				outputs = ?, finalizers = ?, annotations = ?, resource_version = ?, updated_at = ?, last_reconcile_time = ?,
				failures = ?, terminal_generation = ?, requeue_at = ?, lease_holder = '', lease_expires_at = NULL,
				dependencies = ? WHERE id = ?`,
				r.Status, r.StatusMessage, r.ObservedGeneration, v[0], r.Phase, string(r.Outputs), v[1], v[2], r.ResourceVersion, now, now,
				c.Failures, c.TerminalGeneration, microsOrNil(c.RequeueAt), string(storage.EncodeDependencies(req.Dependencies)), r.ID); err != nil {
				return err
			}
			h := c.History
			var errMsg any
			if h.ErrorMessage != "" {
				errMsg = h.ErrorMessage
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO reconciliation_history (resource_id, generation, success, phase, error_message, resources_created,
				resources_updated, resources_deleted, started_at, duration_ms, reconcile_time, lease_epoch, holder, reason)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				h.ResourceID, h.Generation, h.Success, h.Phase, errMsg, h.ResourcesCreated, h.ResourcesUpdated, h.ResourcesDeleted,
				microsOrNil(h.StartedAt), h.DurationMS, micros(h.ReconcileTime), h.LeaseEpoch, h.Holder, h.Reason); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `DELETE FROM reconciliation_history WHERE resource_id = ?1 AND id < (
				SELECT id FROM reconciliation_history WHERE resource_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)`, r.ID, limit-1)
			return err
		}})
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// ListHistory returns a resource's reconciliation history, newest first.
func (s *Store) ListHistory(ctx context.Context, req storage.ListHistoryRequest) ([]storage.HistoryEntry, error) {
	limit, err := storage.HistoryPage(req)
	if err != nil {
		return nil, err
	}
	out := []storage.HistoryEntry{}
	err = s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, resource_id, generation, success, phase, coalesce(error_message, ''), resources_created,
			resources_updated, resources_deleted, started_at, duration_ms, reconcile_time, lease_epoch, holder, reason
			FROM reconciliation_history WHERE resource_id = ?1 AND (?2 = 0 OR id < ?2) ORDER BY id DESC LIMIT ?3`,
			req.ResourceID, req.BeforeID, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h storage.HistoryEntry
			var started sql.NullInt64
			var at int64
			if err := rows.Scan(&h.ID, &h.ResourceID, &h.Generation, &h.Success, &h.Phase, &h.ErrorMessage, &h.ResourcesCreated,
				&h.ResourcesUpdated, &h.ResourcesDeleted, &started, &h.DurationMS, &at, &h.LeaseEpoch, &h.Holder, &h.Reason); err != nil {
				return err
			}
			h.StartedAt, h.ReconcileTime = timeOrNil(started), timeOf(at)
			out = append(out, h)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) > 0 {
			return nil
		}
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM resources WHERE id = ?)`, req.ResourceID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return notFound("resource %d not found", req.ResourceID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
