package litestore

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/no8s/no8s/services/store/storage"
)

// openTest opens a store on a fresh file in the test's temporary directory.
func openTest(t *testing.T, opts storage.Options) *Store {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "data", "no8s.db"), opts)
}

// openPath opens and migrates the store at path.
func openPath(t *testing.T, path string, opts storage.Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(t.Context(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOpenSetsPragmasAndMigrates(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, storage.Options{})
	var mode string
	var sync, fk int
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if err := s.w.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 1 || fk != 1 {
		t.Fatalf("journal_mode %s, synchronous %d, foreign_keys %d; want wal, 1 (NORMAL), 1", mode, sync, fk)
	}
	var storeID string
	if err := s.r.QueryRowContext(ctx, `SELECT store_id FROM relay_state WHERE id = 1`).Scan(&storeID); err != nil {
		t.Fatal(err)
	}
	if len(storeID) != 36 || storeID[14] != '4' {
		t.Fatalf("store_id %q is not a version 4 uuid", storeID)
	}
	// The read pool cannot write.
	if _, err := s.r.ExecContext(ctx, `UPDATE revision_counter SET value = 5`); err == nil {
		t.Fatal("the read pool wrote")
	}
	// Opening again applies nothing and keeps the identity.
	s2 := openPath(t, s.Path(), storage.Options{})
	var again string
	if err := s2.r.QueryRowContext(ctx, `SELECT store_id FROM relay_state WHERE id = 1`).Scan(&again); err != nil {
		t.Fatal(err)
	}
	if again != storeID {
		t.Fatalf("store_id changed from %s to %s", storeID, again)
	}
}

func TestRevisionsAreConsecutiveAndRollBack(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, storage.Options{})
	take := func(dryRun bool) int64 {
		var rev int64
		if err := s.write(ctx, dryRun, func(tx *wtx) (err error) {
			rev, err = tx.takeRevision(ctx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	// The migrations took revisions (the default namespace's, the built-in
	// types'): base is the last.
	var base int64
	if err := s.r.QueryRowContext(ctx, `SELECT value FROM revision_counter WHERE id = 1`).Scan(&base); err != nil {
		t.Fatal(err)
	}
	if a, b := take(false), take(false); a != base+1 || b != base+2 {
		t.Fatalf("revisions %d, %d; want %d, %d", a, b, base+1, base+2)
	}
	if r := take(true); r != base+3 {
		t.Fatalf("dry run took %d; want %d", r, base+3)
	}
	// The dry run rolled its revision back: no gap.
	if r := take(false); r != base+3 {
		t.Fatalf("after a dry run: %d; want %d", r, base+3)
	}
}

// TestMigrateOnceAcrossOpeners: stores opening one new file together apply
// its migrations once (the migration lock), and each finds the schema
// current.
func TestMigrateOnceAcrossOpeners(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "no8s.db")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	versions := make([]int64, 4)
	for i := range 4 {
		s, err := Open(ctx, path, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			versions[i], errs[i] = s.Migrate(ctx, slog.New(slog.DiscardHandler))
		}()
	}
	wg.Wait()
	for i := range 4 {
		if errs[i] != nil || versions[i] != versions[0] || versions[0] == 0 {
			t.Fatalf("migrate %d: version %d, %v (first: %d)", i, versions[i], errs[i], versions[0])
		}
	}
}
