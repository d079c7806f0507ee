// Package problem is the error vocabulary shared by every no8s service: a
// domain error with a kind, a machine-readable code, a human detail and the
// offending fields (JSON pointers). It knows no transport: package
// grpcstatus (problem/grpcstatus) carries it across gRPC at the services'
// edges, and the api-gateway maps kinds to HTTP statuses.
package problem

import (
	"errors"
	"fmt"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
)

// Kind classifies an error by what the caller should do about it.
type Kind int

// The kinds of error. Each maps to one gRPC code (grpcstatus) and one HTTP
// status (the gateway).
const (
	// Internal is a bug or an unexpected failure.
	Internal Kind = iota
	// Invalid is bad input: fix the request.
	Invalid
	// NotFound means the named object does not exist.
	NotFound
	// AlreadyExists means the name is taken.
	AlreadyExists
	// Conflict means the object changed or is in a state that refuses the
	// request (stale resource_version, deleting, still in use).
	Conflict
	// TooLarge means the request or the resulting object exceeds a size limit.
	TooLarge
	// Unavailable means a dependency is down; retry later.
	Unavailable
	// Forbidden means policy refused the request.
	Forbidden
	// Gone means the requested history has been compacted.
	Gone
	// FailedPrecondition means the request can never succeed in the state it
	// names (a work item superseded by a newer dispatch); do not retry it.
	FailedPrecondition
)

// Machine-readable codes carried in error bodies.
const (
	CodeInvalid          = "invalid"
	CodeValidation       = "validation_failed"
	CodeMalformedJSON    = "malformed_json"
	CodeUnknownType      = "unknown_type"
	CodeInvalidSchema    = "invalid_schema"
	CodeNotFound         = "not_found"
	CodeNameTaken        = "name_taken"
	CodeConflict         = "conflict"
	CodeDeleting         = "deleting"
	CodeInUse            = "in_use"
	CodeSchemaChanged    = "schema_changed"
	CodeTooLarge         = "too_large"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
	CodeFinalizerBlocked = "finalizer_not_allowed"
	// CodeDenied is an admission webhook's denial (Forbidden).
	CodeDenied = "denied"
	// CodeWebhookFailed is an admission webhook that failed under failure
	// policy Fail (Unavailable).
	CodeWebhookFailed = "webhook_failed"
	// CodeStaleEpoch is a write fenced by an epoch that is no longer the
	// current one (Conflict): a reconcile lease or the scheduler's leadership
	// has passed to someone else.
	CodeStaleEpoch = "stale_epoch"
	// CodeLeaseHeld is a reconcile lease held by another worker (Conflict).
	CodeLeaseHeld = "lease_held"
	// CodeStaleDispatch is a work item from a deposed scheduler or superseded
	// by a newer dispatch (FailedPrecondition).
	CodeStaleDispatch = "stale_dispatch"
	// CodeNotOwned is a worker's write to something that is not its own: a
	// finalizer other than its reconciler's, an annotation other than the
	// operation annotation (Forbidden).
	CodeNotOwned = "not_owned"
	// CodeNoReconciler is a resource type that no live reconciler serves
	// (Invalid).
	CodeNoReconciler = "no_reconciler"
	// CodeKeyReused is a queue-input message whose idempotency key was
	// used by another message with a different body (Conflict): the
	// first one wins.
	CodeKeyReused = "idempotency_key_reused"
	// CodeUndeliverable is a queue-input message given up unhandled after
	// its deliveries ran out (Unavailable): the gateways handling it kept
	// stopping.
	CodeUndeliverable = "undeliverable"
	// CodeNamespaceNotFound is a resource created in a namespace that does
	// not exist (NotFound).
	CodeNamespaceNotFound = "namespace_not_found"
	// CodeNamespaceTerminating is a resource (or the namespace itself)
	// created in a namespace that is being deleted (Conflict).
	CodeNamespaceTerminating = "namespace_terminating"
	// CodeNamespaceProtected is a request to delete the default namespace,
	// which always exists (Forbidden).
	CodeNamespaceProtected = "namespace_protected"
)

// FieldError names one offending field by JSON pointer (for example /spec/x):
// libs/api's, so that the naming rules' errors need no conversion.
type FieldError = names.FieldError

// Error is a domain error. Create one with New or the helpers below.
type Error struct {
	Kind   Kind
	Code   string
	Detail string
	Fields []FieldError
	// Cause, when set, is the error behind this one (a database that went
	// away): for the log of the service where it happened, never sent.
	Cause error
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

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

// New returns an error of the given kind and code.
func New(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// WithFields returns e with the field errors appended.
func (e *Error) WithFields(fields ...FieldError) *Error {
	e.Fields = append(e.Fields, fields...)
	return e
}

// Invalidf is an Invalid error with code CodeInvalid.
func Invalidf(format string, args ...any) *Error {
	return New(Invalid, CodeInvalid, format, args...)
}

// Field is an Invalid error about one field.
func Field(path, message string) *Error {
	return New(Invalid, CodeInvalid, "%s: %s", path, message).WithFields(FieldError{Path: path, Message: message})
}

// NotFoundf is a NotFound error.
func NotFoundf(format string, args ...any) *Error {
	return New(NotFound, CodeNotFound, format, args...)
}

// As returns the *Error in err's chain, or nil.
func As(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// KindOf returns the kind of err: Internal when err is not a *Error.
func KindOf(err error) Kind {
	if pe := As(err); pe != nil {
		return pe.Kind
	}
	return Internal
}
