package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/store/storage"
)

// TestStoreErrorsOnTheWire pins what each store error answers on the wire:
// the gRPC code and the machine code (the gateway derives the HTTP status
// from them), with the detail and the field paths unchanged.
func TestStoreErrorsOnTheWire(t *testing.T) {
	cases := []struct {
		err  error
		grpc codes.Code
		code string
	}{
		{storage.ErrInvalid, codes.InvalidArgument, problem.CodeInvalid},
		{storage.ErrUnknownType, codes.InvalidArgument, problem.CodeUnknownType},
		{storage.ErrTooLarge, codes.ResourceExhausted, problem.CodeTooLarge},
		{storage.ErrNotFound, codes.NotFound, problem.CodeNotFound},
		{storage.ErrNameTaken, codes.AlreadyExists, problem.CodeNameTaken},
		{storage.ErrConflict, codes.Aborted, problem.CodeConflict},
		{storage.ErrDeleting, codes.Aborted, problem.CodeDeleting},
		{storage.ErrFinalizerBlocked, codes.Aborted, problem.CodeFinalizerBlocked},
		{storage.ErrInUse, codes.Aborted, problem.CodeInUse},
		{storage.ErrSchemaChanged, codes.Aborted, problem.CodeSchemaChanged},
		{storage.ErrStaleEpoch, codes.Aborted, problem.CodeStaleEpoch},
		{storage.ErrLeaseHeld, codes.Aborted, problem.CodeLeaseHeld},
		{storage.ErrStaleDispatch, codes.FailedPrecondition, problem.CodeStaleDispatch},
		{storage.ErrUnavailable, codes.Unavailable, problem.CodeUnavailable},
		{storage.ErrNamespaceNotFound, codes.NotFound, problem.CodeNamespaceNotFound},
		{storage.ErrNamespaceTerminating, codes.Aborted, problem.CodeNamespaceTerminating},
		{storage.ErrNamespaceProtected, codes.PermissionDenied, problem.CodeNamespaceProtected},
		{storage.ErrNotPermitted, codes.PermissionDenied, problem.CodeDenied},
	}
	if len(cases) != len(storeErrors) {
		t.Fatalf("%d store errors mapped, %d pinned here", len(storeErrors), len(cases))
	}
	for _, c := range cases {
		in := &storage.Error{Err: c.err, Detail: "detail of " + c.err.Error(), Fields: []storage.FieldError{{Path: "/spec/a", Message: "bad"}}}
		// Wrapped on the way, as callers may.
		st, ok := status.FromError(toStatus(fmt.Errorf("call: %w", in)))
		if !ok || st.Code() != c.grpc {
			t.Errorf("%v: gRPC %v, want %v", c.err, st.Code(), c.grpc)
			continue
		}
		pe := problem.As(grpcstatus.FromStatus(st.Err()))
		if pe == nil || pe.Code != c.code || pe.Detail != in.Detail || len(pe.Fields) != 1 || pe.Fields[0] != (problem.FieldError{Path: "/spec/a", Message: "bad"}) {
			t.Errorf("%v: answered %#v, want code %s, detail and fields kept", c.err, pe, c.code)
		}
	}

	// A shared validator's own code is kept.
	st, _ := status.FromError(toStatus(&storage.Error{Err: storage.ErrInvalid, Code: problem.CodeMalformedJSON, Detail: "bad JSON"}))
	if pe := problem.As(grpcstatus.FromStatus(st.Err())); st.Code() != codes.InvalidArgument || pe == nil || pe.Code != problem.CodeMalformedJSON {
		t.Errorf("malformed JSON: %v %#v", st.Code(), pe)
	}
	// Anything else: context errors as such, the rest internal.
	if st, _ := status.FromError(toStatus(context.Canceled)); st.Code() != codes.Canceled {
		t.Errorf("canceled: %v", st.Code())
	}
	if st, _ := status.FromError(toStatus(errors.New("boom"))); st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Errorf("unexpected error: %v %q", st.Code(), st.Message())
	}
}

// TestHandlersTranslateThroughToStatus checks that every handler of the
// store answers errors through toStatus, the one mapping of the store's
// errors: grpcstatus.ToStatus alone would answer them as internal errors.
func TestHandlersTranslateThroughToStatus(t *testing.T) {
	files, err := filepath.Glob("handler*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "grpcstatus.ToStatus(") {
			t.Errorf("%s calls grpcstatus.ToStatus: use toStatus, which maps the store's errors", f)
		}
	}
}
