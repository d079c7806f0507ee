package store

import (
	"errors"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/store/pgstore"
)

// storeErrors maps each of pgstore's errors to the kind (hence the gRPC code,
// and the gateway's HTTP status) and machine code the API answers with. It
// is the only place the store's errors meet the wire's.
var storeErrors = []struct {
	err  error
	kind problem.Kind
	code string
}{
	{pgstore.ErrInvalid, problem.Invalid, problem.CodeInvalid},
	{pgstore.ErrUnknownType, problem.Invalid, problem.CodeUnknownType},
	{pgstore.ErrTooLarge, problem.TooLarge, problem.CodeTooLarge},
	{pgstore.ErrNotFound, problem.NotFound, problem.CodeNotFound},
	{pgstore.ErrNameTaken, problem.AlreadyExists, problem.CodeNameTaken},
	{pgstore.ErrConflict, problem.Conflict, problem.CodeConflict},
	{pgstore.ErrDeleting, problem.Conflict, problem.CodeDeleting},
	{pgstore.ErrFinalizerBlocked, problem.Conflict, problem.CodeFinalizerBlocked},
	{pgstore.ErrInUse, problem.Conflict, problem.CodeInUse},
	{pgstore.ErrSchemaChanged, problem.Conflict, problem.CodeSchemaChanged},
	{pgstore.ErrStaleEpoch, problem.Conflict, problem.CodeStaleEpoch},
	{pgstore.ErrLeaseHeld, problem.Conflict, problem.CodeLeaseHeld},
	{pgstore.ErrStaleDispatch, problem.FailedPrecondition, problem.CodeStaleDispatch},
	{pgstore.ErrUnavailable, problem.Unavailable, problem.CodeUnavailable},
}

// toProblem translates a pgstore error into the shared error vocabulary.
// Other errors are returned as they are: problem errors made by the edge
// itself, context errors, and unexpected errors (which answer "internal
// error", their cause logged).
func toProblem(err error) error {
	var se *pgstore.Error
	if !errors.As(err, &se) {
		return err
	}
	for _, m := range storeErrors {
		if errors.Is(se.Err, m.err) {
			code := m.code
			if se.Code != "" {
				code = se.Code
			}
			pe := &problem.Error{Kind: m.kind, Code: code, Detail: se.Detail}
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
