package store

import (
	"errors"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/store/storage"
)

// storeErrors maps each of the store's errors to the kind (hence the gRPC code,
// and the gateway's HTTP status) and machine code the API answers with. It
// is the only place the store's errors meet the wire's.
var storeErrors = []struct {
	err  error
	kind problem.Kind
	code string
}{
	{storage.ErrInvalid, problem.Invalid, problem.CodeInvalid},
	{storage.ErrUnknownType, problem.Invalid, problem.CodeUnknownType},
	{storage.ErrTooLarge, problem.TooLarge, problem.CodeTooLarge},
	{storage.ErrNotFound, problem.NotFound, problem.CodeNotFound},
	{storage.ErrNameTaken, problem.AlreadyExists, problem.CodeNameTaken},
	{storage.ErrConflict, problem.Conflict, problem.CodeConflict},
	{storage.ErrDeleting, problem.Conflict, problem.CodeDeleting},
	{storage.ErrFinalizerBlocked, problem.Conflict, problem.CodeFinalizerBlocked},
	{storage.ErrInUse, problem.Conflict, problem.CodeInUse},
	{storage.ErrSchemaChanged, problem.Conflict, problem.CodeSchemaChanged},
	{storage.ErrStaleEpoch, problem.Conflict, problem.CodeStaleEpoch},
	{storage.ErrLeaseHeld, problem.Conflict, problem.CodeLeaseHeld},
	{storage.ErrStaleDispatch, problem.FailedPrecondition, problem.CodeStaleDispatch},
	{storage.ErrUnavailable, problem.Unavailable, problem.CodeUnavailable},
	{storage.ErrNamespaceNotFound, problem.NotFound, problem.CodeNamespaceNotFound},
	{storage.ErrNamespaceTerminating, problem.Conflict, problem.CodeNamespaceTerminating},
	{storage.ErrNamespaceProtected, problem.Forbidden, problem.CodeNamespaceProtected},
	{storage.ErrNotPermitted, problem.Forbidden, problem.CodeDenied},
}

// toProblem translates a store error (storage.Error) into the shared error vocabulary.
// Other errors are returned as they are: problem errors made by the edge
// itself, context errors, and unexpected errors (which answer "internal
// error", their cause logged).
func toProblem(err error) error {
	var se *storage.Error
	if !errors.As(err, &se) {
		return err
	}
	for _, m := range storeErrors {
		if errors.Is(se.Err, m.err) {
			code := m.code
			if se.Code != "" {
				code = se.Code
			}
			pe := &problem.Error{Kind: m.kind, Code: code, Detail: se.Detail, Cause: se.Cause}
			for _, f := range se.Fields {
				pe.Fields = append(pe.Fields, problem.FieldError{Path: f.Path, Message: f.Message})
			}
			return pe
		}
	}
	return err
}

// toStatus is the store's gRPC edge for errors: every handler returns its
// errors through it.
func toStatus(err error) error { return grpcstatus.ToStatus(toProblem(err)) }
