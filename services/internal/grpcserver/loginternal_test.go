package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

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
