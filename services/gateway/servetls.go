package gateway

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certCheckInterval is how often, at most, the certificate files are
// looked at again.
const certCheckInterval = time.Second

// publicTLS is the public listener's TLS configuration: TLS 1.2 or later,
// with the certificate of certs.
func publicTLS(certs *certReloader) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: certs.GetCertificate,
	}
}

// certReloader serves a certificate and key read from two files, and reads
// them again when either file's modification time or size changed, looked
// at during a handshake at most once per certCheckInterval. A pair that
// does not load (half written, a key of another certificate) keeps the
// previous one in use and is logged; the next change is tried again.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   [2]certStamp
	cert    *tls.Certificate
}

// certStamp is what tells a changed file from an unchanged one.
type certStamp struct {
	mod  time.Time
	size int64
}

// newCertReloader loads the pair; an error when it does not load.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	stamp, err := r.stat()
	if err != nil {
		return nil, err
	}
	if err := r.load(stamp); err != nil {
		return nil, err
	}
	r.checked = time.Now()
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate: the pair in use, read again
// first when the files changed.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= certCheckInterval {
		r.checked = now
		stamp, err := r.stat()
		switch {
		case err != nil:
			r.log.Warn("TLS certificate files unreadable; serving the certificate in use", "err", err)
		case stamp != r.stamp:
			if err := r.load(stamp); err != nil {
				r.log.Error("TLS certificate files changed but do not load; serving the certificate in use", "err", err)
			} else {
				r.log.Info("TLS certificate reloaded", "cert_file", r.certFile, "not_after", r.cert.Leaf.NotAfter)
			}
		}
	}
	return r.cert, nil
}

// stat is the files' stamps.
func (r *certReloader) stat() ([2]certStamp, error) {
	var stamp [2]certStamp
	for i, name := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return stamp, fmt.Errorf("TLS certificate: %w", err)
		}
		stamp[i] = certStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return stamp, nil
}

// load reads the pair; stamp is recorded whether it loads or not, so that a
// broken pair is reported once, not at every handshake.
func (r *certReloader) load(stamp [2]certStamp) error {
	r.stamp = stamp
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s, key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert = &cert
	return nil
}
