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
		}
		switch e.Code() & 0xff { // the primary result code
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			// Another process held the write lock past busy_timeout.
			return storage.Unavailable(err)
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL:
			// The file cannot be written or read now (a read-only or
			// vanished mount, a full disk): the database is unavailable.
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
