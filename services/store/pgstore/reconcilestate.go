package pgstore

// The scheduler's view of the store (docs/design/reconcile.md, "Scheduler", State): the
// reconcile state of resources, in pages by id or by ids, read in one
// snapshot with the relay's published revision, from which a new leader
// rebuilds its state.

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/resource"
)

// ListReconcileState page bounds.
const (
	DefaultStatePage = 500
	MaxStatePage     = 5000
)

// ReconcileState is what the scheduler needs to know about one resource.
type ReconcileState struct {
	ResourceID            int64
	UID                   string
	Name                  string
	ResourceTypeName      string
	ResourceTypeVersion   string
	Generation            int64
	ObservedGeneration    int64
	Status                string
	Deleting              bool
	Failures              int32
	TerminalGeneration    int64
	LastReconcileTime     *time.Time
	ReconcileRequestedAt  *time.Time
	AnnotationReconcile   bool
	AnnotationIgnore      bool
	LeaseExpiresAt        *time.Time
	DispatchedAt          *time.Time
	RequeueAt             *time.Time
	Policy                resource.ReconcilePolicy
	ResourceVersion       int64
	LeaseEpoch            int64
	LeaseHolder           string
	DispatchID            string
	ReconcilerUnavailable bool
	// CleanupDone: deleting, and no reconciler finalizer remains.
	CleanupDone bool
}

// ListReconcileStateRequest pages through reconcile states by id.
type ListReconcileStateRequest struct {
	AfterID int64
	Limit   int
	// IDs, when set, restricts the page to these resources.
	IDs []int64
}

// ListReconcileStateResult is one page.
type ListReconcileStateResult struct {
	States []ReconcileState
	// ResourceVersion is the relay's published revision at the read.
	ResourceVersion int64
}

// ListReconcileState returns the reconcile state of resources by ascending
// id, after AfterID, or of the resources named in IDs.
func (s *Store) ListReconcileState(ctx context.Context, req ListReconcileStateRequest) (*ListReconcileStateResult, error) {
	limit := req.Limit
	if limit == 0 {
		limit = DefaultStatePage
		if len(req.IDs) > 0 {
			limit = min(len(req.IDs), MaxStatePage)
		}
	}
	if limit < 1 || limit > MaxStatePage {
		return nil, invalidField("/limit", fmt.Sprintf("must be between 1 and %d", MaxStatePage))
	}
	if len(req.IDs) > MaxStatePage {
		return nil, invalidField("/resource_ids", fmt.Sprintf("at most %d ids", MaxStatePage))
	}
	ids := req.IDs
	if ids == nil {
		ids = []int64{}
	}
	out := &ListReconcileStateResult{States: []ReconcileState{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT published_revision FROM relay_state WHERE id = 1`).Scan(&out.ResourceVersion); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT r.id, r.uid, r.name, r.resource_type_name, r.resource_type_version, r.generation,
			r.observed_generation, r.status, r.deleted_at IS NOT NULL, r.failures, r.terminal_generation, r.last_reconcile_time,
			r.reconcile_requested_at, coalesce(r.annotations ->> $4, ''), r.lease_expires_at, r.dispatched_at, r.requeue_at,
			r.resource_version, r.lease_epoch, r.lease_holder, r.dispatch_id,
			EXISTS (SELECT 1 FROM jsonb_array_elements(r.conditions) c WHERE c ->> 'type' = $5 AND c ->> 'status' <> 'True'),
			r.deleted_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(r.finalizers) f WHERE starts_with(f, 'reconciler.no8s.io/')),
			t.reconcile_policy
			FROM resources r LEFT JOIN resource_types t ON t.id = r.resource_type_id
			WHERE r.id > $1 AND (cardinality($2::bigint[]) = 0 OR r.id = ANY($2)) ORDER BY r.id LIMIT $3`,
			req.AfterID, ids, limit, resource.AnnotationOperation, resource.ConditionReconcilerAvailable)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st ReconcileState
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
			st.AnnotationReconcile = op == resource.OperationReconcile
			st.AnnotationIgnore = op == resource.OperationIgnore
			st.Policy = decodePolicy(policy).WithDefaults()
			for _, t := range []**time.Time{&st.LastReconcileTime, &st.ReconcileRequestedAt, &st.LeaseExpiresAt, &st.DispatchedAt, &st.RequeueAt} {
				if *t != nil {
					u := (*t).UTC()
					*t = &u
				}
			}
			out.States = append(out.States, st)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}
