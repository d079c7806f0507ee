package store

import (
	"errors"
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
	cfg := DefaultConfig()
	cfg.DatabaseURL = "sqlite:" + t.TempDir() + "/store.db"
	if _, err := Open(t.Context(), cfg, storage.Options{}, slog.New(slog.NewTextHandler(io.Discard, nil))); !errors.Is(err, ErrEmbeddedNotBuiltIn) {
		t.Errorf("Open(sqlite:) = %v, want ErrEmbeddedNotBuiltIn", err)
	}
}
