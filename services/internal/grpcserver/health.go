package grpcserver

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// CheckHealth asks each connection's health service for overall status and
// returns an error naming the first that is not serving.
func CheckHealth(ctx context.Context, conns map[string]*grpc.ClientConn) error {
	for name, c := range conns {
		resp, err := healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("%s: %s", name, resp.GetStatus())
		}
	}
	return nil
}
