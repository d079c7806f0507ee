package authz

import (
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/no8s/no8s/libs/sdk/identity"
)

// ServerOptions are what a gRPC server of a process holding creds needs:
// TLS requiring a client certificate from the installation's CA, and the
// policy enforced in mode. Without creds (identities off) there are none:
// the server takes any caller, as a development setup on one machine does.
func ServerOptions(creds *identity.Credentials, mode Mode, log *slog.Logger) []grpc.ServerOption {
	if creds == nil {
		return nil
	}
	return append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(creds.ServerTLS()))}, New(mode, log).ServerOptions()...)
}

// DialOptions are what a client holding creds needs to call the service
// named server (identity.Store, …): TLS presenting creds' certificate and
// checking that the server is that service. Without creds there are none
// (grpcserver.Dial's plaintext).
func DialOptions(creds *identity.Credentials, server string) []grpc.DialOption {
	if creds == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientTLS(identity.ServiceID(server))))}
}
