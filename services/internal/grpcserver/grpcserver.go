// Package grpcserver runs a gRPC server with the standard health service
// (grpc.health.v1.Health, overall and per service), server reflection (so
// that grpcurl list, describe and call work without the .proto files) and a
// graceful stop: on shutdown it reports NOT_SERVING, waits briefly so that
// clients move away, drains in-flight calls and hard-stops after a deadline.
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
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
)

// MaxMessageBytes bounds gRPC messages: a list page of up to 1,000
// resources must fit, so the bound is well above one resource's limit.
const MaxMessageBytes = 64 << 20

// StreamWorkers is how many goroutines of a server run its calls; calls
// beyond them get a goroutine of their own, as without workers.
const StreamWorkers = 64

// New returns a server with the health service and server reflection
// registered, the usual message limits, and the cause of every internal
// error logged to log (the client gets only "internal error"). Reflection
// lists whatever services are registered on srv when a client asks, so the
// caller registers its own services after New.
func New(log *slog.Logger, opts ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	opts = append([]grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.ChainUnaryInterceptor(LogInternal(log)),
		// Calls run on long-lived goroutines whose stacks have grown
		// already, rather than a fresh goroutine per call that grows
		// (copies) its stack again each time: 8-12% of the store's and
		// admission's CPU under load (docs/design/performance.md).
		grpc.NumStreamWorkers(StreamWorkers)}, opts...)
	srv := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return srv, hs
}

// Serve serves on lis until ctx ends, then stops gracefully within grace.
// Health reports SERVING for the server ("") and for every service
// registered on srv by name (grpc.health.v1.Health/Check with
// {"service": "no8s.store.v1.StoreService"}), and NOT_SERVING for all of
// them once ctx ends.
func Serve(ctx context.Context, srv *grpc.Server, hs *health.Server, lis net.Listener, grace time.Duration) error {
	for name := range srv.GetServiceInfo() {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
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

// Dial connects to a no8s gRPC service with the usual message limits and
// opts (the client metrics' interceptors, metrics.GRPC.DialOptions).
func Dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecureCreds()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// LogInternal logs, with the method and the caller's request id, the cause
// of an internal error that a handler answers through grpcstatus.ToStatus (the
// client gets only "internal error"), any other Internal status, and any
// error that is not a gRPC status at all.
func LogInternal(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err == nil {
			return resp, nil
		}
		st, isStatus := status.FromError(err)
		switch cause := grpcstatus.InternalCause(err); {
		case cause != nil:
			log.ErrorContext(ctx, "internal error", "method", info.FullMethod, "error", cause, "request_id", requestID(ctx))
		case grpcstatus.UnavailableCause(err) != nil:
			cause := grpcstatus.UnavailableCause(err)
			log.WarnContext(ctx, "unavailable", "method", info.FullMethod, "sqlstate", sqlState(cause), "error", cause, "request_id", requestID(ctx))
		case !isStatus:
			log.ErrorContext(ctx, "handler error without a status", "method", info.FullMethod, "error", err, "request_id", requestID(ctx))
		case st.Code() == codes.Internal:
			log.ErrorContext(ctx, "internal error", "method", info.FullMethod, "error", err, "request_id", requestID(ctx))
		}
		return resp, err
	}
}

// requestID is the request id the caller sent in the x-request-id metadata.
// sqlState is the SQLSTATE of a database error in err's chain (pgx's
// PgError has the method), "none" when there is none (a connection refused
// or cut).
func sqlState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return "none"
}

func requestID(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("x-request-id"); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}
