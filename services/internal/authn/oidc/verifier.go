package oidc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/no8s/no8s/services/internal/authn"
)

// MaxTokenBytes is the longest token Verify reads; longer ones are refused
// before any parsing.
const MaxTokenBytes = 64 << 10

// DefaultHTTPTimeout bounds each discovery and JWKS request when New is
// given no HTTP client.
const DefaultHTTPTimeout = 10 * time.Second

// Errors a Verify may wrap, for errors.Is.
var (
	// ErrUntrustedIssuer: the token names an issuer no Verifier trusts.
	ErrUntrustedIssuer = errors.New("issuer is not trusted")
	// ErrIssuerUnavailable: the issuer's discovery document could not be
	// fetched or read; the next Verify tries again.
	ErrIssuerUnavailable = errors.New("issuer unavailable")
)

// Verifier verifies the tokens of one issuer. It is safe for concurrent use.
type Verifier struct {
	cfg    Config // with defaults applied
	client *http.Client
	now    func() time.Time

	// discovering is a one-slot semaphore: one discovery at a time.
	discovering chan struct{}
	// idv is set once discovery succeeded; its key set then follows
	// rotation by itself.
	idv atomic.Pointer[gooidc.IDTokenVerifier]
}

// New makes a verifier; discovery (/.well-known/openid-configuration)
// happens lazily on the first Verify and is retried on later calls if it
// failed (so the gateway starts while the issuer is down). httpClient nil =
// a client with a 10 s timeout; now nil = time.Now.
func New(cfg Config, httpClient *http.Client, now func() time.Time) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if now == nil {
		now = time.Now
	}
	return &Verifier{
		cfg:         cfg.withDefaults(),
		client:      httpClient,
		now:         now,
		discovering: make(chan struct{}, 1),
	}, nil
}

// Issuer returns the configured issuer URL.
func (v *Verifier) Issuer() string { return v.cfg.IssuerURL }

// Verify checks raw and returns who it names: &authn.Principal{Username,
// Groups, Method: authn.MethodOIDC, Expiry: exp}. It checks, in order: the
// token's shape and size; its algorithm (one of Config.SigningAlgs); its
// iss, before fetching anything for it; its signature by a key of the
// issuer's JWKS (refetched once when the key is unknown); then iss again,
// aud, exp (required), nbf and iat (with Config.ClockSkew), and the
// username and groups claims. Errors never contain the token.
func (v *Verifier) Verify(ctx context.Context, raw string) (*authn.Principal, error) {
	if err := checkShape(raw); err != nil {
		return nil, err
	}
	alg, err := unverifiedAlg(raw)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(v.cfg.SigningAlgs, alg) {
		return nil, fmt.Errorf("signing algorithm %q not accepted (accepted: %s)", truncate(alg), strings.Join(v.cfg.SigningAlgs, ", "))
	}
	jws, err := jose.ParseSigned(raw, v.joseAlgs()) // checks the algorithm again
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("malformed token: not exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	unverified, err := decodeClaims(jws.UnsafePayloadWithoutVerification())
	if err != nil {
		return nil, err
	}
	if unverified.Issuer != v.cfg.IssuerURL {
		return nil, fmt.Errorf("wrong issuer: token issued by %q, want %q", truncate(unverified.Issuer), v.cfg.IssuerURL)
	}

	idv, err := v.idTokenVerifier(ctx)
	if err != nil {
		return nil, err
	}
	sig := &signatureCheck{}
	tok, err := idv.Verify(context.WithValue(ctx, signatureCheckKey{}, sig), raw)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("verify token of %q: %w", v.cfg.IssuerURL, ctx.Err())
		}
		if sig.err != nil {
			return nil, fmt.Errorf("unknown signing key or bad signature (kid %q) for issuer %q: %w", truncate(kid), v.cfg.IssuerURL, sig.err)
		}
		// The signature was good: go-oidc refused the claims.
		return nil, fmt.Errorf("malformed claims: %w", err)
	}
	var c claims
	if err := tok.Claims(&c); err != nil {
		return nil, fmt.Errorf("malformed claims: %w", err)
	}
	return v.principal(c)
}

// checkShape refuses what cannot be a compact JWS before any decoding.
func checkShape(raw string) error {
	if len(raw) > MaxTokenBytes {
		return fmt.Errorf("malformed token: longer than %d bytes", MaxTokenBytes)
	}
	if !LooksLikeJWT(raw) {
		return errors.New("malformed token: not a compact JWS (three base64url parts)")
	}
	return nil
}

