package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/no8s/no8s/services/internal/authn"
)

// Every control plane the tests start has authentication on, with one
// administrator's token: each gateway's bootstrap token (start passes
// $NO8S_BOOTSTRAP_TOKEN_FILE to every process), and `no8s dev`'s, seeded
// in its data directory (seedDevToken). The tests' HTTP clients, curl and
// the CLI send it, as a user with that token would.

var (
	// adminToken is the administrator's token; adminTokenFile holds it.
	adminToken, adminTokenFile string
)

// useAdminToken makes the administrator's token, writes its file in dir,
// and has every request of the default transport and httpClient to a
// loopback address carry it.
func useAdminToken(dir string) error {
	_, _, tok, err := authn.NewToken()
	if err != nil {
		return err
	}
	adminToken, adminTokenFile = tok, filepath.Join(dir, "admin.token")
	if err := os.WriteFile(adminTokenFile, []byte(tok+"\n"), 0o600); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	http.DefaultTransport = withAdminToken(http.DefaultTransport)
	httpClient.Transport = withAdminToken(httpClient.Transport)
	return nil
}

// bootstrapEnv gives a gateway the administrator's token as its bootstrap
// token, and a reconciler (--register-type) the same token to send.
func bootstrapEnv() []string {
	return []string{"NO8S_BOOTSTRAP_TOKEN_FILE=" + adminTokenFile, "NO8S_TOKEN=" + adminToken}
}

// seedDevToken makes adminToken the administrator's token of a `no8s dev`
// that will run on dataDir.
func seedDevToken(dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dataDir, "admin.token"), []byte(adminToken+"\n"), 0o600)
}

// withAdminToken wraps rt so that requests to loopback addresses without
// an Authorization header of their own carry the administrator's token.
func withAdminToken(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return adminBearer{base: rt}
}

type adminBearer struct{ base http.RoundTripper }

func (b adminBearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, ok := req.Header["Authorization"]; ok || !isLoopback(req.URL.Hostname()) {
		return b.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+adminToken)
	return b.base.RoundTrip(r)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// withTokenHeader adds the administrator's token to a curl command line
// that sends none.
func withTokenHeader(cmdline string) string {
	if strings.Contains(cmdline, "Authorization") || !strings.HasPrefix(strings.TrimSpace(cmdline), "curl ") {
		return cmdline
	}
	return strings.Replace(cmdline, "curl ", `curl -H "Authorization: Bearer $NO8S_TOKEN" `, 1)
}
