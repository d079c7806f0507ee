// Package grpcstatus carries problem errors across gRPC: a *problem.Error
// becomes a status with ErrorInfo (the machine code) and BadRequest (field
// paths) details, and back. Services use it at their gRPC edges; package
// problem itself knows no transport.
package grpcstatus

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/no8s/no8s/services/internal/problem"
)

// errorDomain tags the ErrorInfo details that no8s services attach.
const errorDomain = "no8s.io"

var kindCodes = map[problem.Kind]codes.Code{
	problem.Internal:           codes.Internal,
	problem.Invalid:            codes.InvalidArgument,
	problem.NotFound:           codes.NotFound,
	problem.AlreadyExists:      codes.AlreadyExists,
	problem.Conflict:           codes.Aborted,
	problem.TooLarge:           codes.ResourceExhausted,
	problem.Unavailable:        codes.Unavailable,
	problem.Forbidden:          codes.PermissionDenied,
	problem.Gone:               codes.OutOfRange,
	problem.FailedPrecondition: codes.FailedPrecondition,
}

// ToStatus turns err into a gRPC status error carrying kind, code and fields.
// Context errors become Canceled or DeadlineExceeded; anything that is not a
// *problem.Error becomes Internal with a generic message: the cause is not sent, but
// stays attached for the server's log (InternalCause; grpcserver logs it).
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && problem.As(err) == nil {
		return err
	}
	pe := problem.As(err)
	if pe == nil {
		switch {
		case errors.Is(err, context.Canceled):
			return status.Error(codes.Canceled, err.Error())
		case errors.Is(err, context.DeadlineExceeded):
			return status.Error(codes.DeadlineExceeded, err.Error())
		}
		st := status.New(codes.Internal, "internal error")
		if withDetails, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: problem.CodeInternal, Domain: errorDomain}); derr == nil {
			st = withDetails
		}
		return &internalError{st: st, cause: err}
	}
	st := status.New(kindCodes[pe.Kind], pe.Detail)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: pe.Code, Domain: errorDomain}}
	if len(pe.Fields) > 0 {
		br := &errdetails.BadRequest{}
		for _, f := range pe.Fields {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: f.Path, Description: f.Message})
		}
		details = append(details, br)
	}
	if withDetails, derr := st.WithDetails(details...); derr == nil {
		st = withDetails
	}
	if pe.Kind == problem.Internal || (pe.Kind == problem.Unavailable && pe.Cause != nil) {
		return &internalError{st: st, cause: err}
	}
	return st.Err()
}

// FromStatus turns a gRPC error from another no8s service back into a *problem.Error.
// Transport failures (Unavailable without details, DeadlineExceeded) become
// Unavailable so the gateway answers 503.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	pe := &problem.Error{Detail: st.Message()}
	pe.Kind = problem.Internal
	for k, c := range kindCodes {
		if c == st.Code() {
			pe.Kind = k
		}
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded:
		pe.Kind = problem.Unavailable
		pe.Code = problem.CodeUnavailable
	case codes.Canceled:
		return context.Canceled
	}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == errorDomain {
				pe.Code = d.GetReason()
			}
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				pe.Fields = append(pe.Fields, problem.FieldError{Path: v.GetField(), Message: v.GetDescription()})
			}
		}
	}
	if pe.Code == "" {
		pe.Code = problem.CodeInternal
		if pe.Kind == problem.Unavailable {
			pe.Code = problem.CodeUnavailable
		}
	}
	return pe
}

// internalError is the status of an error that is not a *problem.Error (clients get
// only "internal error"), or of an unavailable one with a cause: the cause
// stays with it for the server's log.
type internalError struct {
	st    *status.Status
	cause error
}

func (e *internalError) Error() string { return e.st.Err().Error() }

// GRPCStatus is what gRPC sends.
func (e *internalError) GRPCStatus() *status.Status { return e.st }

// Unwrap returns the cause.
func (e *internalError) Unwrap() error { return e.cause }

// InternalCause returns the cause that ToStatus kept out of an internal
// error's status, or nil when err is not such an error.
func InternalCause(err error) error {
	var ie *internalError
	if errors.As(err, &ie) && ie.st.Code() == codes.Internal {
		return ie.cause
	}
	return nil
}

// UnavailableCause returns the cause that ToStatus kept out of an
// unavailable error's status (a database that went away), or nil.
func UnavailableCause(err error) error {
	var ie *internalError
	if errors.As(err, &ie) && ie.st.Code() == codes.Unavailable {
		return ie.cause
	}
	return nil
}
