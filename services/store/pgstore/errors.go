package pgstore

// Database errors become the store's errors (storage.Error) here, at the
// boundary, and nowhere else.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/no8s/no8s/services/store/storage"
)

// translate maps database errors to the store's errors.
func translate(err error) error {
	if storage.Translated(err) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505": // unique_violation
			return storage.NewError(storage.ErrNameTaken, "name already taken")
		case "40001", "40P01": // serialization failure, deadlock
			return storage.NewError(storage.ErrConflict, "concurrent change, retry: %s", pgErr.Message)
		}
		if unavailableState(pgErr.Code) {
			return storage.Unavailable(err)
		}
		return fmt.Errorf("postgres: %w", err)
	}
	if pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) {
		return storage.Unavailable(err)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return storage.Unavailable(err)
	}
	// A connection that broke mid-call (the server went away): the
	// outcome of a write is unknown, and retrying with a resource_version
	// precondition is safe.
	var netErr net.Error
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &netErr) {
		return storage.Unavailable(err)
	}
	return err
}

// unavailableState reports whether a SQLSTATE means the database cannot
// serve this request now but may soon: the write's outcome is unknown or
// nothing was done, and the client retries (503 with Retry-After).
//
//   - class 08, connection exception (08000, 08003, 08006, 08001, 08004, ...)
//   - 57P01 admin shutdown (the session was terminated), 57P02 crash
//     shutdown, 57P03 cannot connect now (starting up or shutting down),
//     57P05 idle session timeout
//   - 53300 too many connections, 53400 configuration limit exceeded
//   - 25006 read-only transaction (a standby, or a primary being demoted
//     or fenced during a failover), 25P04 transaction timeout
//   - 55000 object not in prerequisite state (answered during the outage
//     probe of 2026-11-27, around the server's return)
//   - 58000 system error, 58030 I/O error
func unavailableState(code string) bool {
	if strings.HasPrefix(code, "08") {
		return true
	}
	switch code {
	case "57P01", "57P02", "57P03", "57P05", "53300", "53400", "25006", "25P04", "55000", "58000", "58030":
		return true
	}
	return false
}
