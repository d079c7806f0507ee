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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
)

// TestLogInternalLogsTheCause shows that an Internal answer, whose cause the
// client never sees, is logged with the cause and the request id.
func TestLogInternalLogsTheCause(t *testing.T) {
	var buf bytes.Buffer
	interceptor := LogInternal(slog.New(slog.NewTextHandler(&buf, nil)))
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-request-id", "req-123"))
	_, err := interceptor(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"}, func(context.Context, any) (any, error) {
		return nil, grpcstatus.ToStatus(errors.New("postgres: relation \"nope\" does not exist"))
	})
	if status.Code(err) != codes.Internal || strings.Contains(status.Convert(err).Message(), "nope") {
		t.Fatalf("the client sees %v", err)
	}
	if got := buf.String(); !strings.Contains(got, `relation \"nope\" does not exist`) || !strings.Contains(got, "request_id=req-123") {
		t.Fatalf("log %q lacks the cause or the request id", got)
	}
}

// sqlError is a database error with a SQLSTATE, as pgx's PgError.
type sqlError struct{ code string }

func (e sqlError) Error() string    { return "terminating connection (SQLSTATE " + e.code + ")" }
func (e sqlError) SQLState() string { return e.code }

// An unavailable error with a cause (a database that went away) answers
// 503 unavailable with its detail, and is logged at WARN as "unavailable"
// with the SQLSTATE, never as an internal error.
func TestLogInternalLogsUnavailableWithItsSQLState(t *testing.T) {
	var buf bytes.Buffer
	interceptor := LogInternal(slog.New(slog.NewTextHandler(&buf, nil)))
	for _, tc := range []struct {
		cause error
		want  string
	}{
		{fmt.Errorf("commit: %w", sqlError{"57P01"}), "sqlstate=57P01"},
		{errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"), "sqlstate=none"},
	} {
		buf.Reset()
		pe := &problem.Error{Kind: problem.Unavailable, Code: problem.CodeUnavailable, Detail: "database unavailable", Cause: tc.cause}
		_, err := interceptor(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"}, func(context.Context, any) (any, error) {
			return nil, grpcstatus.ToStatus(pe)
		})
		if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "database unavailable" {
			t.Fatalf("the client sees %v", err)
		}
		if got := buf.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "msg=unavailable") || !strings.Contains(got, tc.want) || strings.Contains(got, "internal error") {
			t.Fatalf("log %q, want WARN unavailable with %s", got, tc.want)
		}
	}
}
