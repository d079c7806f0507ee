package pgstore

// The scheduler's view of the store (docs/design/reconcile.md, "Scheduler", State): the
// reconcile state of resources, in pages by id or by ids, read in one
// snapshot with the relay's published revision, from which a new leader
// rebuilds its state.

import (
	"context"

	"github.com/google/uuid"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// statesSQL reads the relay's published revision and, beside it, the
// reconcile state of the resources matching the condition statesSQLEnd
// follows with: $1 to $3 are the operation annotation, the condition type
// and the reconciler finalizer prefix read, $4 the page size, $5 the id to
// read after.
const statesSQL = `SELECT rs.published_revision, p.* FROM relay_state rs LEFT JOIN LATERAL (
	SELECT r.id, r.uid, r.name, r.resource_type_name, r.resource_type_version, r.generation,
		r.observed_generation, r.status, r.deleted_at IS NOT NULL, r.failures, r.terminal_generation, r.last_reconcile_time,
		r.reconcile_requested_at, coalesce(r.annotations ->> $1, ''), r.lease_expires_at, r.dispatched_at, r.requeue_at,
		r.resource_version, r.lease_epoch, r.lease_holder, r.dispatch_id,
		EXISTS (SELECT 1 FROM jsonb_array_elements(r.conditions) c WHERE c ->> 'type' = $2 AND c ->> 'status' <> 'True'),
		r.deleted_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(r.finalizers) f WHERE starts_with(f, $3)),
		t.reconcile_policy,
		coalesce(jsonb_path_query_first(r.owner_references, '$[*] ? (@.controller == true).uid') #>> '{}', ''),
		r.namespace, r.dependencies, r.lease_revision
	FROM resources r LEFT JOIN resource_types t ON t.id = r.resource_type_id
	WHERE r.id > $5`

// statesSQLEnd closes statesSQL.
const statesSQLEnd = ` ORDER BY r.id LIMIT $4) p ON true
	WHERE rs.id = 1 ORDER BY p.id`

// statesAfterSQL reads a page of states by id; statesByIDSQL the states of
// the ids in $6. They are two statements, not one with both conditions: a
// prepared statement's generic plan cannot tell which one applies, and
// walked the primary key from $5 to the highest id asked for, filtering
// (12 ms a read of 30 states among 40,000 resources, and the scheduler
// reads states on every event).
const (
	statesAfterSQL = statesSQL + statesSQLEnd
	statesByIDSQL  = statesSQL + ` AND r.id = ANY($6)` + statesSQLEnd
)

// ListReconcileState returns the reconcile state of resources by ascending
// id, after AfterID, or of the resources named in IDs.
func (s *Store) ListReconcileState(ctx context.Context, req storage.ListReconcileStateRequest) (*storage.ListReconcileStateResult, error) {
	limit, err := storage.StatePage(req)
	if err != nil {
		return nil, err
	}
	ids := req.IDs
	out := &storage.ListReconcileStateResult{States: []storage.ReconcileState{}}
	// One statement, so one snapshot: the relay's published revision and
	// the page agree without a transaction around them (one round trip).
	args := []any{resource.AnnotationOperation, resource.ConditionReconcilerAvailable, names.ReconcilerFinalizerPrefix, limit, req.AfterID}
	query := statesAfterSQL
	if len(ids) > 0 {
		query, args = statesByIDSQL, append(args, ids)
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		var st storage.ReconcileState
		var id *int64
		var uid *uuid.UUID
		var name, typeName, typeVersion, status, holder, dispatchID, op *string
		var generation, observed, terminal, rv, leaseEpoch, leaseRev *int64
		var deleting, unavailable, cleanupDone *bool
		var failures *int32
		var policy []byte
		var controller, namespace *string
		var deps []byte
		if err := rows.Scan(&out.ResourceVersion, &id, &uid, &name, &typeName, &typeVersion, &generation,
			&observed, &status, &deleting, &failures, &terminal, &st.LastReconcileTime,
			&st.ReconcileRequestedAt, &op, &st.LeaseExpiresAt, &st.DispatchedAt, &st.RequeueAt,
			&rv, &leaseEpoch, &holder, &dispatchID, &unavailable, &cleanupDone, &policy, &controller, &namespace, &deps, &leaseRev); err != nil {
			return nil, translate(err)
		}
		if id == nil {
			continue // no resource: the row carries only the revision
		}
		st.ResourceID, st.UID, st.Name, st.ResourceTypeName, st.ResourceTypeVersion = *id, uid.String(), *name, *typeName, *typeVersion
		st.Generation, st.ObservedGeneration, st.Status, st.Deleting, st.Failures = *generation, *observed, *status, *deleting, *failures
		st.TerminalGeneration, st.ResourceVersion, st.LeaseEpoch, st.LeaseHolder, st.DispatchID = *terminal, *rv, *leaseEpoch, *holder, *dispatchID
		st.ReconcilerUnavailable, st.CleanupDone, st.ControllerUID = *unavailable, *cleanupDone, *controller
		st.Namespace, st.Dependencies, st.LeaseRevision = *namespace, storage.DecodeDependencies(deps), *leaseRev
		st.Finish(*op, policy)
		out.States = append(out.States, st)
	}
	err = rows.Err()
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}
