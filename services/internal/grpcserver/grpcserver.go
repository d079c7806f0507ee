// Package grpcserver runs a gRPC server with health checking and a graceful
// stop: on shutdown it reports NOT_SERVING, waits briefly so that clients move
// away, drains in-flight calls and hard-stops after a deadline.
package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// MaxMessageBytes bounds gRPC messages: a list page of up to 1,000
// resources must fit, so the bound is well above one resource's limit.
const MaxMessageBytes = 64 << 20

// New returns a server with the health service registered and the usual
// message limits.
func New(opts ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	opts = append([]grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}, opts...)
	srv := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	return srv, hs
}

// LogInternal logs every call answered with codes.Internal, with its cause
// (which the client does not see) and the caller's request id.
func LogInternal(log *slog.Logger) grpc.ServerOption {
	return grpc.ChainUnaryInterceptor(logInternal(log))
}

func logInternal(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil && status.Code(err) == codes.Internal {
			cause := err
			if c := errors.Unwrap(err); c != nil {
				cause = c
			}
			rid := ""
			if md, ok := metadata.FromIncomingContext(ctx); ok {
				if v := md.Get("x-request-id"); len(v) > 0 {
					rid = v[0]
				}
			}
			log.ErrorContext(ctx, "internal error", "method", info.FullMethod, "error", cause.Error(), "request_id", rid)
		}
		return resp, err
	}
}

// Serve serves on lis until ctx ends, then stops gracefully within grace.
func Serve(ctx context.Context, srv *grpc.Server, hs *health.Server, lis net.Listener, grace time.Duration) error {
	hs.Resume()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("grpc serve: %w", err)
		}
		return nil
	case <-ctx.Done():
	}
	hs.Shutdown()
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		srv.Stop()
		<-done
	}
	return nil
}

// Dial connects to a no8s gRPC service with the usual message limits.
func Dial(addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecureCreds()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}
