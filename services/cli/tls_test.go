package cli

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContextCAFile: a context's ca-file (set-context --ca-file) makes the
// CLI trust an https server with a private certificate, as --ca-file and
// $NO8S_CA_FILE do; without it the CLI refuses the server.
func TestContextCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[]`))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NO8S_CONFIG": filepath.Join(dir, "config.yaml")}
	if code, _, stderr := run(t, env, "", "get", "types", "-s", srv.URL); code == 0 || !strings.Contains(stderr, "certificate") {
		t.Fatalf("without a CA file: %d %s", code, stderr)
	}
	if code, _, stderr := run(t, env, "", "get", "types", "-s", srv.URL, "--ca-file", caFile); code != 0 {
		t.Fatalf("--ca-file: %d %s", code, stderr)
	}
	if code, _, stderr := run(t, env, "", "config", "set-context", "dev", "--server", srv.URL, "--ca-file", caFile); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := run(t, env, "", "get", "types"); code != 0 {
		t.Fatalf("the context's ca-file: %d %s", code, stderr)
	}
	if data, _ := os.ReadFile(env["NO8S_CONFIG"]); !strings.Contains(string(data), "ca-file: "+caFile) {
		t.Fatalf("configuration:\n%s", data)
	}
	env2 := map[string]string{"NO8S_CONFIG": filepath.Join(dir, "none.yaml"), "NO8S_CA_FILE": caFile, "NO8S_SERVER": srv.URL}
	if code, _, stderr := run(t, env2, "", "get", "types"); code != 0 {
		t.Fatalf("$NO8S_CA_FILE: %d %s", code, stderr)
	}
}
