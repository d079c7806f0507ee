// Package pgstore implements the store's domain operations on PostgreSQL:
// resource types and resources with a global revision, generation, optimistic
// concurrency, finalizers and soft delete, each change recorded in the outbox
// in the same transaction. It is the only package that speaks SQL.
//
// The files, by concern:
//
//   - store.go, tx.go: the Store and the two ways a write transaction runs;
//   - commit.go: the one commit path (revision, resource_version, event,
//     outbox row) every change to a resource goes through;
//   - errors.go: the store's errors, and database errors translated to them;
//   - resources.go, list.go, document.go: resources, lists, documents;
//   - types.go, webhooks.go: resource types and admission webhooks;
//   - leases.go, leadership.go, dispatch.go, completion.go,
//     reconcilestate.go: the store's side of reconciliation.
package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
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
