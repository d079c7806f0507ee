package pgstore

// Reconcile leases (docs/design/reconcile.md, "Leases"; HARD-PARTS 2): a
// worker acquires a resource's lease before an attempt, with an epoch that
// grows by one at each grant (a fencing token), renews it while it works and
// presents the epoch on every write; a write with a stale epoch is refused.
// Acquiring is refused for items of a deposed scheduler or superseded
// dispatches.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
)

// Lease bounds.
const (
	// DefaultLease is a reconcile lease's length when the worker names none.
	DefaultLease = 30 * time.Second
	// MaxLease bounds a reconcile or scheduler lease.
	MaxLease = time.Hour
	// MaxHolderBytes bounds a lease holder's name.
	MaxHolderBytes = 253
)

// reconcileColumns are the bookkeeping columns read beside resourceColumns.
const reconcileColumns = `lease_holder, lease_epoch, lease_expires_at, lease_acquired_at, failures, terminal_generation,
	reconcile_requested_at, dispatch_id, now()`

// leaseRow is a resource's reconcile bookkeeping, read under its row lock.
type leaseRow struct {
	holder             string
	epoch              int64
	expiresAt          *time.Time
	acquiredAt         *time.Time
	failures           int32
	terminalGeneration int64
	requestedAt        *time.Time
	dispatchID         string
	// now is the transaction's clock: every time the store compares or
	// writes comes from PostgreSQL, never from a process's own clock.
	now time.Time
}

// held reports whether someone holds an unexpired lease.
func (l *leaseRow) held() bool {
	return l.holder != "" && l.expiresAt != nil && l.expiresAt.After(l.now)
}

// extraRow scans a resource row followed by more columns.
type extraRow struct {
	pgx.Row
	extra []any
}

func (r extraRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// lockReconcileSQL reads a resource and its lease for update.
const lockReconcileSQL = `SELECT ` + resourceColumns + `, ` + reconcileColumns + ` FROM resources WHERE id = $1 FOR UPDATE`

// scanReconcile scans a row of lockReconcileSQL.
func scanReconcile(row pgx.Row, id int64) (*resource.Resource, *leaseRow, error) {
	var l leaseRow
	r, err := scanResource(extraRow{Row: row, extra: []any{&l.holder, &l.epoch, &l.expiresAt, &l.acquiredAt, &l.failures,
		&l.terminalGeneration, &l.requestedAt, &l.dispatchID, &l.now}})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, notFound("resource %d not found", id)
	}
	if err != nil {
		return nil, nil, err
	}
	l.now = l.now.UTC()
	return r, &l, nil
}

// lockForReconcile reads a resource and its lease for update.
func lockForReconcile(ctx context.Context, tx pgx.Tx, id int64) (*resource.Resource, *leaseRow, error) {
	return scanReconcile(tx.QueryRow(ctx, lockReconcileSQL, id), id)
}

// leaseError explains why a write presenting epoch found no lease to write
// under.
func leaseError(id int64, l *leaseRow, epoch int64) error {
	if l.epoch == epoch {
		return staleEpoch("the lease of resource %d at epoch %d was already released", id, epoch)
	}
	return staleEpoch("lease epoch %d of resource %d is stale: the current epoch is %d (held by %q)", epoch, id, l.epoch, l.holder)
}

func staleEpoch(format string, args ...any) error {
	return newError(ErrStaleEpoch, format, args...)
}

func leaseDuration(path string, d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return DefaultLease, nil
	case d < time.Second || d > MaxLease:
		return 0, invalidField(path, fmt.Sprintf("must be between 1 and %d seconds", int(MaxLease/time.Second)))
	}
	return d, nil
}

func validateHolder(holder string) error {
	if holder == "" || len(holder) > MaxHolderBytes {
		return invalidField("/holder", fmt.Sprintf("holder is required, at most %d bytes", MaxHolderBytes))
	}
	return nil
}

// AcquireLeaseRequest asks for the reconcile lease of a resource.
type AcquireLeaseRequest struct {
	ResourceID int64
	// Holder names the worker replica.
	Holder string
	// Lease is the lease's length (0: DefaultLease).
	Lease time.Duration
	// SchedulerEpoch is the leader epoch that dispatched the item (0: not
	// checked).
	SchedulerEpoch int64
	// DispatchID is the item's dispatch id ("": not checked).
	DispatchID string
}

// Lease is a granted reconcile lease.
type Lease struct {
	Epoch     int64
	ExpiresAt time.Time
	// Resource is the resource as the attempt starts: reconciling.
	Resource *resource.Resource
	Policy   resource.ReconcilePolicy
}

