package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDevAuthentication is a newcomer's first start of `no8s dev`: it
// creates the administrator's token (mode 0600) and says how to send it,
// the API refuses requests without it (401 with a challenge) and takes
// them with it, the CLI works from the context no8s dev wrote and nothing
// else, an API token created with the CLI works until it is revoked, and
// it is refused until the administrator binds it a role (with the CLI),
// and its value is found nowhere afterwards: not in the store's database, the
// JetStream files (everything under the data directory) or no8s dev's log.
func TestDevAuthentication(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	cliConfig := filepath.Join(t.TempDir(), "config.yaml")
	addrs, dev := runDev(t, state, freeAddr(t), "", noPostgreSQL(), "--cli-config", cliConfig)
	base := addrs.APIURL
	fi, err := os.Stat(addrs.TokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 || addrs.TokenFile != filepath.Join(state, "admin.token") {
		t.Fatalf("the administrator's token file %q: %v, %v", addrs.TokenFile, fi, err)
	}
	raw, _ := os.ReadFile(addrs.TokenFile)
	admin := strings.TrimSpace(string(raw))
	waitFor(t, 10*time.Second, "no8s dev's curl hint", func() error {
		log, _ := os.ReadFile(dev.log.Name())
		if !bytes.Contains(log, []byte("export NO8S_TOKEN=$(cat "+addrs.TokenFile+")")) || !bytes.Contains(log, []byte(`Authorization: Bearer $NO8S_TOKEN`)) {
			return fmt.Errorf("no8s dev does not say how to send its token")
		}
		return nil
	})

	// curl without a token, with a wrong one, with no8s dev's.
	anonymous := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	resp, err := anonymous.Get(base + "/api/v1/resource-types")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="no8s"` {
		t.Fatalf("without a token: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if r := curlAnonymous(t, base, `curl -H "Authorization: Bearer not-a-token" http://localhost:8000/api/v1/resource-types`); r.status != http.StatusUnauthorized {
		t.Fatalf("with a wrong token: %d %s", r.status, r.body)
	}
	if r := curlAnonymous(t, base, `curl -H "Authorization: Bearer `+admin+`" http://localhost:8000/api/v1/resource-types`); r.status != http.StatusOK {
		t.Fatalf("with no8s dev's token: %d %s", r.status, r.body)
	}
	if r := curlAnonymous(t, base, `curl http://localhost:8000/readyz`); r.status != http.StatusOK {
		t.Fatalf("the readiness probe without a token: %d %s", r.status, r.body)
	}

	// The CLI from the context alone.
	ctxEnv := []string{"NO8S_CONFIG=" + cliConfig}
	if r := no8sEnv(t, ctxEnv, "", "token", "whoami"); r.code != 0 || !strings.Contains(r.stdout, "admin (bootstrap)") {
		t.Fatalf("no8s token whoami from the context: %+v", r)
	}
	created := no8sEnv(t, ctxEnv, "", "token", "create", "ci", "--service-account", "--expires-in", "1h")
	token := strings.TrimSpace(created.stdout)
	if created.code != 0 || !strings.HasPrefix(token, "no8s_") || !strings.Contains(created.stderr, "shown only now") {
		t.Fatalf("no8s token create: %+v", created)
	}
	tokEnv := []string{"NO8S_SERVER=" + base, "NO8S_CONFIG=" + filepath.Join(t.TempDir(), "none.yaml"), "NO8S_TOKEN=" + token}
	// A service account has no role: authenticated, and refused.
	if r := no8sEnv(t, tokEnv, "", "get", "types"); r.code == 0 || !strings.Contains(r.stderr, "serviceaccount:ci may not list resource-types") {
		t.Fatalf("no8s get types with the new token and no role: %+v", r)
	}
	if r := no8sEnv(t, tokEnv, "", "auth", "can-i", "list", "resource-types"); r.code != 1 || strings.TrimSpace(r.stdout) != "no" {
		t.Fatalf("no8s auth can-i list resource-types, no role: %+v", r)
	}
	// The administrator binds it the built-in viewer role with the CLI; the
	// gateway sees it within its two seconds of staleness.
	binding := "kind: Resource\ntype: ClusterRoleBinding/v1\nmetadata: {name: ci-view, namespace: default}\n" +
		"spec:\n  roleRef: {kind: ClusterRole, name: \"no8s:viewer\"}\n  subjects: [{kind: ServiceAccount, name: ci}]\n"
	if r := no8sEnv(t, ctxEnv, binding, "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("no8s apply of a ClusterRoleBinding: %+v", r)
	}
	waitFor(t, 3*time.Second, "the viewer role bound", func() error {
		if r := no8sEnv(t, tokEnv, "", "get", "types"); r.code != 0 {
			return fmt.Errorf("no8s get types as a viewer: %+v", r)
		}
		return nil
	})
	if r := no8sEnv(t, tokEnv, "", "auth", "can-i", "create", "resource-types"); r.code != 1 || strings.TrimSpace(r.stdout) != "no" {
		t.Fatalf("a viewer's can-i create resource-types: %+v", r)
	}
	if r := no8sEnv(t, tokEnv, "", "auth", "can-i", "get", "Anything", "-n", "default"); r.code != 0 || strings.TrimSpace(r.stdout) != "yes" {
		t.Fatalf("a viewer's can-i get Anything: %+v", r)
	}
	if r := no8sEnv(t, tokEnv, "", "token", "create", "other", "--service-account"); r.code == 0 || !strings.Contains(r.stderr, "may not manage-tokens") {
		t.Fatalf("a viewer made a service account's token: %+v", r)
	}
	if r := no8sEnv(t, tokEnv, "", "token", "whoami"); !strings.Contains(r.stdout, "serviceaccount:ci (token)") {
		t.Fatalf("whoami with the new token: %+v", r)
	}
	list := no8sEnv(t, ctxEnv, "", "token", "list", "-o", "name")
	id := strings.TrimSpace(list.stdout)
	if list.code != 0 || strings.Contains(list.stdout, token) || len(strings.Fields(id)) != 1 {
		t.Fatalf("no8s token list: %+v", list)
	}
	if r := no8sEnv(t, ctxEnv, "", "token", "revoke", id); r.code != 0 {
		t.Fatalf("no8s token revoke: %+v", r)
	}
	waitFor(t, 2*time.Second, "the revoked token refused", func() error {
		if r := no8sEnv(t, tokEnv, "", "get", "types"); r.code == 0 || !strings.Contains(r.stderr, "revoked") {
			return fmt.Errorf("with the revoked token: %+v", r)
		}
		return nil
	})

	// The token's value was shown once; it is nowhere now.
	dev.stop(syscall.SIGTERM, 20*time.Second)
	_ = filepath.WalkDir(state, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(token)) {
			t.Errorf("the token's value is in %s", path)
		}
		return nil
	})
	if b, _ := os.ReadFile(dev.log.Name()); bytes.Contains(b, []byte(token)) {
		t.Error("the token's value is in no8s dev's log")
	}
}

