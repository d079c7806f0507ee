package composerun

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/grpcserver"
)

// The names the check reads from the file: the NATS service, the store's
// main port, the volume of the issued credentials and the NATS reader the
// identity service issues.
const (
	natsService   = "nats"
	natsPort      = 4222
	storeService  = "store"
	storePort     = 7001
	identityVol   = "identity"
	natsReaderDir = "reader-events"
)

// authenticated checks, from the client namespace, that what takes
// connections checks who connects: NATS refuses a client without a user
// and takes the NATS reader the identity service issued; the store's gRPC
// listener presents service/store, refuses TLS without a client
// certificate and answers a caller holding an issued certificate.
func (f *Flow) authenticated(ctx context.Context) error {
	natsAddr := net.JoinHostPort(f.Run.Addr(f.Targets.NATS), fmt.Sprint(natsPort))
	creds := f.Targets.Credentials
	dialer := &netnsDialer{r: f.Run, ctx: ctx}
	opts := []nats.Option{nats.SetCustomDialer(dialer), nats.Timeout(10 * time.Second), nats.MaxReconnects(0), nats.NoReconnect()}
	if nc, err := nats.Connect("nats://"+natsAddr, opts...); err == nil {
		nc.Close()
		return fmt.Errorf("NATS at %s took a client without a user: it must take only the CA's NATS users", natsAddr)
	} else if !isAuthError(err) {
		return fmt.Errorf("NATS at %s without a user: %w (want an authorization violation)", natsAddr, err)
	}
	nc, err := nats.Connect("nats://"+natsAddr, append(opts, nats.UserCredentials(filepath.Join(creds, natsReaderDir, identity.NATSCredsFile)))...)
	if err != nil {
		return fmt.Errorf("NATS at %s refused the issued reader %s: %w", natsAddr, natsReaderDir, err)
	}
	nc.Close()
	f.logf("NATS refused a client without a user and took the issued reader")

	storeAddr := net.JoinHostPort(f.Run.Addr(f.Targets.Store), fmt.Sprint(storePort))
	raw, err := f.Run.DialContext(ctx, "tcp", storeAddr)
	if err != nil {
		return err
	}
	tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the peer is checked below
	err = tc.HandshakeContext(ctx)
	var peer identity.ID
	if err == nil {
		// Not verified here (the client holds no trust): the identity
		// the store's certificate names is what is checked.
		if certs := tc.ConnectionState().PeerCertificates; len(certs) == 0 {
			err = errors.New("no certificate")
		} else {
			peer, err = identity.Parse(certs[0])
		}
	}
	tc.Close()
	if err != nil || !peer.Is(identity.Service, identity.Store) {
		return fmt.Errorf("store at %s: TLS presenting service/store: got %s, %v", storeAddr, peer, err)
	}
	dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return f.Run.DialContext(ctx, "tcp", addr) })
	anon, err := grpcserver.Dial(storeAddr, dial, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))) //nolint:gosec // refused either way
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = healthpb.NewHealthClient(anon).Check(cctx, &healthpb.HealthCheckRequest{})
	cancel()
	anon.Close()
	if err == nil {
		return fmt.Errorf("store at %s answered TLS without a client certificate: it must require one from the CA", storeAddr)
	}
	f.logf("store refused TLS without a client certificate: %v", firstLineOf(err.Error()))
	gw, err := identity.Load(filepath.Join(creds, "service-"+identity.Gateway))
	if err != nil {
		return fmt.Errorf("the issued gateway credential: %w", err)
	}
	conn, err := grpcserver.Dial(storeAddr, append(authz.DialOptions(gw, identity.Store), dial)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	cctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{}); err != nil {
		return fmt.Errorf("store at %s refused the issued service/gateway: %w", storeAddr, err)
	}
	return f.plainHTTPRefused(ctx)
}

// plainHTTPRefused checks, when the API is served over TLS, that the same
// address serves nothing over plain HTTP.
func (f *Flow) plainHTTPRefused(ctx context.Context) error {
	u, err := url.Parse(f.Targets.API)
	if err != nil || u.Scheme != "https" {
		return err
	}
	u.Scheme = "http"
	u.Path = "/api/v1/resources"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	// Without the token: it is not for a plain connection.
	plain := f.Run.HTTPClient()
	defer plain.CloseIdleConnections()
	resp, err := plain.Do(req)
	if err != nil {
		f.logf("the gateway at %s refused plain HTTP: %v", u.Host, firstLineOf(err.Error()))
		return nil
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 300 {
		return fmt.Errorf("the gateway at %s answered plain HTTP %d: it serves the API over TLS only", u.Host, resp.StatusCode)
	}
	f.logf("the gateway at %s answered plain HTTP %d", u.Host, resp.StatusCode)
	return nil
}

// isAuthError reports whether err is NATS's refusal of the client's
// credentials.
func isAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		strings.Contains(strings.ToLower(err.Error()), "authorization violation")
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// netnsDialer dials NATS from the client namespace.
type netnsDialer struct {
	r   *Run
	ctx context.Context
}

func (d *netnsDialer) Dial(network, address string) (net.Conn, error) {
	return d.r.DialContext(d.ctx, network, address)
}
