// Package identityca is an installation's certificate authority: it creates
// the CA, issues the identities of libs/platform/identity, writes them as
// credentials directories, and rotates the CA with an overlap.
//
// Revocation is by short lifetimes: a certificate lives 30 days unless asked
// otherwise, and processes read renewed files without a restart.
//
// Layout of a CA directory:
//
//	ca.crt      the CA certificates peers trust (the bundle: during a
//	            rotation, the new CA first and the old one after it)
//	ca.key      the private key of the CA that issues (the first of ca.crt)
//	claims.json the types each reconciler was issued, so that no two
//	            reconcilers hold certificates for one type (ClaimTypes)
//	nats.json   the NATS operator's and accounts' keys, once NATS checks
//	            identities (EnableNATS): every identity issued then also
//	            gets a NATS user (NATSKeysFile)
package identityca

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
)

// The files of a CA directory.
const (
	BundleFile = "ca.crt"
	KeyFile    = "ca.key"
)

// Default lifetimes.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultLeafValidity = 30 * 24 * time.Hour
)

// CA issues identities.
type CA struct {
	cert   *x509.Certificate
	key    crypto.Signer
	bundle []byte // PEM of every CA peers trust, the issuing one first
	// nats are the NATS keys; nil for a CA directory from before NATS
	// users were issued.
	nats *natsKeys
}

// New creates a CA valid from now for validity.
func New(now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("no8s CA %s", now.UTC().Format("2006-01-02T15:04:05Z"))},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, bundle: pemBlock("CERTIFICATE", der)}, nil
}

// Load reads the CA in dir.
func Load(dir string) (*CA, error) {
	bundle, err := os.ReadFile(filepath.Join(dir, BundleFile))
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	block, _ := pem.Decode(bundle)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("CA: %s: no PEM certificate", filepath.Join(dir, BundleFile))
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA: %s: %w", filepath.Join(dir, BundleFile), err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("CA: %s: no PEM key", filepath.Join(dir, KeyFile))
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA: %s: %w", filepath.Join(dir, KeyFile), err)
	}
	key, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA: %s: not a signing key", filepath.Join(dir, KeyFile))
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return nil, fmt.Errorf("CA: %s does not belong to the first certificate of %s", KeyFile, BundleFile)
	}
	nk, err := loadNATSKeys(dir)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, bundle: bundle, nats: nk}, nil
}

// LoadOrCreate loads the CA in dir, creating it first when dir has none
// (as no8s dev does at its first start).
func LoadOrCreate(dir string, now time.Time) (*CA, bool, error) {
	if _, err := os.Stat(filepath.Join(dir, KeyFile)); err == nil {
		ca, err := Load(dir)
		return ca, false, err
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("CA: %w", err)
	}
	ca, err := New(now, DefaultCAValidity)
	if err != nil {
		return nil, false, err
	}
	if err := ca.Save(dir); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

// Save writes the CA to dir (the key readable by its owner only).
func (ca *CA) Save(dir string) error {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return fmt.Errorf("CA key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("CA: %w", err)
	}
	if err := writeFile(filepath.Join(dir, KeyFile), pemBlock("PRIVATE KEY", der), 0o600); err != nil {
		return err
	}
	if ca.nats != nil {
		if err := ca.nats.save(dir); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(dir, BundleFile), ca.bundle, 0o644)
}

// Bundle is the PEM of the CAs peers trust, the issuing one first.
func (ca *CA) Bundle() []byte { return bytes.Clone(ca.bundle) }

// Certificate is the issuing CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Rotate returns a new CA whose bundle holds the new CA first and then
// every CA of ca's bundle that has not expired at now, so that peers trust
// both while the identities are issued again from the new one. Dropping
// the old CA later is Retire.
func (ca *CA) Rotate(now time.Time, validity time.Duration) (*CA, error) {
	next, err := New(now, validity)
	if err != nil {
		return nil, err
	}
	// The NATS keys stay: servers keep trusting the users already issued.
	next.nats = ca.nats
	old, err := certificates(ca.bundle)
	if err != nil {
		return nil, err
	}
	for _, c := range old {
		if now.Before(c.NotAfter) {
			next.bundle = append(next.bundle, pemBlock("CERTIFICATE", c.Raw)...)
		}
	}
	return next, nil
}

// Retire returns ca with a bundle of the issuing CA alone: the end of a
// rotation, once every identity was issued again.
func (ca *CA) Retire() *CA {
	return &CA{cert: ca.cert, key: ca.key, bundle: pemBlock("CERTIFICATE", ca.cert.Raw), nats: ca.nats}
}

// Issue creates a certificate and key for id, valid from now for validity,
// usable both as a TLS client and as a TLS server certificate. hosts (names
// or IP addresses) are added as DNS or IP subject alternative names for
// clients that check host names (tools such as grpcurl); no8s peers check
// the identity instead.
func (ca *CA) Issue(id identity.ID, now time.Time, validity time.Duration, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if err := id.Validate(); err != nil {
		return nil, nil, err
	}
	if id.Kind.NATSOnly() {
		return nil, nil, fmt.Errorf("%w: a %s is a NATS user alone: no certificate (IssueNATS)", identity.ErrInvalid, id.Kind)
	}
	if validity <= 0 {
		return nil, nil, fmt.Errorf("issue %s: validity %s is not positive", id, validity)
	}
	return ca.sign(id.String(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: id.String(), OrganizationalUnit: id.TypeUnits()},
		URIs:        []*url.URL{id.URI()},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}, now, validity, hosts)
}

