package pgstore

// Database errors become the store's errors (storage.Error) here, at the
// boundary, and nowhere else.

import (
	"errors"
	"fmt"
	"io"
	"net"

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
		case "57P01", "57P02", "57P03", "08000", "08003", "08006": // shutdown, connection
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
