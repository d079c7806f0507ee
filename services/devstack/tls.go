package devstack

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

// The layout of `no8s dev --tls` in the data directory: TLSDirName holds
// the REST API's certificate, its key and the CA file clients trust
// (identity.CertFile, identity.KeyFile, identity.CAFile: tls.crt, tls.key,
// ca.crt), and TLSDirName/CADirName the CA that issued it. It is not the
// identities' CA: a client that trusts it trusts no service identity.
const TLSDirName = "tls"

// Lifetimes of the REST API's certificate: issued for a year, again at a
// start within 30 days of its end.
const (
	apiCertValidity    = 365 * 24 * time.Hour
	apiCertRenewBefore = 30 * 24 * time.Hour
)

// apiCertHosts are the names the REST API's certificate is for.
func apiCertHosts() []string { return []string{"localhost", "127.0.0.1", "::1"} }

// TLSDir is where `no8s dev --tls` keeps the REST API's certificate.
func (c Config) TLSDir() string { return filepath.Join(c.DataDir, TLSDirName) }

// TLSCAFile is the CA certificate a client of `no8s dev --tls` trusts
// (curl --cacert, the CLI's ca-file).
func (c Config) TLSCAFile() string { return filepath.Join(c.TLSDir(), identity.CAFile) }

// ensureAPICert makes sure of the REST API's CA and certificate in TLSDir:
// the CA is created at first start, and the certificate issued when it is
// missing, does not load, does not chain to the CA or ends within
// apiCertRenewBefore. It returns the certificate and key files.
func ensureAPICert(cfg Config, now time.Time, log *slog.Logger) (certFile, keyFile string, err error) {
	dir := cfg.TLSDir()
	ca, created, err := identityca.LoadOrCreate(filepath.Join(dir, CADirName), now)
	if err != nil {
		return "", "", fmt.Errorf("no8s dev --tls: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, identity.CertFile), filepath.Join(dir, identity.KeyFile)
	why := apiCertStale(certFile, keyFile, ca, now)
	if why == "" {
		return certFile, keyFile, nil
	}
	certPEM, keyPEM, err := ca.IssueServer(now, apiCertValidity, apiCertHosts()...)
	if err != nil {
		return "", "", fmt.Errorf("no8s dev --tls: %w", err)
	}
	if err := identityca.WriteCredentials(dir, certPEM, keyPEM, ca.Bundle()); err != nil {
		return "", "", fmt.Errorf("no8s dev --tls: %w", err)
	}
	log.Info("issued the REST API's TLS certificate", "why", why, "ca_created", created, "ca_file", cfg.TLSCAFile(), "cert", certFile)
	return certFile, keyFile, nil
}

// apiCertStale is why the certificate in certFile must be issued again, ""
// when it need not.
func apiCertStale(certFile, keyFile string, ca *identityca.CA, now time.Time) string {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if errors.Is(err, os.ErrNotExist) {
		return "missing"
	}
	if err != nil {
		return "unreadable: " + err.Error()
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost", CurrentTime: now}); err != nil {
		return "does not verify: " + err.Error()
	}
	if pair.Leaf.NotAfter.Before(now.Add(apiCertRenewBefore)) {
		return "expires soon"
	}
	return ""
}

// apiHTTPClient is the stack's own client of its REST API (the readiness
// wait): trusting the CA file with --tls.
func apiHTTPClient(cfg Config) (*http.Client, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	if !cfg.TLS {
		return c, nil
	}
	pem, err := os.ReadFile(cfg.TLSCAFile())
	if err != nil {
		return nil, fmt.Errorf("no8s dev --tls: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no8s dev --tls: %s: no PEM certificate", cfg.TLSCAFile())
	}
	c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	return c, nil
}
