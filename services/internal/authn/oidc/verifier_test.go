package oidc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/authn/oidc"
	"github.com/no8s/no8s/services/internal/authn/oidc/oidctest"
)

// clock is a settable time shared by a test's issuer and verifier.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// setup starts an issuer and a verifier for audience "no8s" on one clock;
// mod changes the verifier's config.
func setup(t *testing.T, mod func(*oidc.Config)) (*oidctest.Issuer, *oidc.Verifier, *clock) {
	return setupTB(t, mod)
}

// setupB is setup for a benchmark.
func setupB(b *testing.B) (*oidctest.Issuer, *oidc.Verifier, *clock) { return setupTB(b, nil) }

func setupTB(t testing.TB, mod func(*oidc.Config)) (*oidctest.Issuer, *oidc.Verifier, *clock) {
	t.Helper()
	clk := newClock()
	iss := oidctest.New(t, oidctest.WithClock(clk.Now))
	cfg := oidc.Config{IssuerURL: iss.URL(), Audiences: []string{"no8s"}}
	if mod != nil {
		mod(&cfg)
	}
	v, err := oidc.New(cfg, nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return iss, v, clk
}

func TestVerifyAcceptsValidRS256(t *testing.T) {
	iss, v, clk := setup(t, nil)
	claims := iss.Claims("alice", "no8s")
	p, err := v.Verify(t.Context(), iss.Sign(claims))
	if err != nil {
		t.Fatal(err)
	}
	want := &authn.Principal{
		Username: iss.URL() + "#alice",
		Method:   authn.MethodOIDC,
		Expiry:   clk.Now().Add(oidctest.TokenLifetime),
	}
	if p.Username != want.Username || p.Groups != nil || p.Method != want.Method || p.TokenID != "" || !p.Expiry.Equal(want.Expiry) {
		t.Fatalf("principal %+v, want %+v", p, want)
	}
	if v.Issuer() != iss.URL() {
		t.Fatalf("Issuer() = %q", v.Issuer())
	}
	// aud as an array holding one of several configured audiences.
	_, v2, _ := setup(t, func(c *oidc.Config) { c.IssuerURL = iss.URL(); c.Audiences = []string{"other", "no8s"} })
	claims["aud"] = []string{"unrelated", "no8s"}
	if _, err := v2.Verify(t.Context(), iss.Sign(claims)); err != nil {
		t.Fatalf("aud array: %v", err)
	}
}

// refused asserts that Verify refuses tok with an error containing want
// and not containing the token or its signature.
func refused(t *testing.T, v *oidc.Verifier, tok, want string) error {
	t.Helper()
	p, err := v.Verify(t.Context(), tok)
	if err == nil {
		t.Fatalf("accepted as %+v, want an error containing %q", p, want)
	}
	if p != nil {
		t.Fatalf("refused but returned a principal %+v", p)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to contain %q", err, want)
	}
	if parts := strings.Split(tok, "."); len(tok) > 16 && (strings.Contains(err.Error(), tok) || len(parts) == 3 && len(parts[2]) > 8 && strings.Contains(err.Error(), parts[2])) {
		t.Fatalf("error %q echoes the token", err)
	}
	return err
}

func TestVerifyRefusesWrongIssuer(t *testing.T) {
	iss, v, _ := setup(t, nil)
	c := iss.Claims("alice", "no8s")
	c["iss"] = "https://evil.example"
	refused(t, v, iss.Sign(c), "wrong issuer")
	c["iss"] = iss.URL() + "/" // not exactly the issuer
	refused(t, v, iss.Sign(c), "wrong issuer")
	delete(c, "iss")
	refused(t, v, iss.Sign(c), "wrong issuer")
}

func TestVerifyRefusesWrongAudience(t *testing.T) {
	iss, v, _ := setup(t, nil)
	c := iss.Claims("alice", "someone-else")
	refused(t, v, iss.Sign(c), "wrong audience")
	c["aud"] = []string{"a", "b"}
	refused(t, v, iss.Sign(c), "wrong audience")
	delete(c, "aud")
	refused(t, v, iss.Sign(c), "wrong audience")
}

func TestVerifyExpiry(t *testing.T) {
	iss, v, clk := setup(t, func(c *oidc.Config) { c.ClockSkew = time.Minute })
	c := iss.Claims("alice", "no8s")

	c["exp"] = clk.Now().Add(-30 * time.Second).Unix() // expired, within the skew
	if _, err := v.Verify(t.Context(), iss.Sign(c)); err != nil {
		t.Fatalf("expired 30s ago with a 1m skew: %v", err)
	}
	c["exp"] = clk.Now().Add(-61 * time.Second).Unix() // past the skew
	refused(t, v, iss.Sign(c), "token expired at 2030-01-02T03:03:04Z")
	delete(c, "exp")
	refused(t, v, iss.Sign(c), "no exp claim")
	c["exp"] = "tomorrow"
	refused(t, v, iss.Sign(c), "not a number")
}

func TestVerifyRefusesNotYetValid(t *testing.T) {
	iss, v, clk := setup(t, nil)
	c := iss.Claims("alice", "no8s")
	c["nbf"] = clk.Now().Add(30 * time.Second).Unix() // within the skew
	if _, err := v.Verify(t.Context(), iss.Sign(c)); err != nil {
		t.Fatalf("nbf 30s ahead with a 1m skew: %v", err)
	}
	c["nbf"] = clk.Now().Add(2 * time.Minute).Unix()
	refused(t, v, iss.Sign(c), "token not valid before")
	delete(c, "nbf")
	c["iat"] = clk.Now().Add(2 * time.Minute).Unix()
	refused(t, v, iss.Sign(c), "issued in the future")
}

func TestVerifyRefusesUnknownKid(t *testing.T) {
	iss, v, _ := setup(t, nil)
	if _, err := v.Verify(t.Context(), iss.Sign(iss.Claims("alice", "no8s"))); err != nil {
		t.Fatal(err)
	}
	before := iss.JWKSFetches()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := oidctest.SignWith(other, "kid-nobody-published", iss.Claims("alice", "no8s"))
	if err != nil {
		t.Fatal(err)
	}
	refused(t, v, tok, "unknown signing key")
	if got := iss.JWKSFetches(); got != before+1 {
		t.Fatalf("JWKS fetched %d times for an unknown kid, want one refetch", got-before)
	}
}

func TestVerifyRefusesSameKidOtherKey(t *testing.T) {
	iss, v, _ := setup(t, nil)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := oidctest.SignWith(other, iss.KeyID(), iss.Claims("alice", "no8s"))
	if err != nil {
		t.Fatal(err)
	}
	refused(t, v, tok, "bad signature")
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyRefusesAlgNone(t *testing.T) {
	iss, v, _ := setup(t, nil)
	head := b64(mustJSON(t, map[string]string{"alg": "none", "typ": "JWT", "kid": iss.KeyID()}))
	body := b64(mustJSON(t, iss.Claims("alice", "no8s")))
	// With an empty signature (the usual form) and with some bytes there.
	refused(t, v, head+"."+body+".", "malformed token")
	refused(t, v, head+"."+body+"."+b64([]byte("not a signature")), `signing algorithm "none" not accepted`)
	// "None" spelled otherwise is no algorithm either.
	head = b64(mustJSON(t, map[string]string{"alg": "nOnE", "typ": "JWT"}))
	refused(t, v, head+"."+body+"."+b64([]byte("x")), `signing algorithm "nOnE" not accepted`)
}

func TestVerifyRefusesHS256WithThePublicKey(t *testing.T) {
	iss, v, _ := setup(t, nil)
	der, err := x509.MarshalPKIXPublicKey(iss.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	claims := iss.Claims("alice", "no8s")
	for name, secret := range map[string][]byte{
		"PEM": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		"DER": der,
	} {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: iss.KeyID()}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		jws, err := signer.Sign(mustJSON(t, claims))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jws.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) { refused(t, v, tok, `signing algorithm "HS256" not accepted`) })
	}
}