// IssueServer creates a TLS server certificate and key for hosts (names or
// IP addresses, the first one its common name), valid from now for
// validity and carrying no identity: the certificate of a listener whose
// clients check host names (no8s dev --tls's REST API).
func (ca *CA) IssueServer(now time.Time, validity time.Duration, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("issue a server certificate: no host")
	}
	if validity <= 0 {
		return nil, nil, fmt.Errorf("issue a server certificate: validity %s is not positive", validity)
	}
	return ca.sign(hosts[0], &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now, validity, hosts)
}

// sign completes tmpl (serial, a new key, validity within the CA's, hosts
// as subject alternative names) and signs it; what names the certificate
// in errors.
func (ca *CA) sign(what string, tmpl *x509.Certificate, now time.Time, validity time.Duration, hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", what, err)
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Minute), now.Add(validity)
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", what, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", what, err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

// IssueTo issues id and writes it as a credentials directory
// (identity.CertFile, identity.KeyFile, identity.CAFile with ca's bundle,
// and identity.NATSCredsFile when the CA has NATS keys).
// Each file is replaced whole (written aside, then renamed), the key last
// but one and the certificate last, so that a process reading the
// directory meanwhile sees either the old pair or the new one.
func (ca *CA) IssueTo(dir string, id identity.ID, now time.Time, validity time.Duration, hosts ...string) error {
	certPEM, keyPEM, err := ca.Issue(id, now, validity, hosts...)
	if err != nil {
		return err
	}
	if ca.nats != nil {
		// The NATS user first: a process that sees the new certificate
		// finds the user of the same generation.
		if err := ca.IssueNATSTo(dir, id, now, validity); err != nil {
			return err
		}
	}
	return WriteCredentials(dir, certPEM, keyPEM, ca.bundle)
}

// WriteCredentials writes a credentials directory: the CA bundle first, then
// the key, then the certificate, each replaced whole.
func WriteCredentials(dir string, certPEM, keyPEM, bundle []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if err := writeFile(filepath.Join(dir, identity.CAFile), bundle, 0o644); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, identity.KeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, identity.CertFile), certPEM, 0o644)
}

// writeFile replaces path with data: written to a temporary file in the
// same directory, synced, then renamed over path.
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// certificates parses every certificate of a PEM bundle.
func certificates(bundle []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA bundle: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("CA bundle: no certificate")
	}
	return out, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n, nil
}

// publicKeysEqual reports whether a and b are the same public key.
func publicKeysEqual(a, b crypto.PublicKey) bool {
	ak, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ak.Equal(b)
}
