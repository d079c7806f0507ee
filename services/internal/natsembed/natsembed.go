// Package natsembed runs a NATS server with JetStream inside the process, for
// `no8s dev` and for tests.
package natsembed

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start starts a JetStream-enabled server on 127.0.0.1:port (-1 picks a free
// port) that stores its streams in dir.
func Start(dir string, port int) (*server.Server, error) {
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	})
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
