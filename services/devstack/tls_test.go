package devstack

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEnsureAPICert: the first start creates the CA and a certificate for
// localhost, 127.0.0.1 and ::1 that verifies against the CA file, the key
// readable by its owner alone; a later start keeps them; a certificate
// that no longer chains to the CA (the CA removed) is issued again.
func TestEnsureAPICert(t *testing.T) {
	cfg := Config{DataDir: t.TempDir()}
	log := slog.New(slog.DiscardHandler)
	now := time.Now()
	certFile, keyFile, err := ensureAPICert(cfg, now, log)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key %s: %v %v, want mode 0600", keyFile, fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(cfg.TLSDir(), CADirName, "ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v, want mode 0600", fi.Mode(), err)
	}
	pem, err := os.ReadFile(cfg.TLSCAFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("the CA file holds no certificate")
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
			t.Errorf("for %s: %v", host, err)
		}
	}
	first, _ := os.ReadFile(certFile)

	if _, _, err := ensureAPICert(cfg, now.Add(time.Hour), log); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(certFile); !bytes.Equal(again, first) {
		t.Error("a later start issued the certificate again")
	}
	if err := os.RemoveAll(filepath.Join(cfg.TLSDir(), CADirName)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ensureAPICert(cfg, now.Add(time.Hour), log); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(certFile); bytes.Equal(again, first) {
		t.Error("a certificate of another CA was kept")
	}
}
