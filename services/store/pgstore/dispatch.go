package pgstore

// What the scheduler records and triggers outside a worker's lease: dispatch
// records and condition writes, both fenced by its epoch, and the manual
// trigger (RequestReconcile).

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// customPlan, as a query's first argument, has PostgreSQL plan it for the
// values of its arguments on every call (an unnamed statement) instead of
// once per connection. A statement whose best plan depends on the number
// of ids it is given and on the size of the table must not keep a plan
// made while the table was small: RecordDispatches' join with its ids kept
// a hash join over a sequential scan of resources, chosen at a few hundred
// rows (30 ms a batch of 128 at 40,000 rows; every resource read at a
// million). Planning it costs about 0.2 ms, once per batch; a batch of one
// (the usual one below saturation) is recorded by the primary key instead,
// whose cached plan is right at any size (recordDispatchSQL). The
// state reads by id (statesByIDSQL) keep their cached plan: the primary
// key's order serves their ORDER BY and LIMIT at any size, and planning
// each read would cost more than the read.
const customPlan = pgx.QueryExecModeExec

// recordDispatchesSQL records the dispatches of the ids in $2, with the
// dispatch ids in $3, and recordDispatchSQL one ($2, $3), both only while
// the scheduler epoch $1 is current and its lease unexpired.
const (
	recordDispatchesSQL = `UPDATE resources r SET dispatched_at = now(), dispatch_id = d.dispatch_id
		FROM unnest($2::bigint[], $3::text[]) AS d(id, dispatch_id)
		WHERE r.id = d.id AND ` + schedulerCurrent + ` RETURNING r.id`
	recordDispatchSQL = `UPDATE resources SET dispatched_at = now(), dispatch_id = $3
		WHERE id = $2 AND ` + schedulerCurrent + ` RETURNING id`
	schedulerCurrent = `EXISTS (SELECT 1 FROM scheduler_state WHERE id = 1 AND epoch = $1 AND lease_expires_at > now())`
)

// RecordDispatches records, in one statement, that the scheduler of the
// given epoch dispatched work items. It is refused with stale_epoch unless
// the epoch is current and its lease unexpired, and returns the resources
// that no longer exist. Only bookkeeping changes: no revision, no event.
func (s *Store) RecordDispatches(ctx context.Context, schedulerEpoch int64, ds []storage.Dispatch) ([]int64, error) {
	if err := storage.ValidateDispatches(ds); err != nil {
		return nil, err
	}
	// In id order, as group-committed writes lock rows.
	ds = slices.SortedFunc(slices.Values(ds), func(a, b storage.Dispatch) int { return cmpInt64(a.ResourceID, b.ResourceID) })
	ids := make([]int64, len(ds))
	dispatchIDs := make([]string, len(ds))
	for i, d := range ds {
		ids[i], dispatchIDs[i] = d.ResourceID, d.DispatchID
	}
	// One statement, one round trip: the hot path of every dispatch. A
	// batch is planned on each call (customPlan).
	query, args := recordDispatchesSQL, []any{customPlan, schedulerEpoch, ids, dispatchIDs}
	if len(ds) == 1 {
		query, args = recordDispatchSQL, []any{schedulerEpoch, ids[0], dispatchIDs[0]}
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, translate(err)
	}
	recorded, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, translate(err)
	}
	if len(recorded) == len(ds) {
		return nil, nil
	}
	// Some were not recorded: a stale epoch (then none was), or resources
	// that are gone.
	if len(recorded) == 0 {
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			return checkScheduler(ctx, tx, schedulerEpoch)
		})
		if err != nil {
			return nil, translate(err)
		}
	}
	return storage.Missing(ids, recorded), nil
}

// SetCondition writes one condition outside a reconcile, fenced by the
// scheduler epoch like RecordDispatches. It writes nothing when the condition
// already has that status, reason and message; otherwise one MODIFIED event,
// with events recorded in the same transaction.
func (s *Store) SetCondition(ctx context.Context, schedulerEpoch, resourceID int64, c resource.Condition, events ...storage.EventInput) (*resource.Resource, error) {
	if err := storage.ValidateCondition(c); err != nil {
		return nil, err
	}
	if err := storage.ValidateEvents("/events", events); err != nil {
		return nil, err
	}
	var out *resource.Resource
	err := s.write(ctx, false, func(tx pgx.Tx) error {
		if err := checkScheduler(ctx, tx, schedulerEpoch); err != nil {
			return err
		}
		r, l, err := lockForReconcile(ctx, tx, resourceID)
		if err != nil {
			return err
		}
		out = r
		if !storage.ApplyCondition(r, c, l.Now) {
			return nil
		}
		return emitTx(ctx, tx, change{event: envelope.Modified, r: r, write: func(b *pgx.Batch, doc []byte) {
			b.Queue(`UPDATE resources SET conditions = $2, phase = $3, resource_version = $4, updated_at = $5, document = $6, document_version = $4 WHERE id = $1`,
				r.ID, r.Conditions, r.Phase, r.ResourceVersion, r.UpdatedAt, doc)
			for _, e := range events {
				s.queueEvent(b, r, e, l.Now)
			}
		}})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RequestReconcile records a manual trigger: the next attempt consumes it.
// It is one MODIFIED event (new resource_version), so that the scheduler
// hears of it.
func (s *Store) RequestReconcile(ctx context.Context, resourceID int64) (*resource.Resource, error) {
	var out *resource.Resource
	err := s.write(ctx, false, func(tx pgx.Tx) error {
		r, err := lockResource(ctx, tx, resourceID, 0)
		if err != nil {
			return err
		}
		out = r
		return emitTx(ctx, tx, change{event: envelope.Modified, r: r, write: func(b *pgx.Batch, doc []byte) {
			b.Queue(`UPDATE resources SET reconcile_requested_at = $2, resource_version = $3, updated_at = $2, document = $4, document_version = $3 WHERE id = $1`,
				r.ID, r.UpdatedAt, r.ResourceVersion, doc)
		}})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
