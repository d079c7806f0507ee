package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// Reasons the store puts in a google.rpc.ErrorInfo.
const (
	ReasonStaleEpoch    = "stale_epoch"
	ReasonLeaseHeld     = "lease_held"
	ReasonStaleDispatch = "stale_dispatch"
	ReasonIgnored       = "ignored"
	ReasonNotFound      = "not_found"
	// ReasonNotOwned: the worker's door refused a write outside a worker's
	// share (another reconciler's finalizer, an annotation other than
	// no8s.io/operation), with PermissionDenied.
	ReasonNotOwned = "not_owned"
)

// wrongAddress is added to an Unimplemented answer: the usual cause is a
// worker pointed at the store's main address instead of its worker
// address.
const wrongAddress = " (a worker talks to the store's worker address: is NO8S_STORE_ADDR the address of no8s-store --worker-listen, 127.0.0.1:7003 by default?)"

// Error is a refusal from the store: its gRPC code, the ErrorInfo reason and
// message, and the sdk sentinel it matches.
type Error struct {
	Op      string
	Code    codes.Code
	Reason  string
	Message string
	kind    error
}

func (e *Error) Error() string {
	s := e.Op + ": " + e.Code.String()
	if e.Reason != "" {
		s += "/" + e.Reason
	}
	return s + ": " + e.Message
}

// Is matches the sdk sentinel.
func (e *Error) Is(target error) bool { return e.kind != nil && target == e.kind }

// GRPCStatus keeps the status available to status.FromError.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// Wrap turns an error from a gRPC call into an *Error matching the sdk
// sentinels; context errors are returned as they are.
func Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	e := &Error{Op: op, Code: st.Code(), Message: st.Message()}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			e.Reason = info.GetReason()
		}
	}
	switch {
	case e.Reason == ReasonStaleEpoch:
		e.kind = wire.ErrStaleEpoch
	case e.Reason == ReasonLeaseHeld:
		e.kind = wire.ErrLeaseHeld
	case e.Reason == ReasonStaleDispatch:
		e.kind = wire.ErrStaleDispatch
	case e.Reason == ReasonIgnored:
		e.kind = wire.ErrIgnored
	case e.Code == codes.NotFound:
		e.kind = wire.ErrNotFound
	case e.Code == codes.Aborted:
		e.kind = wire.ErrConflict
	case e.Code == codes.Unavailable, e.Code == codes.DeadlineExceeded, e.Code == codes.ResourceExhausted:
		e.kind = wire.ErrUnavailable
	case e.Code == codes.Canceled:
		return fmt.Errorf("%s: %w", op, context.Canceled)
	case e.Code == codes.Unimplemented:
		e.Message += wrongAddress
	}
	return e
}
