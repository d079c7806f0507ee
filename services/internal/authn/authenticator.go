package authn

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Modes of authentication.
const (
	// ModeOn authenticates every request but the public paths (the
	// default).
	ModeOn = "on"
	// ModeNone runs open: every request is anonymous and allowed.
	ModeNone = "none"
)

// DefaultCacheTTL is how long a looked-up API token is trusted before it
// is looked up again: a revoked token is refused within this bound on
// every gateway (and at once on the one that revoked it).
const DefaultCacheTTL = time.Second

// DefaultJWTCacheTTL is how long a verified JWT is taken again without
// verifying its signature (never past its expiry): a key the issuer stops
// publishing stops authenticating within this bound.
const DefaultJWTCacheTTL = 10 * time.Second

// maxCachedJWTs bounds the verified JWTs remembered at once.
const maxCachedJWTs = 10000

// BootstrapUsername is who the bootstrap token authenticates as.
const BootstrapUsername = "admin"

// ErrNoCredentials is returned when a request carries no credentials.
var ErrNoCredentials = errors.New("authentication required: send Authorization: Bearer <token>")

// ErrUnknownToken is what a TokenLookup returns for a token id it does not
// know.
var ErrUnknownToken = errors.New("unknown token")

// InvalidError is a credential that was refused; Reason says why without
// repeating it.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return "invalid credentials: " + e.Reason }

func invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

// TokenRecord is what the authenticator needs of a stored API token.
type TokenRecord struct {
	Owner      string
	Groups     []string
	ExpiresAt  time.Time // zero: never
	RevokedAt  time.Time // zero: not revoked
	SecretHash []byte
}

// TokenLookup reads a token's record by id (ErrUnknownToken when absent).
type TokenLookup func(ctx context.Context, id string) (*TokenRecord, error)

// JWTVerifier checks a JWT bearer token (package oidc's Verifiers).
type JWTVerifier interface {
	Verify(ctx context.Context, raw string) (*Principal, error)
}

