package litestore

// The relay's leadership (HARD-PARTS 1 and 3): one relay publishes at a
// time. PostgreSQL's relay holds an advisory lock on a dedicated connection;
// here the leader holds SQLite's write lock on a small lock file next to the
// database (<path>-relay.lock), by keeping a BEGIN IMMEDIATE transaction open
// on a dedicated connection. The lock is the process's: the operating system
// drops it when the process dies (kill -9 included), and a paused process
// (SIGSTOP) keeps it, so no second relay can start while the first is only
// stopped. The database's relay epoch, bumped at each takeover, fences the
// cursor as on PostgreSQL.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// relayLock is a held relay lock.
type relayLock struct {
	db   *sql.DB
	conn *sql.Conn
}

// lockPath is the relay lock file of the database at path.
func lockPath(path string) string { return path + "-relay.lock" }

// tryRelayLock takes the relay lock of the database at path without
// waiting. It returns nil and no error when another relay holds it.
func tryRelayLock(ctx context.Context, path string) (*relayLock, error) {
	// busy_timeout 0: a held lock answers SQLITE_BUSY at once.
	db, err := sql.Open("sqlite", dsn(lockPath(path), []string{"busy_timeout(0)"}, "immediate"))
	if err != nil {
		return nil, fmt.Errorf("open relay lock: %w", err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open relay lock: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		_ = conn.Close()
		_ = db.Close()
		var e *sqlite.Error
		if errors.As(err, &e) && (e.Code()&0xff == sqlite3.SQLITE_BUSY || e.Code()&0xff == sqlite3.SQLITE_LOCKED) {
			return nil, nil
		}
		return nil, fmt.Errorf("take relay lock: %w", err)
	}
	return &relayLock{db: db, conn: conn}, nil
}

// release gives the lock up: closing the connection ends its transaction
// and with it the lock.
func (l *relayLock) release() {
	_ = l.conn.Close()
	_ = l.db.Close()
}
