package grpcserver

import (
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// insecureCreds is plaintext transport: services talk over a private network
// (TLS between services is left to the deployment's mesh).
func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }
