// Package pgstore implements the store's domain operations on PostgreSQL:
// resource types and resources with a global revision, generation, optimistic
// concurrency, finalizers and soft delete, each change recorded in the outbox
// in the same transaction. It is the only package that speaks SQL.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/services/internal/problem"
)

// Store is the PostgreSQL implementation of the store.
type Store struct {
	pool *pgxpool.Pool
	// afterCommit is called after every committed change (wakes the relay).
	afterCommit func()
	// beforeCommit, when set, runs inside every write transaction just before
	// commit; an error rolls the transaction back. Tests use it to inject
	// delays and rollbacks.
	beforeCommit func(ctx context.Context) error
	// historyLimit bounds reconciliation history rows per resource (0:
	// DefaultHistoryLimit); see WithHistoryLimit.
	historyLimit int
}

// Option configures a Store.
type Option func(*Store)

// WithAfterCommit sets a function called after each committed change.
func WithAfterCommit(f func()) Option { return func(s *Store) { s.afterCommit = f } }

// WithBeforeCommit sets a hook run inside each write transaction before commit.
func WithBeforeCommit(f func(ctx context.Context) error) Option {
	return func(s *Store) { s.beforeCommit = f }
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// write runs fn in a read-committed transaction. fn's changes are rolled back
// when dryRun is set, when fn fails, or when the before-commit hook fails.
func (s *Store) write(ctx context.Context, dryRun bool, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return unavailable(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return translate(err)
	}
	if dryRun {
		return nil
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(ctx); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return translate(err)
	}
	if s.afterCommit != nil {
		s.afterCommit()
	}
	return nil
}

// pipelinedWrite runs one write transaction in two round trips: BEGIN and
// the reads queued by read go in one batch (scan reads their results), then
// the writes that write queues go with COMMIT in a second batch. It is the hot
// path's version of write; the before-commit hook, when set, costs one more
// round trip.
func (s *Store) pipelinedWrite(ctx context.Context, dryRun bool, read func(b *pgx.Batch), scan func(br pgx.BatchResults) error, write func(b *pgx.Batch) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return unavailable(err)
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
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	read(b)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
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
	commitInBatch := !dryRun && s.beforeCommit == nil
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
		if err := s.beforeCommit(ctx); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return translate(err)
		}
	}
	done = true
	if s.afterCommit != nil {
		s.afterCommit()
	}
	return nil
}

// typeLockSQL takes a transaction-level advisory lock on a type's name and
// version: shared by every create of a resource of the type, exclusive by
// the type's deletion, so a type cannot go while a create is in flight.
const typeLockSQL = `SELECT pg_advisory_xact_lock_shared(hashtextextended($1 || '/' || $2, 7))`

const typeLockExclusiveSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 7))`

// revisions takes n consecutive revisions for the transaction. It first makes
// sure the transaction has an id, so that the relay, which waits for every
// transaction older than its snapshot, cannot miss a revision taken here.
func revisions(ctx context.Context, tx pgx.Tx, n int) ([]int64, time.Time, error) {
	rows, err := tx.Query(ctx, `WITH x AS MATERIALIZED (SELECT pg_current_xact_id() AS xid)
		SELECT nextval('revision_seq'), now() FROM x, generate_series(1, $1)`, n)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	var revs []int64
	var now time.Time
	for rows.Next() {
		var r int64
		if err := rows.Scan(&r, &now); err != nil {
			return nil, time.Time{}, err
		}
		revs = append(revs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, err
	}
	if len(revs) != n {
		return nil, time.Time{}, fmt.Errorf("got %d revisions, want %d", len(revs), n)
	}
	return revs, now.UTC(), nil
}

// translate maps database errors to domain errors.
func translate(err error) error {
	if err == nil || problem.As(err) != nil {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505": // unique_violation
			return problem.New(problem.AlreadyExists, problem.CodeNameTaken, "name already taken")
		case "40001", "40P01": // serialization failure, deadlock
			return problem.New(problem.Conflict, problem.CodeConflict, "concurrent change, retry: %s", pgErr.Message)
		case "57P01", "57P02", "57P03", "08000", "08003", "08006": // shutdown, connection
			return unavailable(err)
		}
		return fmt.Errorf("postgres: %w", err)
	}
	if pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) {
		return unavailable(err)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return unavailable(err)
	}
	// A connection that broke mid-call (the server went away): the
	// outcome of a write is unknown, and retrying with a resource_version
	// precondition is safe.
	var netErr net.Error
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &netErr) {
		return unavailable(err)
	}
	return err
}

func unavailable(err error) error {
	return &problem.Error{Kind: problem.Unavailable, Code: problem.CodeUnavailable, Detail: "database unavailable: " + err.Error()}
}
