package gateway

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/identityca"
)

// TestPublicListenerTLS serves the API over TLS from certificate files,
// replaces the files, and sees a new handshake present the new certificate
// within a few seconds while a connection made before the change still
// works (the server never restarted); a replacement that does not load
// keeps the certificate in use; a TLS 1.1 client is refused.
func TestPublicListenerTLS(t *testing.T) {
	ca, err := identityca.New(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	issue := func() *big.Int {
		t.Helper()
		certPEM, keyPEM, err := ca.IssueServer(time.Now(), time.Hour, "localhost", "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber
	}
	first := issue()
	addr := serveReal(t, func(c *Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	clientTLS := &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	// presented is the serial of the certificate a new handshake presents.
	presented := func() *big.Int {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, clientTLS)
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	if got := presented(); got.Cmp(first) != 0 {
		t.Fatalf("serves serial %s, want %s", got, first)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}
	resp, err := hc.Get("https://localhost:" + addr[len("127.0.0.1:"):] + "/api/v1/resource-types")
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET over TLS: %d", resp.StatusCode)
	}
	// A connection made before the change, kept open across it.
	before, err := tls.Dial("tcp", addr, clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()

	second := issue()
	deadline := time.Now().Add(5 * time.Second)
	for presented().Cmp(second) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the new certificate (serial %s) was not presented within 5s", second)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := before.Write([]byte("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")); err != nil {
		t.Fatalf("the connection made before the change: %v", err)
	}
	if r, err := http.ReadResponse(bufio.NewReader(before), nil); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("the connection made before the change: %v %v", r, err)
	}

	// A replacement that does not load: the certificate in use stays.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if got := presented(); got.Cmp(second) != 0 {
			t.Fatalf("after a broken replacement: serial %s, want %s", got, second)
		}
	}

	old := clientTLS.Clone()
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11 //nolint:gosec // the test's point
	conn, err := tls.Dial("tcp", addr, old)
	if err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 client was served")
	}
	// Refused by the server (its alert), not by the client.
	if !strings.Contains(err.Error(), "remote error") {
		t.Fatalf("TLS 1.1 client: %v, want the server's protocol_version alert", err)
	}
}

// TestServeWithUnloadableCertificate: a TLS key pair that does not load
// stops ServeListeners before it serves.
func TestServeWithUnloadableCertificate(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(dir, "missing.crt"), filepath.Join(dir, "missing.key")
	gw := New(cfg, env.store, env.admission, nil)
	lis, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if err := gw.Serve(t.Context(), lis); err == nil {
		t.Fatal("served without its certificate")
	}
}