func (v *Verifier) joseAlgs() []jose.SignatureAlgorithm {
	algs := make([]jose.SignatureAlgorithm, len(v.cfg.SigningAlgs))
	for i, a := range v.cfg.SigningAlgs {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	return algs
}

// idTokenVerifier returns go-oidc's verifier, discovering the issuer first
// if no discovery has succeeded yet. Concurrent callers wait for one
// discovery (or their context).
func (v *Verifier) idTokenVerifier(ctx context.Context) (*gooidc.IDTokenVerifier, error) {
	if idv := v.idv.Load(); idv != nil {
		return idv, nil
	}
	select {
	case v.discovering <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("discover issuer %q: %w", v.cfg.IssuerURL, ctx.Err())
	}
	defer func() { <-v.discovering }()
	if idv := v.idv.Load(); idv != nil {
		return idv, nil
	}
	provider, err := gooidc.NewProvider(gooidc.ClientContext(ctx, v.client), v.cfg.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("discover issuer %q: %w: %w", v.cfg.IssuerURL, ErrIssuerUnavailable, err)
	}
	var doc struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := provider.Claims(&doc); err != nil || doc.JWKSURL == "" {
		return nil, fmt.Errorf("discover issuer %q: %w: no jwks_uri", v.cfg.IssuerURL, ErrIssuerUnavailable)
	}
	// The key set outlives this request: it fetches with v.client, whose
	// timeout bounds each fetch, under ctx without its cancellation (the
	// values of this first request's context stay with it). It refetches
	// the JWKS whenever a token's signature fails with the keys it has
	// (an unknown kid: rotation), one fetch at a time.
	keys := recordingKeySet{gooidc.NewRemoteKeySet(gooidc.ClientContext(ctx, v.client), doc.JWKSURL)}
	idv := gooidc.NewVerifier(v.cfg.IssuerURL, keys, &gooidc.Config{
		SupportedSigningAlgs: v.cfg.SigningAlgs,
		SkipClientIDCheck:    true, // one of several audiences: checked by principal
		SkipExpiryCheck:      true, // no leeway there: checked by principal
		Now:                  v.now,
	})
	v.idv.Store(idv)
	return idv, nil
}

// signatureCheck receives the key set's verdict on one Verify, so that a
// bad signature is told from claims go-oidc refuses (its errors are text).
type signatureCheck struct{ err error }

type signatureCheckKey struct{}

// recordingKeySet is a go-oidc KeySet that records its error in the
// signatureCheck of the context.
type recordingKeySet struct{ gooidc.KeySet }

// VerifySignature verifies jwt's signature with the wrapped key set.
func (k recordingKeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.KeySet.VerifySignature(ctx, jwt)
	if sc, ok := ctx.Value(signatureCheckKey{}).(*signatureCheck); ok {
		sc.err = err
	}
	return payload, err
}

// claims are the registered claims checked here; the username and groups
// claims are read from rest.
type claims struct {
	Issuer    string          `json:"iss"`
	Audience  audience        `json:"aud"`
	Expiry    *numericDate    `json:"exp"`
	NotBefore *numericDate    `json:"nbf"`
	IssuedAt  *numericDate    `json:"iat"`
	rest      json.RawMessage `json:"-"`
}

func (c *claims) UnmarshalJSON(b []byte) error {
	type plain claims
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = claims(p)
	c.rest = slices.Clone(b)
	return nil
}

// decodeClaims reads an (unverified) payload.
func decodeClaims(payload []byte) (claims, error) {
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return claims{}, fmt.Errorf("malformed claims: %w", err)
	}
	return c, nil
}

// principal checks the claims go-oidc leaves to us and maps them.
func (v *Verifier) principal(c claims) (*authn.Principal, error) {
	if c.Issuer != v.cfg.IssuerURL { // go-oidc checked it too; never rely on one check
		return nil, fmt.Errorf("wrong issuer: token issued by %q, want %q", truncate(c.Issuer), v.cfg.IssuerURL)
	}
	if !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(v.cfg.Audiences, a) }) {
		return nil, fmt.Errorf("wrong audience: token is for %q, want one of %q", truncateAll(c.Audience), v.cfg.Audiences)
	}
	now := v.now()
	skew := v.cfg.ClockSkew
	if c.Expiry == nil {
		return nil, errors.New("token has no exp claim")
	}
	exp := c.Expiry.Time()
	if now.After(exp.Add(skew)) {
		return nil, fmt.Errorf("token expired at %s (now %s, clock skew %s)", exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), skew)
	}
	if c.NotBefore != nil {
		if nbf := c.NotBefore.Time(); now.Add(skew).Before(nbf) {
			return nil, fmt.Errorf("token not valid before %s (now %s, clock skew %s)", nbf.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), skew)
		}
	}
	if c.IssuedAt != nil {
		if iat := c.IssuedAt.Time(); now.Add(skew).Before(iat) {
			return nil, fmt.Errorf("token issued in the future at %s (now %s, clock skew %s)", iat.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), skew)
		}
	}

	var all map[string]json.RawMessage
	if err := json.Unmarshal(c.rest, &all); err != nil {
		return nil, fmt.Errorf("malformed claims: %w", err)
	}
	username, err := v.username(all)
	if err != nil {
		return nil, err
	}
	groups, err := v.groups(all)
	if err != nil {
		return nil, err
	}
	return &authn.Principal{
		Username: username,
		Groups:   groups,
		Method:   authn.MethodOIDC,
		Expiry:   exp,
	}, nil
}

