package store

import (
	"io"
	"log/slog"
	"strings"
	"testing"

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