func TestVerifyRefusesUnacceptedAsymmetricAlg(t *testing.T) {
	// RS384 by the issuer's own key is still refused when only RS256 is
	// configured: the algorithm list is enforced before any key.
	iss, v, _ := setup(t, func(c *oidc.Config) { c.SigningAlgs = []string{"RS256"} })
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS384, Key: other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(mustJSON(t, iss.Claims("alice", "no8s")))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	refused(t, v, tok, `signing algorithm "RS384" not accepted`)
}

func TestVerifyRefusesMalformed(t *testing.T) {
	_, v, _ := setup(t, nil)
	for _, s := range []string{
		"",
		"no8s_abc",
		"a.b",
		"a.b.c.d",
		"!!!.###.$$$",
		"e30.e30.e30",                           // {} . {} . {}: no alg
		"eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln", // RS256 . "not json" . sig
		strings.Repeat("a", oidc.MaxTokenBytes) + ".a.a",
	} {
		refused(t, v, s, "malformed")
	}
}

func TestVerifyFollowsKeyRotation(t *testing.T) {
	iss, v, _ := setup(t, nil)
	first := iss.Sign(iss.Claims("alice", "no8s"))
	if _, err := v.Verify(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	oldKid := iss.KeyID()
	iss.Rotate()
	if iss.KeyID() == oldKid {
		t.Fatal("Rotate kept the kid")
	}
	second := iss.Sign(iss.Claims("bob", "no8s"))
	p, err := v.Verify(t.Context(), second) // the same Verifier
	if err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if p.Username != iss.URL()+"#bob" {
		t.Fatalf("username %q", p.Username)
	}
	fetches := iss.JWKSFetches()
	// Both keys are known now: no more fetches.
	for _, tok := range []string{first, second} {
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := iss.JWKSFetches(); got != fetches {
		t.Fatalf("%d JWKS fetches for known keys", got-fetches)
	}
}

func TestVerifyClaimsMapping(t *testing.T) {
	t.Run("sub with the default prefix", func(t *testing.T) {
		iss, v, _ := setup(t, nil)
		p, err := v.Verify(t.Context(), iss.Sign(iss.Claims("alice", "no8s")))
		if err != nil {
			t.Fatal(err)
		}
		if p.Username != iss.URL()+"#alice" || p.Groups != nil {
			t.Fatalf("principal %+v", p)
		}
	})
	t.Run("email, groups array with prefix", func(t *testing.T) {
		iss, v, _ := setup(t, func(c *oidc.Config) { c.UsernameClaim = "email"; c.GroupsPrefix = "oidc:" })
		c := iss.Claims("alice", "no8s")
		c["email"] = "alice@example.com"
		c["email_verified"] = true
		c["groups"] = []string{"dev", "ops"}
		p, err := v.Verify(t.Context(), iss.Sign(c))
		if err != nil {
			t.Fatal(err)
		}
		if p.Username != "alice@example.com" || !reflect.DeepEqual(p.Groups, []string{"oidc:dev", "oidc:ops"}) {
			t.Fatalf("principal %+v", p)
		}
		c["email_verified"] = false
		refused(t, v, iss.Sign(c), "email_verified is not true")
		delete(c, "email")
		refused(t, v, iss.Sign(c), `no username claim "email"`)
	})
	t.Run("single-string groups claim of another name, with prefix", func(t *testing.T) {
		iss, v, _ := setup(t, func(c *oidc.Config) { c.GroupsClaim = "roles"; c.GroupsPrefix = "idp:"; c.UsernamePrefix = "u:" })
		c := iss.Claims("alice", "no8s")
		c["roles"] = "admins"
		c["groups"] = []string{"ignored"}
		p, err := v.Verify(t.Context(), iss.Sign(c))
		if err != nil {
			t.Fatal(err)
		}
		if p.Username != "u:alice" || !reflect.DeepEqual(p.Groups, []string{"idp:admins"}) {
			t.Fatalf("principal %+v", p)
		}
		c["roles"] = nil
		if p, err := v.Verify(t.Context(), iss.Sign(c)); err != nil || p.Groups != nil {
			t.Fatalf("null groups: %+v, %v", p, err)
		}
		c["roles"] = []any{"a", 1}
		refused(t, v, iss.Sign(c), `groups claim "roles" is not a string or an array of strings`)
		c["roles"] = 7
		refused(t, v, iss.Sign(c), `groups claim "roles" is not a string or an array of strings`)
	})
	t.Run("username claim not a string", func(t *testing.T) {
		iss, v, _ := setup(t, nil)
		c := iss.Claims("alice", "no8s")
		c["sub"] = 42
		refused(t, v, iss.Sign(c), "malformed claims") // go-oidc refuses a non-string sub
		c["sub"] = ""
		refused(t, v, iss.Sign(c), `username claim "sub" is not a non-empty string`)
	})
}

func TestVerifyIssuerDownThenUp(t *testing.T) {
	iss, v, _ := setup(t, nil)
	iss.SetAvailable(false)
	tok := iss.Sign(iss.Claims("alice", "no8s"))
	err := refused(t, v, tok, "discover issuer")
	if !errors.Is(err, oidc.ErrIssuerUnavailable) {
		t.Fatalf("error %v is not ErrIssuerUnavailable", err)
	}
	iss.SetAvailable(true)
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("after the issuer came up: %v", err)
	}
}

func TestVerifyHonoursContext(t *testing.T) {
	iss, v, _ := setup(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := v.Verify(ctx, iss.Sign(iss.Claims("alice", "no8s"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestVerifiersRouteByIssuer(t *testing.T) {
	issA, vA, _ := setup(t, nil)
	issB, vB, _ := setup(t, func(c *oidc.Config) { c.UsernameClaim = "email" })
	vs := oidc.Verifiers{vA, vB}

	p, err := vs.Verify(t.Context(), issA.Sign(issA.Claims("alice", "no8s")))
	if err != nil || p.Username != issA.URL()+"#alice" {
		t.Fatalf("issuer A: %+v, %v", p, err)
	}
	c := issB.Claims("bob", "no8s")
	c["email"] = "bob@example.com"
	p, err = vs.Verify(t.Context(), issB.Sign(c))
	if err != nil || p.Username != "bob@example.com" {
		t.Fatalf("issuer B: %+v, %v", p, err)
	}

	// B's token claiming to be from A: A's verifier checks it, and A does
	// not know B's key.
	c["iss"] = issA.URL()
	if _, err := vs.Verify(t.Context(), issB.Sign(c)); err == nil || !strings.Contains(err.Error(), "unknown signing key") {
		t.Fatalf("B's key under A's name: %v", err)
	}

	c["iss"] = "https://idp.elsewhere.example"
	_, err = vs.Verify(t.Context(), issB.Sign(c))
	if !errors.Is(err, oidc.ErrUntrustedIssuer) || !strings.Contains(err.Error(), `issuer "https://idp.elsewhere.example" is not trusted`) {
		t.Fatalf("unknown issuer: %v", err)
	}
	for _, s := range []string{"", "a.b.c", "no8s_token"} {
		if _, err := vs.Verify(t.Context(), s); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Fatalf("Verifiers.Verify(%q): %v", s, err)
		}
	}
	if _, err := (oidc.Verifiers{}).Verify(t.Context(), issA.Sign(issA.Claims("alice", "no8s"))); !errors.Is(err, oidc.ErrUntrustedIssuer) {
		t.Fatalf("no verifiers: %v", err)
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for s, want := range map[string]bool{
		"eyJhbGciOiJSUzI1NiJ9.e30.c2ln": true,
		"YWJj.YWJj.YWJj":                true,
		"a.b.":                          false,
		"a..c":                          false,
		"a.b.c.d":                       false,
		"a.b":                           false,
		"a+b.c.d":                       false,
		"YQ==.b.c":                      false, // padded
		"no8s_abcdef_ghi":               false,
		"":                              false,
	} {
		if got := oidc.LooksLikeJWT(s); got != want {
			t.Errorf("LooksLikeJWT(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzVerify: no input makes a Verifier (or Verifiers) panic or accept. The
// seeds are shaped like the tokens the issuer signs but none is valid (a
// foreign key, alg none, an HMAC): a mutation would have to forge RS256.
func FuzzVerify(f *testing.F) {
	clk := newClock()
	iss := oidctest.New(f, oidctest.WithClock(clk.Now))
	v, err := oidc.New(oidc.Config{IssuerURL: iss.URL(), Audiences: []string{"no8s"}}, nil, clk.Now)
	if err != nil {
		f.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	claims := iss.Claims("alice", "no8s")
	foreign, err := oidctest.SignWith(other, iss.KeyID(), claims)
	if err != nil {
		f.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(foreign)
	f.Add(b64([]byte(`{"alg":"none","kid":"`+iss.KeyID()+`"}`)) + "." + b64(payload) + ".")
	f.Add(b64([]byte(`{"alg":"HS256"}`)) + "." + b64(payload) + "." + b64([]byte("sig")))
	f.Add("e30.e30.e30")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := v.Verify(t.Context(), s); err == nil || p != nil {
			t.Fatalf("Verifier accepted %q as %+v (err %v)", s, p, err)
		}
		if p, err := (oidc.Verifiers{v}).Verify(t.Context(), s); err == nil || p != nil {
			t.Fatalf("Verifiers accepted %q as %+v (err %v)", s, p, err)
		}
	})
}

// countingTransport counts requests per path.
type countingTransport struct {
	mu    sync.Mutex
	paths map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths[r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[path]
}

func TestVerifyConcurrentFirstUseDiscoversOnce(t *testing.T) {
	clk := newClock()
	iss := oidctest.New(t, oidctest.WithClock(clk.Now))
	rt := &countingTransport{paths: map[string]int{}}
	v, err := oidc.New(oidc.Config{IssuerURL: iss.URL(), Audiences: []string{"no8s"}}, &http.Client{Transport: rt, Timeout: 10 * time.Second}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	tok := iss.Sign(iss.Claims("alice", "no8s"))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			_, err := v.Verify(t.Context(), tok)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := rt.count(oidctest.DiscoveryPath); n != 1 {
		t.Fatalf("%d discovery requests, want 1", n)
	}
	if n := rt.count(oidctest.JWKSPath); n != 1 {
		t.Fatalf("%d JWKS requests, want 1", n)
	}
}

// TestVerifyAcceptsES256 serves an EC key from a minimal issuer of the
// test's own: ES256 is accepted by default, and a verifier configured for
// RS256 only refuses it.
func TestVerifyAcceptsES256(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var url string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": url, "jwks_uri": url + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &priv.PublicKey, KeyID: "ec", Algorithm: "ES256", Use: "sig"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	url = srv.URL

	clk := newClock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: "ec"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(mustJSON(t, map[string]any{"iss": url, "aud": "no8s", "sub": "alice", "exp": clk.Now().Add(time.Hour).Unix()}))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	v, err := oidc.New(oidc.Config{IssuerURL: url, Audiences: []string{"no8s"}}, nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := v.Verify(t.Context(), tok); err != nil || p.Username != url+"#alice" {
		t.Fatalf("ES256: %+v, %v", p, err)
	}
	rsOnly, err := oidc.New(oidc.Config{IssuerURL: url, Audiences: []string{"no8s"}, SigningAlgs: []string{"RS256"}}, nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, rsOnly, tok, `signing algorithm "ES256" not accepted`)
}
