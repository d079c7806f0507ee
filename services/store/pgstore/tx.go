package pgstore

// The two ways a write runs: write (an interactive transaction) and
// pipelinedWrite (two round trips, for the hot paths). Both roll back on
// error, on a dry run and when the before-commit hook fails, and call the
// after-commit hook (the relay's wake-up) after COMMIT. Both check the
// context's fence (storage.WithFence) first, in the transaction.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/store/storage"
)

// write runs fn in a read-committed transaction. fn's changes are rolled back
// when dryRun is set, when fn fails, or when the before-commit hook fails.
func (s *Store) write(ctx context.Context, dryRun bool, fn func(tx pgx.Tx) error) error {
	start := time.Now()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return storage.Unavailable(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if f := storage.FenceOf(ctx); !f.IsZero() {
		if err := scanFence(tx.QueryRow(ctx, fenceSQL, f.Lease), f); err != nil {
			return translate(err)
		}
	}
	if err := fn(tx); err != nil {
		return translate(err)
	}
	if dryRun {
		return nil
	}
	if s.opts.BeforeCommit != nil {
		if err := s.opts.BeforeCommit(ctx); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return translate(err)
	}
	s.opts.Committed(1, start)
	return nil
}

// pipelinedWrite runs one write in two round trips: BEGIN and the reads
// queued by read go in one batch (scan reads their results), then the
// writes that write queues go with COMMIT in a second batch. It is the hot
// path's version of write. The transaction is shared with other pipelined
// writes running at the same time (group commit, groupcommit.go), except
// for a dry run: key names what the write locks or creates (no two writes
// with one key share a transaction), lockID the resource row it locks (0:
// none). The before-commit hook, when set, costs one more round trip.
func (s *Store) pipelinedWrite(ctx context.Context, dryRun bool, key string, lockID int64, read func(b *pgx.Batch), scan func(br pgx.BatchResults) error, write func(b *pgx.Batch) error) error {
	if dryRun || s.group.alone {
		return s.pipelinedWriteAlone(ctx, dryRun, read, scan, write)
	}
	return s.groupWrite(ctx, &pwrite{key: key, lockID: lockID, read: read, scan: scan, write: write})
}

// pipelinedWriteAlone is pipelinedWrite in a transaction of its own.
func (s *Store) pipelinedWriteAlone(ctx context.Context, dryRun bool, read func(b *pgx.Batch), scan func(br pgx.BatchResults) error, write func(b *pgx.Batch) error) error {
	start := time.Now()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return storage.Unavailable(err)
	}
	defer conn.Release()
	done := false
	defer func() {
		if done {
			return
		}
		// Leave the connection clean, or drop it when that fails.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	fence := storage.FenceOf(ctx)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if !fence.IsZero() {
		b.Queue(fenceSQL, fence.Lease)
	}
	read(b)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil && !fence.IsZero() {
		err = scanFence(br.QueryRow(), fence)
	}
	if err == nil {
		err = scan(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return translate(err)
	}
	w := &pgx.Batch{}
	if err := write(w); err != nil {
		return translate(err)
	}
	commitInBatch := !dryRun && s.opts.BeforeCommit == nil
	if commitInBatch {
		w.Queue("COMMIT")
	}
	if err := conn.SendBatch(ctx, w).Close(); err != nil {
		return translate(err)
	}
	if dryRun {
		return nil
	}
	if !commitInBatch {
		if err := s.opts.BeforeCommit(ctx); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return translate(err)
		}
	}
	done = true
	s.opts.Committed(1, start)
	return nil
}
