package pgstore

// Reconcile leases (docs/design/reconcile.md, "Leases"; HARD-PARTS 2): the
// rules are storage.Acquire's; here they are read and written under the
// resource's row lock.

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// reconcileColumns are the bookkeeping columns read beside resourceColumns.
const reconcileColumns = `lease_holder, lease_epoch, lease_expires_at, lease_acquired_at, failures, terminal_generation,
	reconcile_requested_at, dispatch_id, now()`

// extraRow scans a resource row followed by more columns.
type extraRow struct {
	pgx.Row
	extra []any
}

func (r extraRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// lockReconcileSQL reads a resource and its lease for update.
const lockReconcileSQL = `SELECT ` + resourceColumns + `, ` + reconcileColumns + ` FROM resources WHERE id = $1 FOR UPDATE`

// scanReconcile scans a row of lockReconcileSQL.
func scanReconcile(row pgx.Row, id int64) (*resource.Resource, *storage.LeaseState, error) {
	var l storage.LeaseState
	r, err := scanResource(extraRow{Row: row, extra: []any{&l.Holder, &l.Epoch, &l.ExpiresAt, &l.AcquiredAt, &l.Failures,
		&l.TerminalGeneration, &l.RequestedAt, &l.DispatchID, &l.Now}})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, storage.NotFound("resource %d not found", id)
	}
	if err != nil {
		return nil, nil, err
	}
	l.Now = l.Now.UTC()
	return r, &l, nil
}

// lockForReconcile reads a resource and its lease for update.
func lockForReconcile(ctx context.Context, tx pgx.Tx, id int64) (*resource.Resource, *storage.LeaseState, error) {
	return scanReconcile(tx.QueryRow(ctx, lockReconcileSQL, id), id)
}

// acquireSQL reads a resource and its lease for update (lockReconcileSQL),
// with the scheduler's current epoch and the type's stored policy.
const acquireSQL = `SELECT ` + resourceColumns + `, ` + reconcileColumns + `,
	coalesce((SELECT epoch FROM scheduler_state WHERE id = 1), 0),
	(SELECT t.reconcile_policy FROM resource_types t WHERE t.id = resources.resource_type_id)
	FROM resources WHERE id = $1 FOR UPDATE`

// acquireLeaseSQL records a granted lease: holder, epoch, expiry and
// acquisition time, and the relay's published revision then (every change
// published by then committed before the attempt began); it clears the
// requeue and consumes a manual trigger requested at or before the
// acquisition. acquireLeaseDocSQL writes the
// changed document in the same statement.
const (
	leaseSet = `lease_holder = $2, lease_epoch = $3, lease_expires_at = $4, lease_acquired_at = $5, requeue_at = NULL,
	lease_revision = (SELECT published_revision FROM relay_state WHERE id = 1),
	reconcile_requested_at = CASE WHEN reconcile_requested_at <= $5 THEN NULL ELSE reconcile_requested_at END`
	acquireLeaseSQL    = `UPDATE resources SET ` + leaseSet + ` WHERE id = $1`
	acquireLeaseDocSQL = `UPDATE resources SET ` + leaseSet + `,
	status = $6, phase = $7, conditions = $8, resource_version = $9, updated_at = $10, document = $11, document_version = $9 WHERE id = $1`
)

// AcquireLease grants the reconcile lease of a resource (storage.Acquire):
// epoch + 1, the resource marked reconciling (a MODIFIED event when that
// changes its document). It consumes a pending manual trigger and requeue.
func (s *Store) AcquireLease(ctx context.Context, req storage.AcquireLeaseRequest) (*storage.Lease, error) {
	d, err := req.Validate()
	if err != nil {
		return nil, err
	}
	var (
		out        *storage.Lease
		r          *resource.Resource
		l          *storage.LeaseState
		schedEpoch int64
		policy     []byte
		rv         *revisions
	)
	// Two round trips: the reads (the row locked with the scheduler's epoch
	// and the type's policy beside it, and a revision, used only when the
	// document changes), then one row write (and its event) with COMMIT.
	err = s.pipelinedWrite(ctx, false, resourceKey(req.ResourceID), req.ResourceID, func(b *pgx.Batch) {
		b.Queue(acquireSQL, req.ResourceID)
		queueRevisions(b, 1)
	}, func(br pgx.BatchResults) error {
		var err error
		row := extraRow{Row: br.QueryRow(), extra: []any{&schedEpoch, &policy}}
		if r, l, err = scanReconcile(row, req.ResourceID); err != nil {
			return err
		}
		rv, err = scanRevisions(ctx, br, 1)
		return err
	}, func(b *pgx.Batch) error {
		var changed bool
		var err error
		if out, changed, err = storage.Acquire(req, d, r, l, schedEpoch, policy); err != nil {
			return err
		}
		if !changed {
			b.Queue(acquireLeaseSQL, r.ID, req.Holder, out.Epoch, out.ExpiresAt, l.Now)
			return nil
		}
		return rv.emit(b, change{event: envelope.Modified, r: r, write: func(b *pgx.Batch, doc []byte) {
			b.Queue(acquireLeaseDocSQL,
				r.ID, req.Holder, out.Epoch, out.ExpiresAt, l.Now, r.Status, r.Phase, jsonConditions(r.Conditions), r.ResourceVersion, r.UpdatedAt, doc)
		}})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
	var cur storage.LeaseState
	err := tx.QueryRow(ctx, `SELECT lease_epoch, lease_holder FROM resources WHERE id = $1`, resourceID).Scan(&cur.Epoch, &cur.Holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.NotFound("resource %d not found", resourceID)
	}
	if err != nil {
		return err
	}
	return storage.LeaseError(resourceID, &cur, epoch)
}
