package store

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/storage"
)

// TestOpenChoosesTheBackendByURL: PostgreSQL for its URL forms, the
// embedded backend for sqlite:, and a clear refusal of anything else.
func TestOpenChoosesTheBackendByURL(t *testing.T) {
	for url, want := range map[string]string{
		"postgres://postgres@127.0.0.1:5432/no8s":   "postgres",
		"postgresql://postgres@127.0.0.1:5432/no8s": "postgres",
		"host=127.0.0.1 user=postgres dbname=no8s":  "postgres",
		"sqlite:/tmp/no8s/store.db":                 "sqlite",
		"sqlite:store.db":                           "sqlite",
	} {
		got, err := backendOf(url)
		if err != nil || got != want {
			t.Errorf("backendOf(%q) = %q, %v; want %q", url, got, err, want)
		}
	}
	for _, url := range []string{"mysql://root@127.0.0.1/no8s", "", "/var/lib/no8s.db"} {
		if _, err := backendOf(url); err == nil || !strings.Contains(err.Error(), "sqlite:<path>") {
			t.Errorf("backendOf(%q): %v, want an error naming the accepted forms", url, err)
		}
	}
}

// TestOpenSQLite: a sqlite: URL opens the embedded backend on that file,
// migrated, with its event log.
func TestOpenSQLite(t *testing.T) {
	ctx := t.Context()
	cfg := DefaultConfig()
	cfg.DatabaseURL = "sqlite:" + t.TempDir() + "/store.db"
	db, err := Open(ctx, cfg, storage.Options{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Name != "sqlite" {
		t.Errorf("backend %q, want sqlite", db.Name)
	}
	if err := db.Store.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := db.Log.State(ctx)
	if err != nil || st.StoreID == "" {
		t.Fatalf("event log state %+v, %v; want a store id", st, err)
	}
	if _, err := db.Store.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
}

// TestOpenWithoutMigrateWaitsForTheSchema: a store started with
// --migrate=false on an empty database waits, serving nothing, until the
// migration step has run, then opens.
func TestOpenWithoutMigrateWaitsForTheSchema(t *testing.T) {
	ctx := t.Context()
	url := testenv.Database(t)
	cfg := DefaultConfig()
	cfg.DatabaseURL = url
	cfg.Migrate = false
	cfg.SchemaPoll = 50 * time.Millisecond
	logs := &testenv.LogBuffer{}
	opened := make(chan error, 1)
	go func() {
		db, err := Open(ctx, cfg, storage.Options{}, slog.New(slog.NewTextHandler(logs, nil)))
		if err == nil {
			db.Close()
		}
		opened <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "waiting for the database schema") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of waiting for the schema; logs:\n%s", logs)
		}
		select {
		case err := <-opened:
			t.Fatalf("opened on an empty database (%v), want it to wait for the schema", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	pool, err := OpenPool(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("open after the migration: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting 10 s after the migration")
	}
	if !strings.Contains(logs.String(), "database schema ready") {
		t.Errorf("no word of the schema being ready; logs:\n%s", logs)
	}
}
