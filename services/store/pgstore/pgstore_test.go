package pgstore_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store/pgoutbox"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
	"github.com/no8s/no8s/services/store/storage/storetest"
)

// newPool returns a pool on a fresh, migrated database.
func newPool(t *testing.T) *pgxpool.Pool { return testenv.MigratedPool(t) }

// TestConformance runs the store's conformance suite on PostgreSQL: pgstore
// as the Store, pgoutbox as the EventLog, each subtest on a fresh database.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storage.Options) storage.Backend {
		pool := newPool(t)
		return storage.Backend{Store: pgstore.New(pool, o), Log: pgoutbox.New(pool), Name: "postgres", Close: pool.Close}
	})
}
