package pgstore

// Completion of an attempt (docs/design/reconcile.md, "Store additions"):
// storage.Complete decides; here the resource, its bookkeeping and the
// history row are written in one transaction and one event; and the history
// is read.

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// CompleteReconcile saves the outcome of one attempt in one transaction
// (storage.Complete): status, conditions, outputs, observed generation,
// finalizer and annotation changes, a history row (the oldest pruned beyond
// the limit), and releases the lease. A success is one RECONCILED event,
// any other outcome one MODIFIED event; a deleting resource whose last
// finalizer goes is purged (one PURGED event).
func (s *Store) CompleteReconcile(ctx context.Context, req storage.CompleteReconcileRequest) (*storage.CompleteResult, error) {
	outputs, err := req.Validate()
	if err != nil {
		return nil, err
	}
	limit := s.opts.MaxHistory()
	var (
		res storage.CompleteResult
		r   *resource.Resource
		l   *storage.LeaseState
		rv  *revisions
	)
	// Two round trips: lock and revision, then every write with COMMIT.
	err = s.pipelinedWrite(ctx, false, resourceKey(req.ResourceID), req.ResourceID, func(b *pgx.Batch) {
		b.Queue(lockReconcileSQL, req.ResourceID)
		queueRevisions(b, 1)
	}, func(br pgx.BatchResults) error {
		var err error
		if r, l, err = scanReconcile(br.QueryRow(), req.ResourceID); err != nil {
			return err
		}
		rv, err = scanRevisions(ctx, br, 1)
		return err
	}, func(b *pgx.Batch) error {
		now := rv.now
		c, err := storage.Complete(r, l, &req, outputs, now)
		if err != nil {
			return err
		}
		res.Resource = r
		if c.Purge {
			// The row goes, and its history with it; its events stay.
			res.Purged = true
			for _, e := range req.Events {
				s.queueEvent(b, r, e, now)
			}
			return rv.emit(b, change{event: c.Event, r: r, write: func(b *pgx.Batch, _ []byte) {
				b.Queue(`DELETE FROM resources WHERE id = $1`, r.ID)
			}})
		}
		h := c.History
		var errMsg *string
		if h.ErrorMessage != "" {
			errMsg = &h.ErrorMessage
		}
		return rv.emit(b, change{event: c.Event, r: r, write: func(b *pgx.Batch, doc []byte) {
			b.Queue(`UPDATE resources SET status = $2, status_message = $3, observed_generation = $4, conditions = $5, phase = $6,
				outputs = $7, finalizers = $8, annotations = $9, resource_version = $10, updated_at = $11, last_reconcile_time = $11,
				failures = $12, terminal_generation = $13, requeue_at = $14, lease_holder = '', lease_expires_at = NULL,
				dependencies = $15, document = $16, document_version = $10 WHERE id = $1`,
				r.ID, r.Status, r.StatusMessage, r.ObservedGeneration, jsonConditions(r.Conditions), r.Phase,
				[]byte(r.Outputs), resource.AppendStrings(nil, r.Finalizers), jsonMap(r.Annotations), r.ResourceVersion, now,
				c.Failures, c.TerminalGeneration, c.RequeueAt, storage.EncodeDependencies(req.Dependencies), doc)
			b.Queue(`INSERT INTO reconciliation_history (resource_id, generation, success, phase, error_message, resources_created,
				resources_updated, resources_deleted, started_at, duration_ms, reconcile_time, lease_epoch, holder, reason)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
				r.ID, h.Generation, h.Success, h.Phase, errMsg, h.ResourcesCreated, h.ResourcesUpdated, h.ResourcesDeleted,
				h.StartedAt, h.DurationMS, h.ReconcileTime, h.LeaseEpoch, h.Holder, h.Reason)
			b.Queue(`DELETE FROM reconciliation_history WHERE resource_id = $1 AND id < (
				SELECT id FROM reconciliation_history WHERE resource_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`, r.ID, limit-1)
			for _, e := range req.Events {
				s.queueEvent(b, r, e, now)
			}
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
	rows, err := s.pool.Query(ctx, `SELECT id, resource_id, generation, success, phase, coalesce(error_message, ''), resources_created,
		resources_updated, resources_deleted, started_at, duration_ms, reconcile_time, lease_epoch, holder, reason
		FROM reconciliation_history WHERE resource_id = $1 AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`,
		req.ResourceID, req.BeforeID, limit)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []storage.HistoryEntry{}
	for rows.Next() {
		var h storage.HistoryEntry
		if err := rows.Scan(&h.ID, &h.ResourceID, &h.Generation, &h.Success, &h.Phase, &h.ErrorMessage, &h.ResourcesCreated,
			&h.ResourcesUpdated, &h.ResourcesDeleted, &h.StartedAt, &h.DurationMS, &h.ReconcileTime, &h.LeaseEpoch, &h.Holder, &h.Reason); err != nil {
			return nil, translate(err)
		}
		h.ReconcileTime = h.ReconcileTime.UTC()
		if h.StartedAt != nil {
			t := h.StartedAt.UTC()
			h.StartedAt = &t
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	if len(out) == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM resources WHERE id = $1)`, req.ResourceID).Scan(&exists); err != nil {
			return nil, translate(err)
		}
		if !exists {
			return nil, storage.NotFound("resource %d not found", req.ResourceID)
		}
	}
	return out, nil
}