// TestDevAuthNone runs the seed README's curl flow, without a token, on
// `no8s dev --auth=none`, which says at start that the API is open.
func TestDevAuthNone(t *testing.T) {
	env := noPostgreSQL()
	state := filepath.Join(t.TempDir(), "state")
	addrs, dev := runDev(t, state, freeAddr(t), "", env, "--auth=none")
	if addrs.TokenFile != "" {
		t.Fatalf("no8s dev --auth=none has a token file %q", addrs.TokenFile)
	}
	if log, _ := os.ReadFile(dev.log.Name()); !bytes.Contains(log, []byte("AUTHENTICATION IS OFF")) {
		t.Fatalf("no8s dev --auth=none does not say the API is open:\n%s", log)
	}
	c := &cluster{t: t, dbFile: filepath.Join(state, "store.db")}
	seedFlow(t, addrs.APIURL, curlAnonymous, c.count, func() {
		startEnv(t, "reconciler-noop", filepath.Join(binDir, "no8s-reconciler"), []string{"noop", "--types", "DatabaseCluster/v1",
			"--nats-url", addrs.NATSURL, "--store-addr", addrs.WorkerAddr, "--health-listen", "off", "--identity-ca", addrs.CADir}, env)
		waitFor(t, 20*time.Second, "the noop reconciler live", func() error {
			r := curlAnonymous(t, addrs.APIURL, `curl http://localhost:8000/api/v1/reconcilers`)
			if r.status != 200 || !strings.Contains(string(r.body), `"DatabaseCluster"`) {
				return fmt.Errorf("GET /reconcilers: %d %s", r.status, r.body)
			}
			return nil
		})
	})
}

// TestGatewayRefusesToStartOpen: with authentication on (the default) and
// no way for an administrator to sign in, no8s-gateway does not start, and
// says what to give; with --auth=none it starts and says it is open.
func TestGatewayRefusesToStartOpen(t *testing.T) {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "NO8S_BOOTSTRAP_TOKEN_FILE=") || strings.HasPrefix(kv, "NO8S_AUTH=")
	})
	cmd := exec.Command(filepath.Join(binDir, "no8s-gateway"), "--listen", freeAddr(t), "--store-addr", "127.0.0.1:1", "--admission-addr", "127.0.0.1:1")
	cmd.Env = append(env, "NO8S_HEALTH_LISTEN=off")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--bootstrap-token-file") || !strings.Contains(string(out), "--auth=none") {
		t.Fatalf("no8s-gateway without a bootstrap token or OIDC admin group: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bad, []byte(strings.Repeat("x", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(filepath.Join(binDir, "no8s-gateway"), "--listen", freeAddr(t), "--bootstrap-token-file", bad)
	cmd.Env = append(env, "NO8S_HEALTH_LISTEN=off")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "chmod 600") {
		t.Fatalf("no8s-gateway with a bootstrap token file others may read: %v\n%s", err, out)
	}
}
