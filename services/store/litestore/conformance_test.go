package litestore_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/no8s/no8s/services/store/litestore"
	"github.com/no8s/no8s/services/store/storage"
	"github.com/no8s/no8s/services/store/storage/storetest"
)

// TestConformance runs the store's conformance suite against the embedded
// backend, each subtest on a fresh SQLite file in its own temporary
// directory.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storage.Options) storage.Backend {
		s, err := litestore.Open(t.Context(), filepath.Join(t.TempDir(), "store.db"), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if _, err := s.Migrate(t.Context(), slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		return storage.Backend{Store: s, Log: s.EventLog(), Name: "sqlite", Close: func() { _ = s.Close() }}
	})
}
