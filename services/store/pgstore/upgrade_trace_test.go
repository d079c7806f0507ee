package pgstore_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/pgoutbox"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
	"github.com/no8s/no8s/services/store/storage/storetest"
)

// beforeTraceContextVersion is the schema version of the release before
// the outbox's trace context column (migrations 00001-00011).
const beforeTraceContextVersion = 11

// TestUpgradeToTraceContext builds a database with the previous release's
// migrations, writes unpublished outbox rows with that release's SQL (no
// trace_context column; the relay's cursor behind them), migrates it in
// place and checks it (storetest.CheckTraceContextUpgraded): the old rows
// publish unchanged and in order, then new rows with their trace context.
func TestUpgradeToTraceContext(t *testing.T) {
	ctx := t.Context()
	pool := databaseAt(t, beforeTraceContextVersion)
	var old []storage.OutboxRow
	if err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		revs := make([]int64, 3)
		for i := range revs {
			if err := tx.QueryRow(ctx, `SELECT nextval('revision_seq')`).Scan(&revs[i]); err != nil {
				return err
			}
		}
		var err error
		if old, err = storetest.OldOutboxRows(revs, time.Now().UTC().Truncate(time.Microsecond)); err != nil {
			return err
		}
		for _, r := range old {
			if _, err := tx.Exec(ctx, `INSERT INTO outbox (revision, resource_id, event_type, subject, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
				r.Revision, r.ResourceID, r.EventType, r.Subject, r.Payload, r.CreatedAt); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("write as the previous release: %v", err)
	}

	v, err := migrate.Up(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("migrate in place: %v", err)
	}
	if v <= beforeTraceContextVersion {
		t.Fatalf("migrated to version %d", v)
	}
	storetest.CheckTraceContextUpgraded(t, storage.Backend{Store: pgstore.New(pool, storage.Options{}), Log: pgoutbox.New(pool), Name: "postgres", Close: func() {}}, old)
}
