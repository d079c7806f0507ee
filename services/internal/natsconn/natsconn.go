// Package natsconn opens the NATS connection a no8s service uses, with
// reconnects that never give up and logging of connection changes, as the
// service's NATS user when its credentials hold one.
package natsconn

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/platform/identity"
)

// Connect connects to url (comma-separated for a cluster) as name, with
// creds' NATS user when creds (nil: none) hold one. A refused user keeps
// being retried on reconnects: a renewed one may replace it on disk.
func Connect(url, name string, creds *identity.Credentials, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.IgnoreAuthErrorAbort(),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrl()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats", "err", err)
		}),
	}
	if creds != nil {
		user, err := creds.NATSOptions()
		if err != nil {
			return nil, err
		}
		opts = append(opts, user...)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats at %s: %w", url, identity.ExplainNATSError(err))
	}
	return nc, nil
}

// ConnectJetStream connects as Connect does and opens the JetStream API on
// the connection. The caller closes the connection.
func ConnectJetStream(url, name string, creds *identity.Credentials, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := Connect(url, name, creds, log)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream on %s: %w", url, err)
	}
	return nc, js, nil
}
