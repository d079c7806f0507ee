package litestore_test

import (
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/no8s/no8s/migrations"
	"github.com/no8s/no8s/services/store/litestore"
	"github.com/no8s/no8s/services/store/storage"
	"github.com/no8s/no8s/services/store/storage/storetest"
)

// beforeTraceContextVersion is the embedded store's schema version of the
// release before the outbox's trace context column (00001-00007).
const beforeTraceContextVersion = 7

// TestUpgradeToTraceContext builds an embedded store's file with the
// previous release's migrations, writes unpublished outbox rows with that
// release's SQL (no trace_context column; the relay's cursor behind them),
// opens it with this release (which migrates it in place) and checks it
// (storetest.CheckTraceContextUpgraded): the old rows publish unchanged
// and in order, then new rows with their trace context.
func TestUpgradeToTraceContext(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, beforeTraceContextVersion); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	revs := make([]int64, 3)
	for i := range revs {
		if err := tx.QueryRowContext(ctx, `UPDATE revision_counter SET value = value + 1 WHERE id = 1 RETURNING value`).Scan(&revs[i]); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	old, err := storetest.OldOutboxRows(revs, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range old {
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (revision, resource_id, event_type, subject, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			r.Revision, r.ResourceID, r.EventType, r.Subject, r.Payload, now.UnixMicro()); err != nil {
			t.Fatalf("write as the previous release: %v", err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := litestore.Open(ctx, path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	v, err := s.Migrate(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("migrate in place: %v", err)
	}
	if v <= beforeTraceContextVersion {
		t.Fatalf("migrated to version %d", v)
	}
	storetest.CheckTraceContextUpgraded(t, storage.Backend{Store: s, Log: s.EventLog(), Name: "sqlite", Close: func() { _ = s.Close() }}, old)
}
