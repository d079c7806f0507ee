package storage

// The store's errors. Every error a backend returns on purpose is an *Error
// wrapping one of the sentinels below (match with errors.Is, read the
// details with errors.As); anything else is unexpected (a bug, or a database
// failure the backend could not classify). Backends translate their
// database's errors into these at their boundary; the store's gRPC edge
// (services/store/errors.go) maps each sentinel to its gRPC code and machine
// code, in one table.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
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
	// ErrNamespaceNotFound: a resource's namespace does not exist.
	ErrNamespaceNotFound = errors.New("namespace not found")
	// ErrNamespaceTerminating: the namespace is being deleted; nothing new
	// is created in it (nor is it created again) until it is gone.
	ErrNamespaceTerminating = errors.New("namespace terminating")
	// ErrNamespaceProtected: the default namespace cannot be deleted.
	ErrNamespaceProtected = errors.New("namespace protected")
	// ErrNotPermitted: the reconciler identity making a worker call may not
	// act on the resource (an Actor's limits): nothing was written.
	ErrNotPermitted = errors.New("not permitted")
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
	// Cause, when set, is the backend's error behind Err (a database
	// that went away): for the service's log, never sent to clients.
	Cause error
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

// Unwrap returns the sentinel, and the cause when there is one.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// NewError returns an *Error wrapping kind.
func NewError(kind error, format string, args ...any) *Error {
	return &Error{Err: kind, Detail: fmt.Sprintf(format, args...)}
}

// WithFields returns e with the field errors appended.
func (e *Error) WithFields(fields ...FieldError) *Error {
	e.Fields = append(e.Fields, fields...)
	return e
}

// InvalidField is ErrInvalid about one field.
func InvalidField(path, message string) *Error {
	return NewError(ErrInvalid, "%s: %s", path, message).WithFields(FieldError{Path: path, Message: message})
}

// NotFound is ErrNotFound with a detail.
func NotFound(format string, args ...any) *Error { return NewError(ErrNotFound, format, args...) }

// StaleEpoch is ErrStaleEpoch with a detail.
func StaleEpoch(format string, args ...any) error {
	return NewError(ErrStaleEpoch, format, args...)
}

// Translated reports whether err needs no translation at a backend's
// boundary: nil, already a store error, or the caller's context ending.
func Translated(err error) bool {
	var se *Error
	return err == nil || errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Unavailable is ErrUnavailable caused by err, a database that cannot be
// reached.
func Unavailable(err error) error {
	return &Error{Err: ErrUnavailable, Detail: "database unavailable: " + err.Error(), Cause: err}
}

// Conflict is the ErrConflict of a write whose expected resource_version
// (what names the object, as "resource 7") is not the current one.
func Conflict(what string, current, expected int64) error {
	return NewError(ErrConflict,
		"%s has resource_version %d, not %d: it changed since you read it; read it again and retry", what, current, expected)
}

// UnknownType is ErrUnknownType about the named type.
func UnknownType(name, version string) error {
	return NewError(ErrUnknownType, "resource type %s/%s does not exist", name, version).
		WithFields(FieldError{Path: "/resource_type_name", Message: fmt.Sprintf("no resource type %s/%s", name, version)})
}

// SchemaChanged is ErrSchemaChanged about the named type.
func SchemaChanged(name, version string) error {
	return NewError(ErrSchemaChanged, "the schema of %s/%s changed during admission; retry", name, version)
}

// EventTooLarge is ErrTooLarge for a resource whose document, n bytes, an
// event cannot carry.
func EventTooLarge(n int) error {
	return NewError(ErrTooLarge, "the resource would be %d bytes, more than the %d an event can carry", n, names.MaxEventBytes)
}

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
