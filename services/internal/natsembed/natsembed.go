// Package natsembed runs a NATS server with JetStream inside the process, for
// `no8s dev` and for tests.
package natsembed

import (
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/no8s/no8s/services/internal/identityca"
)

// Start starts a JetStream-enabled server on 127.0.0.1:port (-1 picks a free
// port) that stores its streams in dir. With auth, only the users the
// installation's CA issued may connect, each with its identity's
// permissions (authz.NATS); without, anyone may.
func Start(dir string, port int, auth *identityca.NATSServer) (*server.Server, error) {
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	}
	if auth != nil {
		resolver := &server.MemAccResolver{}
		for pub, token := range auth.Accounts {
			if err := resolver.Store(pub, token); err != nil {
				return nil, fmt.Errorf("configure nats server: account %s: %w", pub, err)
			}
		}
		opts.TrustedOperators = []*jwt.OperatorClaims{auth.Operator}
		opts.SystemAccount = auth.SystemAccount
		opts.AccountResolver = resolver
		opts.MaxControlLine = identityca.NATSMaxControlLine
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("configure nats server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats server on port %d not ready within 10s", port)
	}
	return s, nil
}
