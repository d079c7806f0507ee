package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevTLS runs `no8s dev --tls` as a process: its API URL is https, a
// client that trusts the CA file it names creates a namespace over TLS, a
// client that does not is refused at the handshake, and a request whose
// Host is another name (DNS rebinding) is refused 421 with nothing
// written.
func TestDevTLS(t *testing.T) {
	addrs, _ := startDevProc(t, filepath.Join(t.TempDir(), "state"), freeAddr(t), "", os.Environ(), "--tls", "--metrics-listen", "off")
	if !strings.HasPrefix(addrs.APIURL, "https://") || addrs.CAFile == "" {
		t.Fatalf("no8s dev --tls: api_url %q, ca_file %q", addrs.APIURL, addrs.CAFile)
	}
	pem, err := os.ReadFile(addrs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", addrs.CAFile)
	}
	hc := &http.Client{Transport: withAdminToken(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})}
	send := func(method, url, host, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := send("POST", addrs.APIURL+"/api/v1/namespaces", "", `{"name":"over-tls"}`); status != http.StatusCreated {
		t.Fatalf("create a namespace over TLS: %d %s", status, body)
	}
	// The certificate names localhost too.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(addrs.APIURL, "https://"))
	if status, body := send("GET", "https://localhost:"+port+"/api/v1/namespaces/over-tls", "", ""); status != http.StatusOK {
		t.Fatalf("GET over TLS via localhost: %d %s", status, body)
	}
	if resp, err := http.Get(addrs.APIURL + "/readyz"); err == nil {
		resp.Body.Close()
		t.Fatal("a client that does not trust the CA file was served")
	}

	// DNS rebinding: the same address, another name.
	status, body := send("POST", addrs.APIURL+"/api/v1/namespaces", "rebind.evil.example:"+port, `{"name":"rebound"}`)
	var doc struct {
		Code string `json:"code"`
	}
	if status != http.StatusMisdirectedRequest || json.Unmarshal([]byte(body), &doc) != nil || doc.Code != "host_not_allowed" {
		t.Fatalf("Host rebind.evil.example: %d %s, want 421 host_not_allowed", status, body)
	}
	if status, body := send("GET", addrs.APIURL+"/api/v1/namespaces/rebound", "", ""); status != http.StatusNotFound {
		t.Fatalf("the refused namespace: %d %s, want 404", status, body)
	}
	if status, body := send("GET", addrs.APIURL+"/readyz", "rebind.evil.example", ""); status != http.StatusOK {
		t.Fatalf("/readyz with another Host: %d %s", status, body)
	}
}
