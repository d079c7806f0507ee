package gateway

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/no8s/no8s/libs/client"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/authn/oidc"
	"github.com/no8s/no8s/services/internal/authn/oidc/oidctest"
)

// bootstrapToken is the administrator's token of authGateway.
const bootstrapToken = "test-bootstrap-token-0123456789abcdef"

// authGateway serves the package's stack with authentication on, as a
// gateway of its own (watches included).
func authGateway(t *testing.T) (*Service, *httptest.Server) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Auth = AuthConfig{BootstrapToken: bootstrapToken, StreamRecheck: 200 * time.Millisecond}
	cfg.Tokens = storev1.NewTokenServiceClient(env.storeConn)
	cfg.JetStream, cfg.Watch = env.js, watchTestConfig
	gw := New(cfg, env.store, env.admission, env.log.With("service", "gateway-auth"))
	ctx, cancel := context.WithCancel(env.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.RunEvents(ctx) }()
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() { cancel(); srv.Close(); <-done })
	return gw, srv
}

func apiClient(t *testing.T, srv *httptest.Server, token string) *client.Client {
	t.Helper()
	opts := []client.Option{client.WithRetries(0)}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	c, err := client.New(srv.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rawGet sends GET path with the Authorization header given ("" none).
func rawGet(t *testing.T, srv *httptest.Server, path, authorization string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestAuthenticationRefusesWithAChallenge(t *testing.T) {
	_, srv := authGateway(t)
	for name, tc := range map[string]struct{ auth, challenge string }{
		"no credentials":  {"", `Bearer realm="no8s"`},
		"garbage token":   {"Bearer garbage", `Bearer realm="no8s", error="invalid_token"`},
		"basic":           {"Basic YWRtaW46YWRtaW4=", `Bearer realm="no8s", error="invalid_token"`},
		"empty bearer":    {"Bearer ", `Bearer realm="no8s"`},
		"unknown token":   {"Bearer no8s_aaaaaaaaaaaaaaaa_" + strings.Repeat("a", 52), `Bearer realm="no8s", error="invalid_token"`},
		"bootstrap typo":  {"Bearer " + bootstrapToken + "x", `Bearer realm="no8s", error="invalid_token"`},
		"jwt, no issuers": {"Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", `Bearer realm="no8s", error="invalid_token"`},
	} {
		resp := rawGet(t, srv, "/api/v1/resource-types", tc.auth)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), tc.challenge) {
			t.Errorf("%s: %d %q, want 401 with a challenge starting %q", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tc.challenge)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/health"} {
		if resp := rawGet(t, srv, path, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a token: %d, want 200", path, resp.StatusCode)
		}
	}
	var apiErr *client.Error
	if _, err := apiClient(t, srv, "").ListTypes(env.ctx, ""); !errors.As(err, &apiErr) || apiErr.Code != client.CodeUnauthenticated {
		t.Fatalf("anonymous client: %v, want code %s", err, client.CodeUnauthenticated)
	}
	who, err := apiClient(t, srv, bootstrapToken).WhoAmI(env.ctx)
	if err != nil || who.Username != authn.BootstrapUsername || who.Method != authn.MethodBootstrap {
		t.Fatalf("whoami with the bootstrap token: %+v, %v", who, err)
	}
}

func TestAPITokensLifecycle(t *testing.T) {
	gw, srv := authGateway(t)
	_, other := authGateway(t) // a second gateway: revocation reaches it through the store
	admin := apiClient(t, srv, bootstrapToken)
	created, err := admin.CreateToken(env.ctx, client.TokenCreate{Name: "ci-lifecycle", ExpiresIn: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if created.Value == "" || created.Owner != authn.BootstrapUsername || created.ExpiresAt == nil {
		t.Fatalf("created %+v", created)
	}
	user := apiClient(t, srv, created.Value)
	userOther := apiClient(t, other, created.Value)
	who, err := user.WhoAmI(env.ctx)
	if err != nil || who.Method != authn.MethodToken || who.Username != authn.BootstrapUsername {
		t.Fatalf("whoami with the token: %+v, %v", who, err)
	}
	if _, err := userOther.ListTypes(env.ctx, ""); err != nil {
		t.Fatalf("the other gateway refuses the token: %v", err)
	}
	list, err := admin.ListTokens(env.ctx, true, false)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tok := range list {
		if tok.Value != "" {
			t.Fatalf("a listed token carries its value: %+v", tok)
		}
		found = found || tok.ID == created.ID
	}
	if !found {
		t.Fatalf("the new token is not listed: %+v", list)
	}
	// Revoked: refused at once here, within 2 s on the other gateway.
	if _, err := admin.RevokeToken(env.ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := user.WhoAmI(env.ctx); !isUnauthenticated(err) {
		t.Fatalf("the revoked token on the gateway that revoked it: %v, want 401", err)
	}
	start := time.Now()
	for {
		_, err := userOther.WhoAmI(env.ctx)
		if isUnauthenticated(err) {
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("the other gateway still takes the revoked token after %v (%v)", time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = gw
}

func TestExpiredTokenRefused(t *testing.T) {
	_, srv := authGateway(t)
	id, hash, value, err := authn.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	expiry := time.Now().Add(1500 * time.Millisecond)
	_, err = storev1.NewTokenServiceClient(env.storeConn).CreateToken(env.ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{
		Id: id, Name: "short-lived", Owner: "someone", CreatedBy: "someone", ExpiresAt: timestamppb.New(expiry), SecretHash: hash}})
	if err != nil {
		t.Fatal(err)
	}
	c := apiClient(t, srv, value)
	if _, err := c.WhoAmI(env.ctx); err != nil {
		t.Fatalf("before its expiry: %v", err)
	}
	// Refused once it has expired: polled, bounded by a second past it.
	for {
		_, err := c.WhoAmI(env.ctx)
		if isUnauthenticated(err) {
			if time.Now().Before(expiry) {
				t.Fatalf("refused %v before its expiry: %v", time.Until(expiry), err)
			}
			break
		}
		if err != nil || time.Now().After(expiry.Add(time.Second)) {
			t.Fatalf("%v after its expiry: %v, want 401", time.Since(expiry), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRevokedTokenEndsItsEventStream(t *testing.T) {
	_, srv := authGateway(t)
	admin := apiClient(t, srv, bootstrapToken)
	created, err := admin.CreateToken(env.ctx, client.TokenCreate{Name: "watcher", ExpiresIn: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+created.Value)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()
	if _, err := admin.RevokeToken(env.ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	select {
	case <-ended:
		t.Logf("the stream ended %v after the revocation", time.Since(revoked))
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream of a revoked token is still open after 5 s")
	}
}

func TestTokenRequestsRefused(t *testing.T) {
	_, srv := authGateway(t)
	admin := apiClient(t, srv, bootstrapToken)
	var apiErr *client.Error
	for name, body := range map[string]client.TokenCreate{
		"bad name":         {Name: "Not A Name!"},
		"bad expiry":       {Name: "x1", ExpiresIn: "soon"},
		"too short":        {Name: "x2", ExpiresIn: "1s"},
		"group not theirs": {Name: "x3", Groups: []string{"wheel"}},
	} {
		if _, err := admin.CreateToken(env.ctx, body); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
			t.Errorf("%s: %v, want 400", name, err)
		}
	}
	// A user's token lists and revokes only what it owns or created.
	created, err := admin.CreateToken(env.ctx, client.TokenCreate{Name: "robot", ServiceAccount: true, ExpiresIn: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	robot := apiClient(t, srv, created.Value)
	if who, err := robot.WhoAmI(env.ctx); err != nil || who.Username != "serviceaccount:robot" || len(who.Groups) != 0 {
		t.Fatalf("service account: %+v, %v", who, err)
	}
	if _, err := robot.ListTokens(env.ctx, true, false); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
		t.Fatalf("a non-administrator listing every token: %v, want 403", err)
	}
	adminTok, err := admin.CreateToken(env.ctx, client.TokenCreate{Name: "admins-own", ExpiresIn: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := robot.RevokeToken(env.ctx, adminTok.ID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("revoking another's token: %v, want 404", err)
	}
	if _, err := apiClient(t, srv, adminTok.Value).WhoAmI(env.ctx); err != nil {
		t.Fatalf("the token another tried to revoke: %v", err)
	}
}

// TestQueueInputAuthenticated: a queue-input message's Authorization
// header is checked as HTTP's (the listener passes the header on).
func TestQueueInputAuthenticated(t *testing.T) {
	gw, _ := authGateway(t)
	doc := []byte("kind: Resource\ntype: Nothing/v1\nmetadata:\n  name: q-auth\nspec: {}\n")
	for name, tc := range map[string]struct {
		auth string
		want int
	}{
		"no token":  {"", http.StatusUnauthorized},
		"bad token": {"Bearer nope", http.StatusUnauthorized},
		"basic":     {"Basic YTpi", http.StatusUnauthorized},
		// Authenticated: the document is then refused for its unknown type.
		"bootstrap": {"Bearer " + bootstrapToken, http.StatusBadRequest},
	} {
		a := gw.Execute(env.ctx, queueinput.Request{Op: queueinput.OpApply, Document: doc, Authorization: tc.auth})
		if a.Status != tc.want || a.Malformed {
			t.Errorf("%s: %d (malformed %v), want %d: %s", name, a.Status, a.Malformed, tc.want, a.Body)
		}
	}
}

func isUnauthenticated(err error) bool {
	var apiErr *client.Error
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized && apiErr.Code == client.CodeUnauthenticated
}

// TestOIDCTokensAuthenticate: a JWT of a trusted issuer authenticates with
// its username and groups claims; members of an admin group are
// administrators; a token of another audience is refused with a challenge.
func TestOIDCTokensAuthenticate(t *testing.T) {
	issuer := oidctest.New(t)
	spec, err := oidc.ParseIssuerSpec("issuer=" + issuer.URL() + ",audience=no8s,username-claim=email")
	if err != nil {
		t.Fatal(err)
	}
	v, err := oidc.New(spec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Auth = AuthConfig{JWT: oidc.Verifiers{v}, AdminGroups: []string{"platform"}}
	if err := cfg.Auth.Validate(); err != nil {
		t.Fatalf("an OIDC issuer with an admin group: %v", err)
	}
	cfg.Tokens = storev1.NewTokenServiceClient(env.storeConn)
	gw := New(cfg, env.store, env.admission, env.log.With("service", "gateway-oidc"))
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()

	claims := issuer.Claims("u-1", "no8s")
	claims["email"], claims["email_verified"], claims["groups"] = "alice@example.com", true, []string{"dev", "platform"}
	who, err := apiClient(t, srv, issuer.Sign(claims)).WhoAmI(env.ctx)
	if err != nil || who.Username != "alice@example.com" || who.Method != authn.MethodOIDC ||
		!slices.Equal(who.Groups, []string{"dev", "platform", authn.GroupAdmins}) {
		t.Fatalf("whoami with a JWT: %+v, %v", who, err)
	}
	other := issuer.Claims("u-2", "someone-else")
	if _, err := apiClient(t, srv, issuer.Sign(other)).WhoAmI(env.ctx); !isUnauthenticated(err) {
		t.Fatalf("a JWT of another audience: %v, want 401", err)
	}
	if err := (AuthConfig{JWT: oidc.Verifiers{v}}).Validate(); err == nil {
		t.Fatal("an OIDC issuer without an admin group and no bootstrap token was accepted: no administrator could sign in")
	}
}

// TestEventStreamTokenInTheURL: a browser's EventSource cannot send
// headers, so the watch routes take ?access_token=; no other route does.
func TestEventStreamTokenInTheURL(t *testing.T) {
	_, srv := authGateway(t)
	ctx, cancel := context.WithTimeout(env.ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/events?access_token="+bootstrapToken, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a watch with ?access_token=: %d, want 200", resp.StatusCode)
	}
	if resp := rawGet(t, srv, "/api/v1/events?access_token=wrong", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a watch with a wrong ?access_token=: %d, want 401", resp.StatusCode)
	}
	if resp := rawGet(t, srv, "/api/v1/resource-types?access_token="+bootstrapToken, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a list with ?access_token=: %d, want 401 (only event streams take it)", resp.StatusCode)
	}
}
