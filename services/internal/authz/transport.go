package authz

import (
	"log/slog"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/tracing"
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

// GatewayHTTPClient is the HTTP client of a process holding creds that
// writes through the gateway's REST API at apiURL (registry-sync, the
// tenant reconciler). With creds and an https URL (the gateway's service
// listener), TLS presents creds' certificate and checks that the server is
// service/gateway (the rule is identity.Credentials.GatewayTLS, which SDK
// workers use too): the gateway then knows the caller, and the REST rules
// give it its rights. Otherwise (identities off, or an http URL) the client
// is plain and the gateway takes its requests as anonymous.
func GatewayHTTPClient(creds *identity.Credentials, apiURL string) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, TLSClientConfig: creds.GatewayTLS(apiURL)}
	// A call made inside a span (a reconcile attempt's, a sync's) carries
	// its trace: the gateway's request span joins it.
	return &http.Client{Transport: tracing.Propagating(tr)}
}
