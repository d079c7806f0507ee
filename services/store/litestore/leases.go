package litestore

// Reconcile leases and scheduler leadership (docs/design/reconcile.md;
// HARD-PARTS 2 and 3): the decisions are storage's (Acquire, Campaign,
// CheckScheduler); this file reads and writes the bookkeeping under the
// write lock.

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// reconcileColumns are the bookkeeping columns read beside resourceColumns.
const reconcileColumns = `lease_holder, lease_epoch, lease_expires_at, lease_acquired_at, failures, terminal_generation,
	reconcile_requested_at, dispatch_id, dispatched_at, requeue_at`

// leaseRow is a resource's reconcile bookkeeping as stored.
type leaseRow struct {
	l                                                 storage.LeaseState
	expires, acquired, requested, dispatched, requeue sql.NullInt64
}

// dest is where a row of reconcileColumns scans to.
func (lr *leaseRow) dest() []any {
	return []any{&lr.l.Holder, &lr.l.Epoch, &lr.expires, &lr.acquired, &lr.l.Failures, &lr.l.TerminalGeneration,
		&lr.requested, &lr.l.DispatchID, &lr.dispatched, &lr.requeue}
}

// finish converts the stored times; now is the reading transaction's clock.
func (lr *leaseRow) finish(now time.Time) *storage.LeaseState {
	lr.l.ExpiresAt, lr.l.AcquiredAt, lr.l.RequestedAt = timeOrNil(lr.expires), timeOrNil(lr.acquired), timeOrNil(lr.requested)
	lr.l.Now = now
	return &lr.l
}

// lockForReconcile reads a resource and its lease in a write transaction.
func lockForReconcile(ctx context.Context, tx *wtx, id int64) (*resource.Resource, *storage.LeaseState, error) {
	var lr leaseRow
	r, err := scanResource(tx.QueryRowContext(ctx, `SELECT `+resourceColumns+`, `+reconcileColumns+` FROM resources WHERE id = ?`, id), lr.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, notFound("resource %d not found", id)
	}
	if err != nil {
		return nil, nil, err
	}
	return r, lr.finish(tx.now), nil
}

