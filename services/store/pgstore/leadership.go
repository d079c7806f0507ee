package pgstore

// Scheduler leadership (docs/design/reconcile.md, "Scheduler"; HARD-PARTS 3):
// one lease row whose epoch grows at each takeover. The scheduler's writes
// (dispatch records, conditions) are fenced by it (checkScheduler).

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SchedulerLease is the state of the scheduler's leadership lease.
type SchedulerLease struct {
	// Leader is true when the caller holds the lease.
	Leader    bool
	Epoch     int64
	ExpiresAt time.Time
	Holder    string
}

// BecomeScheduler takes or renews the scheduler leadership lease. A caller
// presenting the current epoch as its holder renews it (also after expiry,
// when nobody took over: nobody else can have acted under a newer epoch). A
// caller takes it, with epoch + 1, when it is free, expired, or recorded for
// the caller's own name (a restarted process). Otherwise Leader is false and
// the answer names the current leader.
func (s *Store) BecomeScheduler(ctx context.Context, holder string, d time.Duration, epoch int64) (*SchedulerLease, error) {
	if err := validateHolder(holder); err != nil {
		return nil, err
	}
	if d == 0 {
		d = 6 * time.Second
	}
	if d < time.Second || d > MaxLease {
		return nil, invalidField("/lease_seconds", fmt.Sprintf("must be between 1 and %d seconds", int(MaxLease/time.Second)))
	}
	var out SchedulerLease
	err := s.write(ctx, false, func(tx pgx.Tx) error {
		var curHolder string
		var expires *time.Time
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT epoch, holder, lease_expires_at, now() FROM scheduler_state WHERE id = 1 FOR UPDATE`).
			Scan(&out.Epoch, &curHolder, &expires, &now); err != nil {
			return err
		}
		renew := epoch != 0 && epoch == out.Epoch && curHolder == holder
		free := curHolder == "" || expires == nil || !expires.After(now) || curHolder == holder
		if !renew && !free {
			out.Holder, out.ExpiresAt = curHolder, expires.UTC()
			return nil
		}
		if !renew {
			out.Epoch++
		}
		out.Leader, out.Holder, out.ExpiresAt = true, holder, now.Add(d).UTC()
		_, err := tx.Exec(ctx, `UPDATE scheduler_state SET epoch = $1, holder = $2, lease_expires_at = $3, updated_at = $4 WHERE id = 1`,
			out.Epoch, holder, out.ExpiresAt, now)
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
	if epoch != cur {
		return staleEpoch("scheduler epoch %d is stale: the current epoch is %d", epoch, cur)
	}
	if !valid {
		return staleEpoch("the lease of scheduler epoch %d has expired; renew it first", epoch)
	}
	return nil
}
