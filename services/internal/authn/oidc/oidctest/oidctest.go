package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Paths the Issuer serves, below URL().
const (
	DiscoveryPath  = "/.well-known/openid-configuration"
	JWKSPath       = "/keys"
	DevicePath     = "/device"
	TokenPath      = "/token"
	VerifyUserPath = "/device/verify"
)

// Lifetimes of what the Issuer hands out.
const (
	// TokenLifetime is the default lifetime of ID and access tokens.
	TokenLifetime = time.Hour
	// DeviceCodeLifetime is how long a device code can be approved.
	DeviceCodeLifetime = 10 * time.Minute
	// PollInterval is the interval (seconds) a device client is told to
	// poll at; golang.org/x/oauth2 waits at least one second.
	PollInterval = 1
)

// Issuer is an OIDC issuer on an httptest.Server, closed when the test
// ends (New) or by Close (Start). Its methods are safe for concurrent use.
type Issuer struct {
	// errorf reports a misuse (the test's Errorf; a panic without a test).
	errorf func(format string, args ...any)
	srv    *httptest.Server
	now    func() time.Time

	mu          sync.Mutex
	keys        []signingKey // published; the last one signs
	unavailable bool
	jwksFetches int
	devices     map[string]*deviceGrant // by device code
	userCodes   map[string]string       // user code -> device code
	refresh     map[string]refreshGrant // by refresh token
}

type signingKey struct {
	id   string
	priv *rsa.PrivateKey
}

type deviceGrant struct {
	clientID string
	userCode string
	expires  time.Time
	denied   bool
	claims   map[string]any // set by Approve
}

type refreshGrant struct {
	clientID string
	claims   map[string]any
}

// Option configures New.
type Option func(*Issuer)

// WithClock makes the Issuer read the time from now (iat, exp, device code
// expiry) instead of time.Now.
func WithClock(now func() time.Time) Option {
	return func(i *Issuer) { i.now = now }
}

// New starts an Issuer with one RSA key; it stops when t ends.
func New(t testing.TB, opts ...Option) *Issuer {
	t.Helper()
	i, err := Start(opts...)
	if err != nil {
		t.Fatalf("oidctest: %v", err)
	}
	i.errorf = t.Errorf
	t.Cleanup(i.Close)
	return i
}

// Start starts an Issuer with one RSA key outside a test (a benchmark
// program's); Close stops it.
func Start(opts ...Option) (*Issuer, error) {
	i := &Issuer{
		errorf:    func(format string, args ...any) { panic(fmt.Sprintf(format, args...)) },
		now:       time.Now,
		devices:   map[string]*deviceGrant{},
		userCodes: map[string]string{},
		refresh:   map[string]refreshGrant{},
	}
	for _, o := range opts {
		o(i)
	}
	k, err := newKey()
	if err != nil {
		return nil, err
	}
	i.keys = []signingKey{k}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+DiscoveryPath, i.discovery)
	mux.HandleFunc("GET "+JWKSPath, i.jwks)
	mux.HandleFunc("POST "+DevicePath, i.deviceAuthorization)
	mux.HandleFunc("POST "+TokenPath, i.token)
	i.srv = httptest.NewServer(i.availability(mux))
	return i, nil
}

// Close stops the issuer's server.
func (i *Issuer) Close() { i.srv.Close() }

func newKey() (signingKey, error) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return signingKey{}, fmt.Errorf("generate key: %w", err)
	}
	return signingKey{id: randomString(8), priv: priv}, nil
}

// URL is the issuer URL (the iss of its tokens).
func (i *Issuer) URL() string { return i.srv.URL }

// KeyID is the kid of the key that signs now.
func (i *Issuer) KeyID() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.keys[len(i.keys)-1].id
}

// PublicKey is the public half of the key that signs now.
func (i *Issuer) PublicKey() *rsa.PublicKey {
	i.mu.Lock()
	defer i.mu.Unlock()
	return &i.keys[len(i.keys)-1].priv.PublicKey
}

// Rotate publishes a new key (the old ones stay published) and signs with
// it from now on.
func (i *Issuer) Rotate() {
	k, err := newKey()
	if err != nil {
		i.errorf("oidctest: %v", err)
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.keys = append(i.keys, k)
}

// SetAvailable(false) makes every endpoint answer 503 Service Unavailable,
// as an issuer that is down; SetAvailable(true) brings it back.
func (i *Issuer) SetAvailable(up bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.unavailable = !up
}

// JWKSFetches counts the JWKS requests served so far.
func (i *Issuer) JWKSFetches() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.jwksFetches
}

// Claims returns the usual claims of a token for subject and audience:
// iss, sub, aud, iat (now) and exp (now + TokenLifetime), for a test to
// change before Sign.
func (i *Issuer) Claims(subject, audience string) map[string]any {
	now := i.now()
	return map[string]any{
		"iss": i.URL(),
		"sub": subject,
		"aud": audience,
		"iat": now.Unix(),
		"exp": now.Add(TokenLifetime).Unix(),
	}
}

// Sign returns claims as a compact JWS, RS256 with the current key (its kid
// in the header, typ JWT). It signs exactly claims: see Claims for the
// usual ones. On failure it reports a test error and returns "".
func (i *Issuer) Sign(claims map[string]any) string {
	i.mu.Lock()
	k := i.keys[len(i.keys)-1]
	i.mu.Unlock()
	s, err := SignWith(k.priv, k.id, claims)
	if err != nil {
		i.errorf("oidctest: %v", err)
		return ""
	}
	return s
}

// SignWith signs claims with any RSA key under kid (RS256), for tokens an
// Issuer would not issue (another key under a published kid, say).
func SignWith(priv *rsa.PrivateKey, kid string, claims map[string]any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("marshal claims: %w", err)
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"),
	)
	if err != nil {
		return "", fmt.Errorf("new signer: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("serialize: %w", err)
	}
	return s, nil
}

func (i *Issuer) availability(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.mu.Lock()
		down := i.unavailable
		i.mu.Unlock()
		if down {
			http.Error(w, "issuer unavailable", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (i *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	u := i.URL()
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                u,
		"jwks_uri":                              u + JWKSPath,
		"authorization_endpoint":                u + "/authorize", // not served: device flow only
		"token_endpoint":                        u + TokenPath,
		"device_authorization_endpoint":         u + DevicePath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"grant_types_supported":                 []string{grantDeviceCode, grantRefreshToken},
		"token_endpoint_auth_methods_supported": []string{"none", "client_secret_basic", "client_secret_post"},
	})
}

func (i *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	i.mu.Lock()
	i.jwksFetches++
	set := jose.JSONWebKeySet{}
	for _, k := range i.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.id, Algorithm: string(jose.RS256), Use: "sig"})
	}
	i.mu.Unlock()
	writeJSON(w, http.StatusOK, set)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
