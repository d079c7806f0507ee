package litestore

// Locks between processes sharing the database file. The relay's
// leadership (HARD-PARTS 1 and 3): one relay publishes at a time.
// PostgreSQL's relay holds an advisory lock on a dedicated connection; here
// the leader holds SQLite's write lock on a small lock file next to the
// database (<path>-relay.lock), by keeping a BEGIN IMMEDIATE transaction open
// on a dedicated connection. The lock is the process's: the operating system
// drops it when the process dies (kill -9 included), and a paused process
// (SIGSTOP) keeps it, so no second relay can start while the first is only
// stopped. The database's relay epoch, bumped at each takeover, fences the
// cursor as on PostgreSQL. Migrate holds the same kind of lock on
// <path>-migrate.lock, so that processes opening a new file together apply
// its migrations once.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// fileLock is a held lock.
type fileLock struct {
	db   *sql.DB
	conn *sql.Conn
}

// relayLockFile and migrateLockFile are the lock files of the database at
// path.
func relayLockFile(path string) string   { return path + "-relay.lock" }
func migrateLockFile(path string) string { return path + "-migrate.lock" }

// takeFileLock takes the lock on file, waiting up to waitMillis for its
// holder to let it go. It returns nil and no error when the lock is still
// held by another connection, in this process or another.
func takeFileLock(ctx context.Context, file string, waitMillis int64) (*fileLock, error) {
	db, err := sql.Open("sqlite", dsn(file, []string{fmt.Sprintf("busy_timeout(%d)", waitMillis)}, "immediate"))
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", file, err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open lock %s: %w", file, err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		_ = conn.Close()
		_ = db.Close()
		var e *sqlite.Error
		if errors.As(err, &e) && (e.Code()&0xff == sqlite3.SQLITE_BUSY || e.Code()&0xff == sqlite3.SQLITE_LOCKED) {
			return nil, nil
		}
		return nil, fmt.Errorf("take lock %s: %w", file, err)
	}
	return &fileLock{db: db, conn: conn}, nil
}

// release gives the lock up: closing the connection ends its transaction
// and with it the lock.
func (l *fileLock) release() {
	_ = l.conn.Close()
	_ = l.db.Close()
}