// AcquireLease grants the reconcile lease of a resource: epoch + 1, the
// resource marked reconciling (a MODIFIED event when that changes its
// document). It is refused with lease_held while another holder's lease is
// unexpired, and with stale_dispatch when the item comes from a deposed
// scheduler or was superseded by a newer dispatch. It consumes a pending
// manual trigger and requeue, and turns a ReconcilerAvailable condition back
// to True.
func (s *Store) AcquireLease(ctx context.Context, req AcquireLeaseRequest) (*Lease, error) {
	if err := validateHolder(req.Holder); err != nil {
		return nil, err
	}
	lease, err := leaseDuration("/lease_seconds", req.Lease)
	if err != nil {
		return nil, err
	}
	var (
		out        Lease
		r          *resource.Resource
		l          *leaseRow
		schedEpoch int64
		policy     []byte
		rv         *revisions
	)
	// Two round trips: the reads (and a revision, used only when the
	// document changes), then the writes with COMMIT.
	err = s.pipelinedWrite(ctx, false, func(b *pgx.Batch) {
		b.Queue(`SELECT epoch FROM scheduler_state WHERE id = 1`)
		b.Queue(lockReconcileSQL, req.ResourceID)
		b.Queue(`SELECT t.reconcile_policy FROM resources r JOIN resource_types t ON t.id = r.resource_type_id WHERE r.id = $1`, req.ResourceID)
		queueRevisions(b, 1)
	}, func(br pgx.BatchResults) error {
		if err := br.QueryRow().Scan(&schedEpoch); err != nil {
			return err
		}
		var err error
		if r, l, err = scanReconcile(br.QueryRow(), req.ResourceID); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&policy); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rv, err = scanRevisions(br, 1)
		return err
	}, func(b *pgx.Batch) error {
		if req.SchedulerEpoch != 0 && req.SchedulerEpoch < schedEpoch {
			return newError(ErrStaleDispatch,
				"work item of scheduler epoch %d is stale: the current scheduler epoch is %d", req.SchedulerEpoch, schedEpoch)
		}
		if req.DispatchID != "" && l.dispatchID != "" && req.DispatchID != l.dispatchID {
			return newError(ErrStaleDispatch,
				"work item %s of resource %d was superseded by dispatch %s", req.DispatchID, r.ID, l.dispatchID)
		}
		if l.held() && l.holder != req.Holder {
			return newError(ErrLeaseHeld,
				"resource %d is being reconciled by %s until %s", r.ID, l.holder, l.expiresAt.Format(time.RFC3339Nano))
		}
		out.Policy = decodePolicy(policy).WithDefaults()
		out.Epoch, out.ExpiresAt = l.epoch+1, l.now.Add(lease)

		changed := false
		if r.DeletedAt == nil && r.Status != resource.StatusReconciling {
			r.Status = resource.StatusReconciling
			changed = true
		}
		if i := slices.IndexFunc(r.Conditions, isType(resource.ConditionReconcilerAvailable)); i >= 0 && r.Conditions[i].Status != resource.ConditionTrue {
			r.Conditions[i] = resource.Condition{Type: resource.ConditionReconcilerAvailable, Status: resource.ConditionTrue,
				Reason: "ReconcilerLive", Message: "a live reconciler took the resource", ObservedGeneration: r.Generation, LastTransitionTime: l.now}
			changed = true
		}
		if changed {
			r.Phase = resource.PhaseFor(r.Status, r.Phase == resource.PhaseDegraded, r.Conditions)
			err := rv.emit(b, change{event: envelope.Modified, r: r, write: func(b *pgx.Batch) {
				b.Queue(`UPDATE resources SET status = $2, phase = $3, conditions = $4, resource_version = $5, updated_at = $6 WHERE id = $1`,
					r.ID, r.Status, r.Phase, r.Conditions, r.ResourceVersion, r.UpdatedAt)
			}})
			if err != nil {
				return err
			}
		}
		b.Queue(`UPDATE resources SET lease_holder = $2, lease_epoch = $3, lease_expires_at = $4, lease_acquired_at = $5, requeue_at = NULL,
			reconcile_requested_at = CASE WHEN reconcile_requested_at <= $5 THEN NULL ELSE reconcile_requested_at END
			WHERE id = $1`, r.ID, req.Holder, out.Epoch, out.ExpiresAt, l.now)
		out.Resource = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// RenewLease extends a held lease and returns its new expiry. It is refused
// with stale_epoch once the lease was released or another holder took a
// newer epoch.
func (s *Store) RenewLease(ctx context.Context, resourceID, epoch int64, d time.Duration) (time.Time, error) {
	lease, err := leaseDuration("/lease_seconds", d)
	if err != nil {
		return time.Time{}, err
	}
	var expires time.Time
	err = s.write(ctx, false, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE resources SET lease_expires_at = now() + $3 * interval '1 microsecond'
			WHERE id = $1 AND lease_epoch = $2 AND lease_holder <> '' RETURNING lease_expires_at`,
			resourceID, epoch, lease.Microseconds()).Scan(&expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return leaseGone(ctx, tx, resourceID, epoch)
		}
		return err
	})
	return expires.UTC(), err
}

// leaseGone explains why a fenced write found no lease: the resource is gone,
// or the epoch is stale.
func leaseGone(ctx context.Context, tx pgx.Tx, resourceID, epoch int64) error {
	var cur leaseRow
	err := tx.QueryRow(ctx, `SELECT lease_epoch, lease_holder FROM resources WHERE id = $1`, resourceID).Scan(&cur.epoch, &cur.holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound("resource %d not found", resourceID)
	}
	if err != nil {
		return err
	}
	return leaseError(resourceID, &cur, epoch)
}
