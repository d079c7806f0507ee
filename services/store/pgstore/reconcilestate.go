package pgstore

// The scheduler's view of the store (docs/design/reconcile.md, "Scheduler", State): the
// reconcile state of resources, in pages by id or by ids, read in one
// snapshot with the relay's published revision, from which a new leader
// rebuilds its state.

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// ListReconcileState returns the reconcile state of resources by ascending
// id, after AfterID, or of the resources named in IDs.
func (s *Store) ListReconcileState(ctx context.Context, req storage.ListReconcileStateRequest) (*storage.ListReconcileStateResult, error) {
	limit, err := storage.StatePage(req)
	if err != nil {
		return nil, err
	}
	ids := req.IDs
	if ids == nil {
		ids = []int64{}
	}
	out := &storage.ListReconcileStateResult{States: []storage.ReconcileState{}}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT published_revision FROM relay_state WHERE id = 1`).Scan(&out.ResourceVersion); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT r.id, r.uid, r.name, r.resource_type_name, r.resource_type_version, r.generation,
			r.observed_generation, r.status, r.deleted_at IS NOT NULL, r.failures, r.terminal_generation, r.last_reconcile_time,
			r.reconcile_requested_at, coalesce(r.annotations ->> $4, ''), r.lease_expires_at, r.dispatched_at, r.requeue_at,
			r.resource_version, r.lease_epoch, r.lease_holder, r.dispatch_id,
			EXISTS (SELECT 1 FROM jsonb_array_elements(r.conditions) c WHERE c ->> 'type' = $5 AND c ->> 'status' <> 'True'),
			r.deleted_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(r.finalizers) f WHERE starts_with(f, $6)),
			t.reconcile_policy
			FROM resources r LEFT JOIN resource_types t ON t.id = r.resource_type_id
			WHERE r.id > $1 AND (cardinality($2::bigint[]) = 0 OR r.id = ANY($2)) ORDER BY r.id LIMIT $3`,
			req.AfterID, ids, limit, resource.AnnotationOperation, resource.ConditionReconcilerAvailable, names.ReconcilerFinalizerPrefix)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st storage.ReconcileState
			var uid uuid.UUID
			var op string
			var policy []byte
			if err := rows.Scan(&st.ResourceID, &uid, &st.Name, &st.ResourceTypeName, &st.ResourceTypeVersion, &st.Generation,
				&st.ObservedGeneration, &st.Status, &st.Deleting, &st.Failures, &st.TerminalGeneration, &st.LastReconcileTime,
				&st.ReconcileRequestedAt, &op, &st.LeaseExpiresAt, &st.DispatchedAt, &st.RequeueAt,
				&st.ResourceVersion, &st.LeaseEpoch, &st.LeaseHolder, &st.DispatchID, &st.ReconcilerUnavailable, &st.CleanupDone, &policy); err != nil {
				return err
			}
			st.UID = uid.String()
			st.Finish(op, policy)
			out.States = append(out.States, st)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}
