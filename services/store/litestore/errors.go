package litestore

import (
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/no8s/no8s/services/store/storage"
)

// translate maps SQLite's errors to the store's errors (storage).
func translate(err error) error {
	if storage.Translated(err) {
		return err
	}
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return storage.NewError(storage.ErrNameTaken, "name already taken")
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_BUSY_SNAPSHOT, sqlite3.SQLITE_LOCKED:
			// Another process held the write lock past busy_timeout.
			return storage.Unavailable(err)
		}
		return fmt.Errorf("sqlite: %w", err)
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) {
		return storage.Unavailable(err)
	}
	return err
}

func notFound(format string, args ...any) error { return storage.NotFound(format, args...) }
