package pgstore

// Scheduler leadership (docs/design/reconcile.md, "Scheduler"; HARD-PARTS 3):
// one lease row whose epoch grows at each takeover (storage.Campaign). The
// scheduler's writes (dispatch records, conditions) are fenced by it
// (checkScheduler).

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/store/storage"
)

// BecomeScheduler takes or renews the scheduler leadership lease
// (storage.Campaign).
func (s *Store) BecomeScheduler(ctx context.Context, holder string, d time.Duration, epoch int64) (*storage.SchedulerLease, error) {
	d, err := storage.ValidateCampaign(holder, d)
	if err != nil {
		return nil, err
	}
	var out storage.SchedulerLease
	err = s.write(ctx, false, func(tx pgx.Tx) error {
		var cur storage.SchedulerState
		if err := tx.QueryRow(ctx, `SELECT epoch, holder, lease_expires_at, now() FROM scheduler_state WHERE id = 1 FOR UPDATE`).
			Scan(&cur.Epoch, &cur.Holder, &cur.ExpiresAt, &cur.Now); err != nil {
			return err
		}
		out = storage.Campaign(cur, holder, d, epoch)
		if !out.Leader {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE scheduler_state SET epoch = $1, holder = $2, lease_expires_at = $3, updated_at = $4 WHERE id = 1`,
			out.Epoch, holder, out.ExpiresAt, cur.Now)
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
	return s.write(ctx, false, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE scheduler_state SET lease_expires_at = now(), updated_at = now()
			WHERE id = 1 AND epoch = $1 AND holder = $2`, epoch, holder)
		return err
	})
}

// checkScheduler refuses a write fenced by a scheduler epoch that is not the
// current one or whose lease has expired.
func checkScheduler(ctx context.Context, tx pgx.Tx, epoch int64) error {
	var cur int64
	var valid bool
	if err := tx.QueryRow(ctx, `SELECT epoch, coalesce(lease_expires_at > now(), false) FROM scheduler_state WHERE id = 1`).Scan(&cur, &valid); err != nil {
		return err
	}
	return storage.CheckScheduler(epoch, cur, valid)
}
