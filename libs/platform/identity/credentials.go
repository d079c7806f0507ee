package identity

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The files of a credentials directory.
const (
	CertFile = "tls.crt" // the identity's certificate (and any intermediates)
	KeyFile  = "tls.key" // its private key
	CAFile   = "ca.crt"  // the CA certificates trusted for peers
)

// EnvDir is the environment variable naming a process's credentials
// directory (the services' --identity-dir, an SDK worker's only setting).
const EnvDir = "NO8S_IDENTITY_DIR"

// Credentials are an identity's certificate, key and trusted CAs, read from
// a directory and read again whenever one of its files changes, so that a
// renewed certificate or a rotated CA bundle takes effect on the next
// connection without a restart. A change that does not load (a half-written
// file, a key that does not match) keeps the previous material in use and
// is reported by Err until a good one replaces it.
type Credentials struct {
	dir string

	mu      sync.Mutex
	stamp   [3]fileStamp
	current *material
	lastErr error
}

// material is one loaded generation of a directory's files.
type material struct {
	cert tls.Certificate
	leaf *x509.Certificate
	id   ID
	pool *x509.CertPool
}

// fileStamp is what tells a changed file from an unchanged one.
type fileStamp struct {
	mod  time.Time
	size int64
}

// Load reads the credentials in dir (CertFile, KeyFile, CAFile). The
// certificate must carry a valid identity and chain to a CA of the bundle.
func Load(dir string) (*Credentials, error) {
	c := &Credentials{dir: dir}
	if _, err := c.material(); err != nil {
		return nil, err
	}
	return c, nil
}

// Dir is the directory the credentials are read from.
func (c *Credentials) Dir() string { return c.dir }

// ID is the identity of the certificate in use.
func (c *Credentials) ID() ID {
	m, _ := c.material()
	return m.id
}

// NotAfter is when the certificate in use expires.
func (c *Credentials) NotAfter() time.Time {
	m, _ := c.material()
	return m.leaf.NotAfter
}

// Err is why the files on disk are not in use, nil when they are.
func (c *Credentials) Err() error {
	_, err := c.material()
	return err
}

// material returns the material in use, loading the files again first when
// they changed. Its error is the last failed load's (the material returned
// is then the previous one, nil only before the first good load).
func (c *Credentials) material() (*material, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var stamp [3]fileStamp
	for i, name := range []string{CertFile, KeyFile, CAFile} {
		fi, err := os.Stat(filepath.Join(c.dir, name))
		if err != nil {
			c.lastErr = fmt.Errorf("identity credentials %s: %w", c.dir, err)
			return c.current, c.lastErr
		}
		stamp[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	if c.current != nil && stamp == c.stamp {
		return c.current, c.lastErr
	}
	m, err := readMaterial(c.dir)
	c.stamp = stamp
	if err != nil {
		c.lastErr = fmt.Errorf("identity credentials %s: %w", c.dir, err)
		return c.current, c.lastErr
	}
	c.current, c.lastErr = m, nil
	return m, nil
}

// readMaterial loads and checks one generation of dir's files.
func readMaterial(dir string) (*material, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err
	}
	leaf := cert.Leaf
	id, err := Parse(leaf)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s: no PEM certificate", CAFile)
	}
	if _, err := verify(leaf, cert.Certificate[1:], pool, time.Now()); err != nil {
		return nil, fmt.Errorf("%s does not verify against %s: %w", CertFile, CAFile, err)
	}
	return &material{cert: cert, leaf: leaf, id: id, pool: pool}, nil
}

// verify checks leaf against roots for either TLS role (every identity's
// certificate is both a client and a server certificate).
func verify(leaf *x509.Certificate, intermediates [][]byte, roots *x509.CertPool, now time.Time) ([][]*x509.Certificate, error) {
	inter := x509.NewCertPool()
	for _, der := range intermediates {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		inter.AddCert(c)
	}
	return leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
}

// ServerTLS is the TLS configuration of a listener that requires every
// client to present a certificate from a trusted CA. The peer's identity is
// PeerID of the connection state; authorising it is the caller's job.
func (c *Credentials) ServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m, err := c.material()
			if m == nil {
				return nil, err
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{m.cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    m.pool,
			}, nil
		},
	}
}

// GatewayTLS is the TLS configuration of a client holding c that calls the
// gateway's REST API at apiURL (registry-sync, the garbage collector, a
// reconciler writing its children): with c and an https URL, the gateway's
// service listener, the client presents c's certificate and checks that the
// server is service/gateway; the gateway then knows the caller, and the REST
// rules give it its rights. Otherwise (identities off: c is nil, or an http
// URL) it is nil, and the client is plain: anonymous, or with a token.
func (c *Credentials) GatewayTLS(apiURL string) *tls.Config {
	if c == nil {
		return nil
	}
	if u, err := url.Parse(apiURL); err != nil || u.Scheme != "https" {
		return nil
	}
	return c.ClientTLS(ServiceID(Gateway))
}

// ClientTLS is the TLS configuration of a connection to a no8s service:
// this identity's certificate is presented, and the server must present a
// certificate from a trusted CA carrying the identity server (host names
// are not checked: the identity is what is trusted).
func (c *Credentials) ClientTLS(server ID) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m, err := c.material()
			if m == nil {
				return nil, err
			}
			return &m.cert, nil
		},
		// The chain is verified below against the current bundle and the
		// server's identity, not against a host name.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			m, err := c.material()
			if m == nil {
				return err
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("identity: the server presented no certificate")
			}
			leaf := cs.PeerCertificates[0]
			var inter [][]byte
			for _, p := range cs.PeerCertificates[1:] {
				inter = append(inter, p.Raw)
			}
			if _, err := verify(leaf, inter, m.pool, time.Now()); err != nil {
				return fmt.Errorf("identity: server certificate: %w", err)
			}
			got, err := Parse(leaf)
			if err != nil {
				return fmt.Errorf("identity: server certificate: %w", err)
			}
			if !got.Is(server.Kind, server.Name) {
				return fmt.Errorf("identity: the server is %s, want %s", got, server)
			}
			return nil
		},
	}
}

// PeerID is the identity of the peer of a verified TLS connection: its
// certificate's, checked by the handshake against the trusted CAs.
func PeerID(cs tls.ConnectionState) (ID, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return ID{}, errors.New("identity: the peer presented no verified certificate")
	}
	return Parse(cs.PeerCertificates[0])
}