// AcquireLease grants the reconcile lease of a resource (storage.Acquire's
// rules): epoch + 1, the resource marked reconciling (a MODIFIED event when
// that changes its document); it consumes a pending manual trigger and
// requeue.
func (s *Store) AcquireLease(ctx context.Context, req storage.AcquireLeaseRequest) (*storage.Lease, error) {
	d, err := req.Validate()
	if err != nil {
		return nil, err
	}
	var out *storage.Lease
	err = s.write(ctx, false, func(tx *wtx) error {
		var schedEpoch int64
		if err := tx.QueryRowContext(ctx, `SELECT epoch FROM scheduler_state WHERE id = 1`).Scan(&schedEpoch); err != nil {
			return err
		}
		r, l, err := lockForReconcile(ctx, tx, req.ResourceID)
		if err != nil {
			return err
		}
		var policy sql.NullString
		if err := tx.QueryRowContext(ctx, `SELECT t.reconcile_policy FROM resource_types t WHERE t.id = (SELECT resource_type_id FROM resources WHERE id = ?)`,
			req.ResourceID).Scan(&policy); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		lease, changed, err := storage.Acquire(req, d, r, l, schedEpoch, policyBytes(policy))
		if err != nil {
			return err
		}
		if changed {
			err := tx.emit(ctx, change{event: envelope.Modified, r: r, write: func(ctx context.Context, tx *wtx) error {
				conds, err := jsonText(r.Conditions)
				if err != nil {
					return err
				}
				_, err = tx.ExecContext(ctx, `UPDATE resources SET status = ?, phase = ?, conditions = ?, resource_version = ?, updated_at = ? WHERE id = ?`,
					r.Status, r.Phase, conds, r.ResourceVersion, micros(r.UpdatedAt), r.ID)
				return err
			}})
			if err != nil {
				return err
			}
		}
		now := micros(l.Now)
		_, err = tx.ExecContext(ctx, `UPDATE resources SET lease_holder = ?, lease_epoch = ?, lease_expires_at = ?, lease_acquired_at = ?, requeue_at = NULL,
			lease_revision = (SELECT published_revision FROM relay_state WHERE id = 1),
			reconcile_requested_at = CASE WHEN reconcile_requested_at <= ? THEN NULL ELSE reconcile_requested_at END
			WHERE id = ?`, req.Holder, lease.Epoch, micros(lease.ExpiresAt), now, now, r.ID)
		out = lease
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// policyBytes is a stored policy read from a nullable column.
func policyBytes(p sql.NullString) []byte {
	if !p.Valid {
		return nil
	}
	return []byte(p.String)
}

// RenewLease extends a held lease and returns its new expiry. It is refused
// with stale_epoch once the lease was released or another holder took a
// newer epoch.
func (s *Store) RenewLease(ctx context.Context, resourceID, epoch int64, d time.Duration) (time.Time, error) {
	lease, err := storage.LeaseDuration("/lease_seconds", d, storage.DefaultLease)
	if err != nil {
		return time.Time{}, err
	}
	var expires time.Time
	err = s.write(ctx, false, func(tx *wtx) error {
		expires = tx.now.Add(lease)
		res, err := tx.ExecContext(ctx, `UPDATE resources SET lease_expires_at = ? WHERE id = ? AND lease_epoch = ? AND lease_holder <> ''`,
			micros(expires), resourceID, epoch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var cur storage.LeaseState
		err = tx.QueryRowContext(ctx, `SELECT lease_epoch, lease_holder FROM resources WHERE id = ?`, resourceID).Scan(&cur.Epoch, &cur.Holder)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("resource %d not found", resourceID)
		}
		if err != nil {
			return err
		}
		return storage.LeaseError(resourceID, &cur, epoch)
	})
	return expires, err
}

// BecomeScheduler takes or renews the scheduler leadership lease
// (storage.Campaign's rules).
func (s *Store) BecomeScheduler(ctx context.Context, holder string, d time.Duration, epoch int64) (*storage.SchedulerLease, error) {
	d, err := storage.ValidateCampaign(holder, d)
	if err != nil {
		return nil, err
	}
	var out storage.SchedulerLease
	err = s.write(ctx, false, func(tx *wtx) error {
		cur := storage.SchedulerState{Now: tx.now}
		var expires sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT epoch, holder, lease_expires_at FROM scheduler_state WHERE id = 1`).Scan(&cur.Epoch, &cur.Holder, &expires); err != nil {
			return err
		}
		cur.ExpiresAt = timeOrNil(expires)
		out = storage.Campaign(cur, holder, d, epoch)
		if !out.Leader {
			return nil
		}
		_, err := tx.ExecContext(ctx, `UPDATE scheduler_state SET epoch = ?, holder = ?, lease_expires_at = ?, updated_at = ? WHERE id = 1`,
			out.Epoch, out.Holder, micros(out.ExpiresAt), micros(tx.now))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ReleaseScheduler gives up the scheduler lease of the given epoch (a
// graceful stop): it expires at once, so that a standby takes over at its
// next campaign. Releasing an epoch that is no longer current does nothing.
func (s *Store) ReleaseScheduler(ctx context.Context, holder string, epoch int64) error {
	return s.write(ctx, false, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `UPDATE scheduler_state SET lease_expires_at = ?1, updated_at = ?1 WHERE id = 1 AND epoch = ?2 AND holder = ?3`,
			micros(tx.now), epoch, holder)
		return err
	})
}

// checkScheduler refuses a write fenced by a scheduler epoch that is not the
// current one or whose lease has expired.
func checkScheduler(ctx context.Context, tx *wtx, epoch int64) error {
	var cur int64
	var expires sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT epoch, lease_expires_at FROM scheduler_state WHERE id = 1`).Scan(&cur, &expires); err != nil {
		return err
	}
	return storage.CheckScheduler(epoch, cur, expires.Valid && expires.Int64 > micros(tx.now))
}

// RecordDispatches records, in one transaction, that the scheduler of the
// given epoch dispatched work items. It is refused with stale_epoch unless
// the epoch is current and its lease unexpired, and returns the resources
// that no longer exist. Only bookkeeping changes: no revision, no event.
func (s *Store) RecordDispatches(ctx context.Context, schedulerEpoch int64, ds []storage.Dispatch) ([]int64, error) {
	if err := storage.ValidateDispatches(ds); err != nil {
		return nil, err
	}
	var missing []int64
	err := s.write(ctx, false, func(tx *wtx) error {
		missing = nil
		if err := checkScheduler(ctx, tx, schedulerEpoch); err != nil {
			return err
		}
		for _, d := range ds {
			res, err := tx.ExecContext(ctx, `UPDATE resources SET dispatched_at = ?, dispatch_id = ? WHERE id = ?`, micros(tx.now), d.DispatchID, d.ResourceID)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 0 {
				missing = append(missing, d.ResourceID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return missing, nil
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
	err := s.write(ctx, false, func(tx *wtx) error {
		if err := checkScheduler(ctx, tx, schedulerEpoch); err != nil {
			return err
		}
		r, err := lockResource(ctx, tx, resourceID, 0)
		if err != nil {
			return err
		}
		out = r
		if !storage.ApplyCondition(r, c, tx.now) {
			return nil
		}
		for _, e := range events {
			if _, err := s.recordEvent(ctx, tx, r, e); err != nil {
				return err
			}
		}
		return tx.emit(ctx, change{event: envelope.Modified, r: r, write: func(ctx context.Context, tx *wtx) error {
			conds, err := jsonText(r.Conditions)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE resources SET conditions = ?, phase = ?, resource_version = ?, updated_at = ? WHERE id = ?`,
				conds, r.Phase, r.ResourceVersion, micros(r.UpdatedAt), r.ID)
			return err
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
	err := s.write(ctx, false, func(tx *wtx) error {
		r, err := lockResource(ctx, tx, resourceID, 0)
		if err != nil {
			return err
		}
		out = r
		return tx.emit(ctx, change{event: envelope.Modified, r: r, write: func(ctx context.Context, tx *wtx) error {
			_, err := tx.ExecContext(ctx, `UPDATE resources SET reconcile_requested_at = ?, resource_version = ?, updated_at = ? WHERE id = ?`,
				micros(r.UpdatedAt), r.ResourceVersion, micros(r.UpdatedAt), r.ID)
			return err
		}})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
