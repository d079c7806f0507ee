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
