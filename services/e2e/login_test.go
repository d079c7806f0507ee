package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/services/cli/config"
	"github.com/no8s/no8s/services/internal/authn/oidc/oidctest"
)

// TestLogin is a user signing in with OIDC: a gateway trusts an issuer
// (--oidc-issuer), the real no8s login runs the device flow against it
// while the test approves the code, and the CLI then works with the ID
// token stored in its context (no NO8S_TOKEN); once that token has
// expired, the next command refreshes it transparently.
func TestLogin(t *testing.T) {
	const clientID = "no8s-cli"
	iss := oidctest.New(t)
	c := newCluster(t)
	c.startStore("")
	adm := c.startAdmission(c.storeAddrs[0])
	api := c.startGatewayArgs(c.storeAddrs[0], adm, "--oidc-issuer", "issuer="+iss.URL()+",audience="+clientID+",username-claim=email")

	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	env := []string{"NO8S_SERVER=" + api, "NO8S_CONFIG=" + cfgPath} // no NO8S_TOKEN: the context's

	// no8s login prints the code to enter; the user approves it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	login := exec.CommandContext(ctx, filepath.Join(binDir, "no8s"), "login", "--issuer", iss.URL(), "--client-id", clientID)
	login.Env = append(withoutNo8sEnv(), env...)
	var stdout, stderr bytes.Buffer
	login.Stdout = &stdout
	pipe, err := login.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	codeLine := regexp.MustCompile(`^Open (\S+) and enter ([A-Z]{4}-[A-Z]{4})$`)
	lines := bufio.NewScanner(pipe)
	for lines.Scan() {
		stderr.WriteString(lines.Text() + "\n")
		if m := codeLine.FindStringSubmatch(lines.Text()); m != nil {
			if m[1] != iss.URL()+oidctest.VerifyUserPath {
				t.Errorf("verification URI %q", m[1])
			}
			iss.Approve(m[2], map[string]any{"sub": "alice", "email": "alice@example.com", "groups": []string{"dev"}})
			break
		}
	}
	for lines.Scan() {
		stderr.WriteString(lines.Text() + "\n")
	}
	if err := login.Wait(); err != nil {
		t.Fatalf("no8s login: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	expectOut(t, "no8s login", stdout.String(), "Logged in as alice@example.com (context default); the token expires at ")

	whoami := func(what string) {
		t.Helper()
		r := no8sEnv(t, env, "", "token", "whoami")
		if r.code != 0 || r.stdout != "alice@example.com (oidc) groups [dev]\n" {
			t.Fatalf("%s: whoami: %d %q %q", what, r.code, r.stdout, r.stderr)
		}
	}
	whoami("after login")
	// Signed in, alice may do nothing until the administrator binds her
	// group a role.
	if r := no8sEnv(t, env, "", "get", "types"); r.code == 0 || !strings.Contains(r.stderr, "alice@example.com may not list resource-types") {
		t.Fatalf("get types with no role: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := curl(t, api, `curl -X POST http://localhost:8000/api/v1/resources -H 'Content-Type: application/json' -d '{"resource_type_name": "ClusterRoleBinding", "resource_type_version": "v1", "name": "dev-view", "spec": {"roleRef": {"kind": "ClusterRole", "name": "no8s:viewer"}, "subjects": [{"kind": "Group", "name": "dev"}]}}'`); r.status != http.StatusCreated {
		t.Fatalf("binding the viewer role to group dev: %d %s", r.status, r.body)
	}
	waitFor(t, 3*time.Second, "the viewer role bound", func() error {
		if r := no8sEnv(t, env, "", "get", "types"); r.code != 0 {
			return fmt.Errorf("get types: %d %q %q", r.code, r.stdout, r.stderr)
		}
		return nil
	})

	// The ID token expires (beyond the gateway's minute of skew).
	f, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctxCfg := f.Context("default")
	if ctxCfg == nil || ctxCfg.OIDC == nil || ctxCfg.OIDC.RefreshToken == "" {
		t.Fatalf("context after login: %+v", f)
	}
	claims := iss.Claims("alice", clientID)
	claims["email"], claims["groups"] = "alice@example.com", []string{"dev"}
	claims["iat"], claims["exp"] = time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
	expired := iss.Sign(claims)
	ctxCfg.Token = expired
	if err := f.Save(cfgPath); err != nil {
		t.Fatal(err)
	}
	// The gateway refuses it: sent as --token, it is never refreshed.
	if r := no8sEnv(t, env, "", "--token", expired, "token", "whoami"); r.code != 1 || !strings.Contains(r.stderr, "401") {
		t.Fatalf("whoami with the expired token as --token: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// From the context, it is refreshed before the request.
	whoami("after the token expired")
	f, err = config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if tok := f.Context("default").Token; tok == expired || tok == "" {
		t.Fatal("the expired token was not replaced in the context")
	}
}