func (v *Verifier) username(all map[string]json.RawMessage) (string, error) {
	name := v.cfg.UsernameClaim
	raw, ok := all[name]
	if !ok {
		return "", fmt.Errorf("token has no username claim %q", truncate(name))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || s == "" {
		return "", fmt.Errorf("username claim %q is not a non-empty string", truncate(name))
	}
	if name == "email" {
		// As kube-apiserver: an email the issuer says is unverified names
		// nobody.
		if rawVerified, ok := all["email_verified"]; ok {
			var verified bool
			if err := json.Unmarshal(rawVerified, &verified); err != nil || !verified {
				return "", errors.New("email_verified is not true")
			}
		}
	}
	return v.cfg.UsernamePrefix + s, nil
}

func (v *Verifier) groups(all map[string]json.RawMessage) ([]string, error) {
	name := v.cfg.GroupsClaim
	raw, ok := all[name]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var groups []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		groups = []string{one}
	} else if err := json.Unmarshal(raw, &groups); err != nil {
		return nil, fmt.Errorf("groups claim %q is not a string or an array of strings", truncate(name))
	}
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		if g == "" {
			return nil, fmt.Errorf("groups claim %q holds an empty group", truncate(name))
		}
		out = append(out, v.cfg.GroupsPrefix+g)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// audience is the aud claim: a string or an array of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("aud is not a string or an array of strings")
	}
	*a = many
	return nil
}

// numericDate is a JWT NumericDate: seconds since the epoch, possibly
// fractional, between 0 and the year 9999.
type numericDate struct{ t time.Time }

const maxNumericDate = 253402300799 // 9999-12-31T23:59:59Z

func (d *numericDate) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New("a date claim is not a number")
	}
	if f < 0 || f > maxNumericDate {
		return errors.New("a date claim is out of range")
	}
	sec := int64(f)
	d.t = time.Unix(sec, int64((f-float64(sec))*1e9)).UTC()
	return nil
}

// Time is the date.
func (d *numericDate) Time() time.Time { return d.t }

func truncateAll(ss []string) []string {
	out := make([]string, 0, min(len(ss), 5))
	for i, s := range ss {
		if i == 5 {
			out = append(out, "...")
			break
		}
		out = append(out, truncate(s))
	}
	return out
}

// LooksLikeJWT reports whether s has the shape of a compact JWS (three
// base64url parts), without verifying anything.
func LooksLikeJWT(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return false
	}
	for _, p := range parts {
		if _, err := base64.RawURLEncoding.DecodeString(p); err != nil {
			return false
		}
	}
	return true
}

// Verifiers is several issuers: Verify reads the unverified iss claim only
// to pick the verifier for it (unknown issuer -> error), then that verifier
// checks the signature and every claim. When two verifiers have the same
// issuer the first one is used.
type Verifiers []*Verifier

// Verify picks the Verifier of raw's issuer and returns its result; an
// issuer none of vs trusts is refused with ErrUntrustedIssuer.
func (vs Verifiers) Verify(ctx context.Context, raw string) (*authn.Principal, error) {
	if err := checkShape(raw); err != nil {
		return nil, err
	}
	iss, err := unverifiedIssuer(raw)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if v.Issuer() == iss {
			return v.Verify(ctx, raw)
		}
	}
	return nil, fmt.Errorf("issuer %q is not trusted: %w", truncate(iss), ErrUntrustedIssuer)
}

// unverifiedAlg reads the alg of a compact JWS's header without verifying
// anything.
func unverifiedAlg(raw string) (string, error) {
	head, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return "", errors.New("malformed token: header is not base64url")
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", errors.New("malformed token: header is not a JSON object with a string alg")
	}
	if h.Alg == "" {
		return "", errors.New("malformed token: header has no alg")
	}
	return h.Alg, nil
}

// unverifiedIssuer reads the iss claim of a compact JWS without verifying
// anything.
func unverifiedIssuer(raw string) (string, error) {
	parts := strings.Split(raw, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", errors.New("malformed token: payload is not base64url")
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", errors.New("malformed token: payload is not a JSON object with a string iss")
	}
	if c.Issuer == "" {
		return "", errors.New("malformed token: no iss claim")
	}
	return c.Issuer, nil
}
