package litestore

// The one way a write runs: write begins a transaction on the write
// connection (BEGIN IMMEDIATE: the write lock is taken at once, so writers
// serialize and nothing a transaction reads can change under it), reads the
// clock, runs the change, and commits. It rolls back on error, on a dry run
// and when the before-commit hook fails, and calls the after-commit hook (the
// relay's wake-up) after COMMIT. It checks the context's fence
// (storage.WithFence) first, in the transaction.

import (
	"context"
	"database/sql"
	"time"
)

// wtx is a write transaction: the transaction and its clock.
type wtx struct {
	*sql.Tx
	// now is the transaction's clock, read after the write lock was taken:
	// every time the transaction compares or writes is now.
	now time.Time
}

// clock is the store's time: the process's clock at PostgreSQL's precision.
func clock() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// write runs fn in a write transaction. fn's changes are rolled back when
// dryRun is set, when fn fails, or when the before-commit hook fails.
func (s *Store) write(ctx context.Context, dryRun bool, fn func(tx *wtx) error) error {
	start := time.Now()
	err := s.transact(ctx, func(tx *wtx) (bool, error) {
		if err := checkFence(ctx, tx); err != nil {
			return false, err
		}
		if err := fn(tx); err != nil {
			return false, err
		}
		if dryRun {
			return false, nil
		}
		if s.opts.BeforeCommit != nil {
			if err := s.opts.BeforeCommit(ctx); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if !dryRun {
		s.opts.Committed(1, start)
	}
	return nil
}

// transact runs fn in a transaction on the write connection and commits
// when fn says so, with no hook: the relay's own bookkeeping (eventlog.go)
// writes through it, so that it neither wakes itself nor meets the faults
// tests inject into the store's writes.
func (s *Store) transact(ctx context.Context, fn func(tx *wtx) (commit bool, err error)) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return translate(err)
	}
	defer func() { _ = tx.Rollback() }()
	commit, err := fn(&wtx{Tx: tx, now: clock()})
	if err != nil {
		return translate(err)
	}
	if !commit {
		return nil
	}
	return translate(tx.Commit())
}

// read runs fn in a read transaction: one snapshot of the database.
func (s *Store) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return translate(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return translate(err)
	}
	return translate(tx.Commit())
}
