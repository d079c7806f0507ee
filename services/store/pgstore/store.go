// Package pgstore implements the store (storage.Store) on PostgreSQL:
// resource types and resources with a global revision, generation,
// optimistic concurrency, finalizers and soft delete, each change recorded
// in the outbox in the same transaction. It is SQL and scanning: the rules
// that do not depend on the database live in services/store/storage, and
// the conformance suite (storage/storetest) runs against it.
//
// The files, by concern:
//
//   - store.go, tx.go: the Store and the two ways a write transaction runs;
//   - commit.go: the one commit path (revision, resource_version, event,
//     outbox row) every change to a resource goes through;
//   - errors.go: database errors translated to the store's;
//   - resources.go, list.go, document.go: resources, lists, documents;
//   - types.go, webhooks.go: resource types and admission webhooks;
//   - tokens.go: API tokens (no revision, no event);
//   - leases.go, leadership.go, dispatch.go, completion.go,
//     reconcilestate.go: the store's side of reconciliation.
package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/services/store/storage"
)

// Store is the PostgreSQL implementation of storage.Store.
type Store struct {
	pool *pgxpool.Pool
	opts storage.Options
	// group queues the pipelined writes that share transactions.
	group batcher
	// probe replaces listProbe (tests).
	probe int
}

var _ storage.Store = (*Store)(nil)

// New returns a Store over pool.
func New(pool *pgxpool.Pool, opts storage.Options) *Store {
	return &Store{pool: pool, opts: opts}
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that PostgreSQL answers and accepts writes: a session that
// is read-only (a standby, or a primary fenced during a failover) cannot
// serve the store, so it is unavailable too.
func (s *Store) Ping(ctx context.Context) error {
	var readOnly string
	if err := s.pool.QueryRow(ctx, "SELECT current_setting('transaction_read_only')").Scan(&readOnly); err != nil {
		return translate(err)
	}
	if readOnly == "on" {
		return storage.Unavailable(errors.New("the database session is read-only (SQLSTATE 25006 for every write)"))
	}
	return nil
}
