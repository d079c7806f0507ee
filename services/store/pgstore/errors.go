package pgstore

// The store's errors. Every error the store returns on purpose is an *Error
// wrapping one of the sentinels below (match with errors.Is, read the
// details with errors.As); anything else is unexpected (a bug, or a database
// failure the store could not classify). The SQL layer knows no transport:
// the store's gRPC edge (services/store/errors.go) maps each sentinel to its
// gRPC code and machine code, in one table.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// What went wrong, one sentinel per answer a caller can act on.
var (
	// ErrInvalid: bad input; Fields name the offending fields.
	ErrInvalid = errors.New("invalid")
	// ErrUnknownType: the resource's type does not exist.
	ErrUnknownType = errors.New("unknown resource type")
	// ErrTooLarge: the input or the resulting object exceeds a size limit.
	ErrTooLarge = errors.New("too large")
	// ErrNotFound: the named object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNameTaken: the name is taken (a unique violation).
	ErrNameTaken = errors.New("name taken")
	// ErrConflict: the object changed since the caller read it (a stale
	// resource_version), or a concurrent transaction won; read and retry.
	ErrConflict = errors.New("conflict")
	// ErrDeleting: the resource is being deleted; its spec can no longer
	// change.
	ErrDeleting = errors.New("deleting")
	// ErrFinalizerBlocked: a finalizer cannot be added while deleting.
	ErrFinalizerBlocked = errors.New("finalizer not allowed")
	// ErrInUse: a type that still has resources.
	ErrInUse = errors.New("in use")
	// ErrSchemaChanged: the type's schema changed since admission; admit
	// again.
	ErrSchemaChanged = errors.New("schema changed")
	// ErrStaleEpoch: a write fenced by a lease or leader epoch that is no
	// longer current.
	ErrStaleEpoch = errors.New("stale epoch")
	// ErrLeaseHeld: another worker holds the reconcile lease.
	ErrLeaseHeld = errors.New("lease held")
	// ErrStaleDispatch: a work item of a deposed scheduler or superseded by
	// a newer dispatch; it can never succeed.
	ErrStaleDispatch = errors.New("stale dispatch")
	// ErrUnavailable: the database is unreachable; retry later.
	ErrUnavailable = errors.New("unavailable")
)

// FieldError names one offending field by JSON pointer (/spec/size).
type FieldError struct {
	Path    string
	Message string
}

// Error is an error the store returns on purpose.
type Error struct {
	// Err is one of the sentinels above.
	Err error
	// Code, when set, is a more precise machine code than Err's, given by a
	// shared validator (malformed_json).
	Code   string
	Detail string
	Fields []FieldError
}

// Error implements error.
func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return e.Detail
	}
	parts := make([]string, 0, len(e.Fields))
	for _, f := range e.Fields {
		parts = append(parts, f.Path+": "+f.Message)
	}
	return e.Detail + " (" + strings.Join(parts, "; ") + ")"
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// newError returns an *Error wrapping kind.
func newError(kind error, format string, args ...any) *Error {
	return &Error{Err: kind, Detail: fmt.Sprintf(format, args...)}
}

// withFields returns e with the field errors appended.
func (e *Error) withFields(fields ...FieldError) *Error {
	e.Fields = append(e.Fields, fields...)
	return e
}

// invalidField is ErrInvalid about one field.
func invalidField(path, message string) *Error {
	return newError(ErrInvalid, "%s: %s", path, message).withFields(FieldError{Path: path, Message: message})
}

func notFound(format string, args ...any) *Error { return newError(ErrNotFound, format, args...) }

// fieldErr is the shape of a shared validator's field error
// (services/internal/resource, strictjson, webhookconf).
type fieldErr = struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// fieldsOf converts a shared validator's field errors.
func fieldsOf[F ~fieldErr](in []F) []FieldError {
	out := make([]FieldError, 0, len(in))
	for _, f := range in {
		out = append(out, FieldError{Path: fieldErr(f).Path, Message: fieldErr(f).Message})
	}
	return out
}

// fieldOf converts one shared validator's field error (nil: none).
func fieldOf[F ~fieldErr](f *F) []FieldError {
	if f == nil {
		return nil
	}
	return fieldsOf([]F{*f})
}

// invalidOf converts the error of a shared JSON validator
// (resource.CompactObject, strictjson.Check), keeping its machine code. Its
// error is always about bad input.
func invalidOf[F ~fieldErr](code, detail string, fields []F) *Error {
	return &Error{Err: ErrInvalid, Code: code, Detail: detail, Fields: fieldsOf(fields)}
}

// translate maps database errors to the store's errors.
func translate(err error) error {
	var se *Error
	if err == nil || errors.As(err, &se) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505": // unique_violation
			return newError(ErrNameTaken, "name already taken")
		case "40001", "40P01": // serialization failure, deadlock
			return newError(ErrConflict, "concurrent change, retry: %s", pgErr.Message)
		case "57P01", "57P02", "57P03", "08000", "08003", "08006": // shutdown, connection
			return unavailable(err)
		}
		return fmt.Errorf("postgres: %w", err)
	}
	if pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) {
		return unavailable(err)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return unavailable(err)
	}
	// A connection that broke mid-call (the server went away): the
	// outcome of a write is unknown, and retrying with a resource_version
	// precondition is safe.
	var netErr net.Error
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &netErr) {
		return unavailable(err)
	}
	return err
}

func unavailable(err error) error {
	return &Error{Err: ErrUnavailable, Detail: "database unavailable: " + err.Error()}
}