// Config configures an Authenticator.
type Config struct {
	// BootstrapToken, when not empty, authenticates as BootstrapUsername
	// in GroupAdmins: the first administrator's credential.
	BootstrapToken string
	// Tokens looks API tokens up; nil refuses them.
	Tokens TokenLookup
	// JWT verifies OIDC JWTs; nil refuses them.
	JWT JWTVerifier
	// AdminGroups are groups (after the verifier's prefixes) whose members
	// are administrators: they get GroupAdmins too.
	AdminGroups []string
	// CacheTTL bounds how long a looked-up token is trusted (default
	// DefaultCacheTTL).
	CacheTTL time.Duration
	// JWTCacheTTL bounds how long a verified JWT is taken again without
	// verifying it (default DefaultJWTCacheTTL; never past its expiry).
	JWTCacheTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Authenticator turns a bearer credential into a Principal.
type Authenticator struct {
	cfg       Config
	bootstrap []byte
	mu        sync.Mutex
	cache     map[string]cachedToken
	// jwts are verified JWTs by the SHA-256 of their text, under mu.
	jwts map[[32]byte]cachedJWT
	// lookups makes one store lookup of a token that concurrent requests
	// wait for, not one each, when its cache entry expires.
	lookups singleflight.Group
	// joining, when set (tests), is called as a request joins a lookup.
	joining func()
}

type cachedJWT struct {
	p     Principal
	until time.Time
}

type cachedToken struct {
	rec *TokenRecord
	at  time.Time
}

// New returns an Authenticator.
func New(cfg Config) *Authenticator {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.JWTCacheTTL <= 0 {
		cfg.JWTCacheTTL = DefaultJWTCacheTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Authenticator{cfg: cfg, cache: map[string]cachedToken{}, jwts: map[[32]byte]cachedJWT{}}
	if cfg.BootstrapToken != "" {
		a.bootstrap = HashSecret(cfg.BootstrapToken)
	}
	return a
}

// ReadBootstrapToken reads a bootstrap token file: one line, at least 32
// characters, in a file no one but its owner and its group may read and
// only its owner may write. The group may read it because a Kubernetes
// Secret volume with an fsGroup makes its files 0440 whatever defaultMode
// says.
func ReadBootstrapToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("bootstrap token file: %w", err)
	}
	if fi.Mode().Perm()&0o037 != 0 {
		return "", fmt.Errorf("bootstrap token file %s: mode %v lets others read or change it: chmod 600 it (640 where a group must read it)", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("bootstrap token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < 32 || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("bootstrap token file %s: want one token of at least 32 characters without spaces", path)
	}
	return tok, nil
}

// BearerToken returns the token of an Authorization header value ("" and
// false when it is not a bearer credential).
func BearerToken(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// Authenticate says who the bearer token belongs to: ErrNoCredentials
// when it is empty, an *InvalidError when it is refused, another error
// when the token store could not be asked.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (*Principal, error) {
	switch {
	case token == "":
		return nil, ErrNoCredentials
	case a.bootstrap != nil && subtle.ConstantTimeCompare(HashSecret(token), a.bootstrap) == 1:
		return &Principal{Username: BootstrapUsername, Groups: []string{GroupAdmins}, Method: MethodBootstrap}, nil
	case IsToken(token):
		return a.apiToken(ctx, token)
	case a.cfg.JWT != nil && strings.Count(token, ".") == 2:
		return a.jwt(ctx, token)
	}
	return nil, invalid("the bearer token is neither an API token nor a JWT of a trusted issuer")
}

// jwt verifies a JWT, or takes it from the verified ones it remembers.
func (a *Authenticator) jwt(ctx context.Context, token string) (*Principal, error) {
	key := sha256.Sum256([]byte(token))
	now := a.cfg.Now()
	a.mu.Lock()
	c, ok := a.jwts[key]
	a.mu.Unlock()
	if ok && now.Before(c.until) {
		p := c.p
		p.Groups = slices.Clone(c.p.Groups)
		return &p, nil
	}
	p, err := a.cfg.JWT.Verify(ctx, token)
	if err != nil {
		return nil, invalid("%v", err)
	}
	if slices.ContainsFunc(p.Groups, func(g string) bool { return slices.Contains(a.cfg.AdminGroups, g) }) &&
		!slices.Contains(p.Groups, GroupAdmins) {
		p.Groups = append(p.Groups, GroupAdmins)
	}
	until := now.Add(a.cfg.JWTCacheTTL)
	if !p.Expiry.IsZero() && p.Expiry.Before(until) {
		until = p.Expiry
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.jwts) >= maxCachedJWTs {
		for k, v := range a.jwts {
			if !now.Before(v.until) {
				delete(a.jwts, k)
			}
		}
	}
	if len(a.jwts) < maxCachedJWTs {
		a.jwts[key] = cachedJWT{p: *p, until: until}
	}
	return p, nil
}

// apiToken checks an API token against its record.
func (a *Authenticator) apiToken(ctx context.Context, token string) (*Principal, error) {
	id, secret, err := ParseToken(token)
	if err != nil {
		return nil, invalid("malformed API token")
	}
	if a.cfg.Tokens == nil {
		return nil, invalid("API tokens are not accepted here")
	}
	rec, err := a.lookup(ctx, id)
	if errors.Is(err, ErrUnknownToken) {
		return nil, invalid("unknown API token")
	}
	if err != nil {
		return nil, err
	}
	if !SecretMatches(secret, rec.SecretHash) {
		return nil, invalid("unknown API token")
	}
	now := a.cfg.Now()
	if !rec.RevokedAt.IsZero() {
		return nil, invalid("the API token was revoked")
	}
	if !rec.ExpiresAt.IsZero() && !now.Before(rec.ExpiresAt) {
		return nil, invalid("the API token expired at %s", rec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return &Principal{Username: rec.Owner, Groups: slices.Clone(rec.Groups), Method: MethodToken, TokenID: id, Expiry: rec.ExpiresAt}, nil
}

// lookupTimeout bounds one shared lookup of a token.
const lookupTimeout = 10 * time.Second

// lookup reads a token's record through the cache.
func (a *Authenticator) lookup(ctx context.Context, id string) (*TokenRecord, error) {
	now := a.cfg.Now()
	a.mu.Lock()
	c, ok := a.cache[id]
	a.mu.Unlock()
	if ok && now.Sub(c.at) < a.cfg.CacheTTL {
		return c.rec, nil
	}
	if a.joining != nil {
		a.joining()
	}
	v, err, _ := a.lookups.Do(id, func() (any, error) {
		// The callers share the lookup: none's cancellation ends it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		return a.cfg.Tokens(lctx, id)
	})
	if err != nil {
		return nil, err
	}
	rec := v.(*TokenRecord)
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, v := range a.cache { // keep the cache to live entries
		if now.Sub(v.at) >= a.cfg.CacheTTL {
			delete(a.cache, k)
		}
	}
	a.cache[id] = cachedToken{rec: rec, at: now}
	return rec, nil
}

// Forget drops a token from the cache (after revoking it here).
func (a *Authenticator) Forget(id string) {
	a.mu.Lock()
	delete(a.cache, id)
	a.mu.Unlock()
}

// EnsureBootstrapToken reads the bootstrap token file at path, creating it
// (mode 0600, a new random token) when it does not exist: no8s dev's
// administrator token, and `no8s identity ensure --bootstrap-token`'s.
func EnsureBootstrapToken(path string) (token string, created bool, err error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		_, _, tok, err := NewToken()
		if err != nil {
			return "", false, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", false, fmt.Errorf("create the bootstrap token: %w", err)
		}
		_, werr := f.WriteString(tok + "\n")
		if err := errors.Join(werr, f.Close()); err != nil {
			return "", false, fmt.Errorf("write the bootstrap token: %w", err)
		}
		created = true
	}
	token, err = ReadBootstrapToken(path)
	return token, created, err
}
