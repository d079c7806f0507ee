package client_test

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/no8s/no8s/libs/client"
)

// TestWithCAFile: a client given the CA file of a server with a private
// certificate talks to it over TLS; without it the handshake fails; a CA
// file that holds no certificate, or WithCAFile beside WithHTTPClient, is
// refused by New.
func TestWithCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, []client.ResourceType{})
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(srv.URL, client.WithCAFile(caFile), client.WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTypes(t.Context(), ""); err != nil {
		t.Fatalf("with the CA file: %v", err)
	}
	plain, err := client.New(srv.URL, client.WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.ListTypes(t.Context(), ""); err == nil {
		t.Fatal("without the CA file: served")
	}
	bad := filepath.Join(dir, "bad.crt")
	if err := os.WriteFile(bad, []byte("no certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(srv.URL, client.WithCAFile(bad)); err == nil {
		t.Error("a CA file without a certificate was taken")
	}
	if _, err := client.New(srv.URL, client.WithCAFile(caFile), client.WithHTTPClient(http.DefaultClient)); err == nil {
		t.Error("WithCAFile beside WithHTTPClient was taken")
	}
}
