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
	"github.com/no8s/no8s/libs/client"
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
// The error codes are the public API's, defined with its document types in
// libs/client.
const (
	CodeInvalid              = client.CodeInvalid
	CodeValidation           = client.CodeValidationFailed
	CodeMalformedJSON        = client.CodeMalformedJSON
	CodeUnknownType          = client.CodeUnknownType
	CodeInvalidSchema        = client.CodeInvalidSchema
	CodeNotFound             = client.CodeNotFound
	CodeNameTaken            = client.CodeNameTaken
	CodeConflict             = client.CodeConflict
	CodeDeleting             = client.CodeDeleting
	CodeInUse                = client.CodeInUse
	CodeSchemaChanged        = client.CodeSchemaChanged
	CodeTooLarge             = client.CodeTooLarge
	CodeUnavailable          = client.CodeUnavailable
	CodeInternal             = client.CodeInternal
	CodeFinalizerBlocked     = client.CodeFinalizerBlocked
	CodeDenied               = client.CodeDenied
	CodeWebhookFailed        = client.CodeWebhookFailed
	CodeStaleEpoch           = client.CodeStaleEpoch
	CodeLeaseHeld            = client.CodeLeaseHeld
	CodeStaleDispatch        = client.CodeStaleDispatch
	CodeNotOwned             = client.CodeNotOwned
	CodeNoReconciler         = client.CodeNoReconciler
	CodeKeyReused            = client.CodeKeyReused
	CodeUndeliverable        = client.CodeUndeliverable
	CodeNamespaceNotFound    = client.CodeNamespaceNotFound
	CodeNamespaceTerminating = client.CodeNamespaceTerminating
	CodeNamespaceProtected   = client.CodeNamespaceProtected
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
