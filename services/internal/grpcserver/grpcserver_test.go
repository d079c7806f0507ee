package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
)

// An internal error reaches the client as "internal error" only, and its
// cause is logged where it happened.
func TestLogInternal(t *testing.T) {
	var buf bytes.Buffer
	icpt := LogInternal(slog.New(slog.NewTextHandler(&buf, nil)))
	info := &grpc.UnaryServerInfo{FullMethod: "/no8s.store.v1.StoreService/CreateResource"}
	cause := fmt.Errorf("insert resource: %w", errors.New(`ERROR: unsupported Unicode escape sequence (SQLSTATE 22P05)`))
	_, err := icpt(t.Context(), nil, info, func(context.Context, any) (any, error) { return nil, grpcstatus.ToStatus(cause) })
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Internal || st.Message() != "internal error" || strings.Contains(st.String(), "SQLSTATE") {
		t.Fatalf("status %v", st)
	}
	if pe := problem.As(grpcstatus.FromStatus(err)); pe == nil || pe.Kind != problem.Internal || pe.Code != problem.CodeInternal {
		t.Fatalf("the client reads %#v", pe)
	}
	if log := buf.String(); !strings.Contains(log, "SQLSTATE 22P05") || !strings.Contains(log, "CreateResource") {
		t.Fatalf("log %q", log)
	}

	// Domain errors are answered as they are, without a log line.
	buf.Reset()
	_, err = icpt(t.Context(), nil, info, func(context.Context, any) (any, error) {
		return nil, grpcstatus.ToStatus(problem.Field("/spec/s", "NUL characters are not allowed"))
	})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || buf.Len() != 0 {
		t.Fatalf("status %v, log %q", st, buf.String())
	}
}
