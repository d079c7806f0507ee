package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/no8s/no8s/services/cli/config"
	"github.com/no8s/no8s/services/internal/authn/oidc"
	"github.com/no8s/no8s/services/internal/authn/oidc/oidctest"
)

const loginClientID = "no8s-cli"

// userCodeWriter is the stderr of a no8s login under test: it keeps what
// is written and hands the user code it prints to codes, once.
type userCodeWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	sent  bool
	codes chan string
}

var userCodeLine = regexp.MustCompile(`Open \S+ and enter ([A-Z]{4}-[A-Z]{4})`)

func newUserCodeWriter() *userCodeWriter { return &userCodeWriter{codes: make(chan string, 1)} }

func (w *userCodeWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if m := userCodeLine.FindStringSubmatch(w.buf.String()); m != nil && !w.sent {
		w.sent = true
		w.codes <- m[1]
	}
	return n, err
}

func (w *userCodeWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// loginRun is a no8s login running in the background.
type loginRun struct {
	stderr *userCodeWriter
	stdout bytes.Buffer
	code   chan int
}

// startLogin runs no8s with args (login and its flags) while the test plays
// the user; userCode waits for the code it prints.
func startLogin(env map[string]string, args ...string) *loginRun {
	r := &loginRun{stderr: newUserCodeWriter(), code: make(chan int, 1)}
	go func() {
		r.code <- Main(args, Streams{In: strings.NewReader(""), Out: &r.stdout, Err: r.stderr}, func(k string) string { return env[k] })
	}()
	return r
}

func (r *loginRun) userCode(t *testing.T) string {
	t.Helper()
	select {
	case c := <-r.stderr.codes:
		return c
	case c := <-r.code:
		t.Fatalf("login ended (%d) before printing a user code: %s", c, r.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no user code printed: %s", r.stderr.String())
	}
	return ""
}

// wait returns the exit code, stdout and stderr (stdout is read only after
// the command ended).
func (r *loginRun) wait(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case c := <-r.code:
		return c, r.stdout.String(), r.stderr.String()
	case <-time.After(30 * time.Second):
		t.Fatalf("login still running: %s", r.stderr.String())
	}
	return 0, "", ""
}

// oidcAPI is an API server that knows only whoami and authenticates with
// the real OIDC verifier, as a gateway with --oidc-issuer does. bearers
// counts the requests it answered.
func oidcAPI(t *testing.T, iss *oidctest.Issuer) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	v, err := oidc.New(oidc.Config{IssuerURL: iss.URL(), Audiences: []string{loginClientID}, UsernameClaim: "email"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		p, err := v.Verify(r.Context(), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if err != nil || r.URL.Path != "/api/v1/whoami" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"title":"Unauthorized","status":401,"detail":"authentication required"}`))
			return
		}
		served.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"username": p.Username, "groups": p.Groups, "method": "oidc"})
	}))
	t.Cleanup(srv.Close)
	return srv, &served
}

func loadConfig(t *testing.T, path string) *config.File {
	t.Helper()
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestLoginAndRefresh: no8s login stores the ID token and what refreshes
// it in a new context; commands use it; an expired ID token is refreshed
// and saved before the request; a token from the environment is never
// refreshed; config view hides the secrets; a refresh that fails says to
// log in again.
func TestLoginAndRefresh(t *testing.T) {
	iss := oidctest.New(t)
	api, served := oidcAPI(t, iss)
	path := filepath.Join(t.TempDir(), "config.yaml")
	env := map[string]string{config.EnvConfig: path}

	run1 := startLogin(env, "login", "--issuer", iss.URL(), "--client-id", loginClientID, "--client-secret", "s3cret", "--context", "work", "--server", api.URL)
	iss.Approve(run1.userCode(t), map[string]any{"sub": "alice", "email": "alice@example.com", "groups": []string{"dev"}})
	code, out, errOut := run1.wait(t)
	if code != ExitOK || !strings.HasPrefix(out, "Logged in as alice@example.com (context work); the token expires at ") {
		t.Fatalf("login: %d %q %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "?user_code=") {
		t.Fatalf("login did not print verification_uri_complete: %q", errOut)
	}

	f := loadConfig(t, path)
	c := f.Context("work")
	if f.CurrentContext != "work" || c == nil || c.Server != api.URL || c.OIDC == nil {
		t.Fatalf("configuration after login: %+v", f)
	}
	if c.OIDC.Issuer != iss.URL() || c.OIDC.ClientID != loginClientID || c.OIDC.ClientSecret != "s3cret" || c.OIDC.RefreshToken == "" ||
		strings.Join(c.OIDC.Scopes, ",") != "openid,profile,email,groups" {
		t.Fatalf("oidc settings: %+v", c.OIDC)
	}
	if exp, ok := tokenExpiry(c.Token); !ok || time.Until(exp) < 50*time.Minute {
		t.Fatalf("stored token is not a fresh JWT: %q", c.Token)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("configuration file mode: %v %v", fi, err)
	}
	loggedIn, refresh := c.Token, c.OIDC.RefreshToken

	// A fresh token is used as it is.
	if code, out, errOut := run(t, env, "", "token", "whoami"); code != ExitOK || out != "alice@example.com (oidc) groups [dev]\n" {
		t.Fatalf("whoami: %d %q %q", code, out, errOut)
	}
	if got := loadConfig(t, path).Context("work").Token; got != loggedIn {
		t.Fatal("a fresh token was refreshed")
	}

	// config view hides the token, the refresh token and the secret.
	code, out, _ = run(t, env, "", "config", "view")
	if code != ExitOK || strings.Contains(out, refresh) || strings.Contains(out, "s3cret") || strings.Contains(out, loggedIn) ||
		!strings.Contains(out, "refresh_token: REDACTED") || !strings.Contains(out, "client_secret: REDACTED") || !strings.Contains(out, "issuer: "+iss.URL()) {
		t.Fatalf("config view: %d\n%s", code, out)
	}

	// The ID token expired: the next command refreshes it first.
	claims := iss.Claims("alice", loginClientID)
	claims["email"] = "alice@example.com"
	claims["iat"] = time.Now().Add(-70 * time.Minute).Unix()
	claims["exp"] = time.Now().Add(-10 * time.Minute).Unix()
	expired := iss.Sign(claims)
	f = loadConfig(t, path)
	f.Context("work").Token = expired
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	// From the environment, the expired token is sent as it is (and refused).
	envToken := map[string]string{config.EnvConfig: path, config.EnvToken: expired}
	if code, _, errOut := run(t, envToken, "", "token", "whoami"); code != ExitError || !strings.Contains(errOut, "401") {
		t.Fatalf("whoami with an expired $NO8S_TOKEN: %d %q", code, errOut)
	}
	if got := loadConfig(t, path).Context("work").Token; got != expired {
		t.Fatal("a token from the environment caused a refresh")
	}
	before := served.Load()
	if code, out, errOut := run(t, env, "", "token", "whoami"); code != ExitOK || !strings.HasPrefix(out, "alice@example.com (oidc)") {
		t.Fatalf("whoami with an expired context token: %d %q %q", code, out, errOut)
	}
	if served.Load() != before+1 {
		t.Fatal("whoami was not answered once")
	}
	c = loadConfig(t, path).Context("work")
	if exp, ok := tokenExpiry(c.Token); c.Token == expired || !ok || time.Until(exp) < 50*time.Minute || c.OIDC.RefreshToken != refresh {
		t.Fatalf("after the refresh: token %q, oidc %+v", c.Token, c.OIDC)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("configuration file mode after the refresh: %v %v", fi, err)
	}

	// The refresh fails (the issuer is down): the error says what to do.
	f = loadConfig(t, path)
	f.Context("work").Token = expired
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	iss.SetAvailable(false)
	if code, _, errOut := run(t, env, "", "token", "whoami"); code != ExitError || !strings.Contains(errOut, "run no8s login again") || !strings.Contains(errOut, `context "work"`) {
		t.Fatalf("whoami with a failing refresh: %d %q", code, errOut)
	}

	// set-context --token replaces the login: nothing left to refresh.
	iss.SetAvailable(true)
	if code, _, errOut := run(t, env, "", "config", "set-context", "work", "--token", "mine"); code != ExitOK {
		t.Fatalf("set-context: %d %q", code, errOut)
	}
	if c := loadConfig(t, path).Context("work"); c.Token != "mine" || c.OIDC != nil {
		t.Fatalf("after set-context --token: %+v", c)
	}
}

// TestLoginRefusals: the user denies, or the code expires before approval:
// a clear error, and no configuration is written.
func TestLoginRefusals(t *testing.T) {
	var skew atomic.Int64 // added to the issuer's clock
	iss := oidctest.New(t, oidctest.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	path := filepath.Join(t.TempDir(), "config.yaml")
	env := map[string]string{config.EnvConfig: path}
	args := []string{"login", "--issuer", iss.URL(), "--client-id", loginClientID}

	denied := startLogin(env, args...)
	iss.Deny(denied.userCode(t))
	if code, out, errOut := denied.wait(t); code != ExitError || out != "" || !strings.Contains(errOut, "the login was refused at the issuer (access_denied); nothing was saved") {
		t.Fatalf("denied: %d %q %q", code, out, errOut)
	}

	expired := startLogin(env, args...)
	expired.userCode(t)
	skew.Store(int64(oidctest.DeviceCodeLifetime + time.Minute))
	if code, out, errOut := expired.wait(t); code != ExitError || out != "" || !strings.Contains(errOut, "the code expired before it was approved (expired_token)") {
		t.Fatalf("expired: %d %q %q", code, out, errOut)
	}

	if code, _, errOut := run(t, env, "", "login", "--issuer", iss.URL()); code != ExitUsage || !strings.Contains(errOut, "--client-id") {
		t.Fatalf("no --client-id: %d %q", code, errOut)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused login wrote the configuration: %v", err)
	}
}

func TestTokenExpiry(t *testing.T) {
	enc := func(payload string) string {
		return "e30." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".sig"
	}
	for token, want := range map[string]int64{
		enc(`{"exp":1700000000}`):   1700000000,
		enc(`{"exp":1700000000.5}`): 1700000000,
		enc(`{"sub":"alice"}`):      -1,
		enc(`not json`):             -1,
		"an-api-token":              -1,
		"a.b":                       -1,
		"e30.!!!.sig":               -1,
	} {
		exp, ok := tokenExpiry(token)
		if (want < 0 && ok) || (want >= 0 && (!ok || exp.Unix() != want)) {
			t.Errorf("tokenExpiry(%q) = %v %v, want %d", token, exp, ok, want)
		}
	}
}

// TestDeviceFlowError: each way polling ends says what happened (Ctrl-C
// cancels the command's context).
func TestDeviceFlowError(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want string
	}{
		{cancelled, context.Canceled, "login cancelled; nothing was saved"},
		{t.Context(), &oauth2.RetrieveError{ErrorCode: "access_denied"}, "refused at the issuer (access_denied); nothing was saved"},
		{t.Context(), &oauth2.RetrieveError{ErrorCode: "expired_token"}, "expired before it was approved (expired_token); nothing was saved: run no8s login again"},
		{t.Context(), context.DeadlineExceeded, "expired before it was approved"},
		{t.Context(), &oauth2.RetrieveError{ErrorCode: "invalid_client"}, "wait for the device's token: "},
	} {
		if got := deviceFlowError(tc.ctx, tc.err).Error(); !strings.Contains(got, tc.want) {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}
