package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/cli/config"
)

// refreshBefore is how long before its exp a stored ID token is refreshed.
const refreshBefore = time.Minute

// defaultLoginContext names the context no8s login creates when neither
// --context, $NO8S_CONTEXT nor the file names one.
const defaultLoginContext = "default"

// loginOptions are no8s login's flags.
type loginOptions struct {
	issuer, clientID, clientSecret string
	scopes                         []string
}

func (a *app) loginCmd() *cobra.Command {
	var o loginOptions
	cmd := &cobra.Command{
		Use:   "login --issuer URL --client-id ID",
		Short: "Log in with an OpenID Connect issuer (device flow) and store the ID token in a context",
		Long: `login signs you in with an OpenID Connect issuer through the OAuth 2.0 device
authorization grant (RFC 8628): it prints a URL and a code to enter there,
waits until you approve (Ctrl-C gives up), and stores the issuer's ID token as
the token of the current context (or --context; created, with the server in
force, when missing), with the refresh token that renews it. Commands refresh
the ID token when it has expired or expires within a minute; when that fails,
run no8s login again. The gateway must trust the issuer (--oidc-issuer) with
the client id as audience.`,
		Example: `  no8s login --issuer https://accounts.example.com --client-id no8s-cli
  no8s login --issuer https://dex.example.com --client-id no8s --context prod --server https://no8s.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.issuer == "" || o.clientID == "" {
				return usagef("login needs --issuer and --client-id")
			}
			return a.login(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.issuer, "issuer", "", "the OpenID Connect issuer URL (its discovery document is read)")
	f.StringVar(&o.clientID, "client-id", "", "the OAuth client id registered at the issuer (the audience the gateway expects)")
	f.StringVar(&o.clientSecret, "client-secret", "", "the client secret, for issuers that do not allow public clients")
	f.StringSliceVar(&o.scopes, "scopes", []string{gooidc.ScopeOpenID, "profile", "email", "groups"}, "the scopes to request")
	return cmd
}

// login runs the device flow and saves the tokens in the context.
func (a *app) login(ctx context.Context, cmd *cobra.Command, o loginOptions) error {
	f, err := config.Load(a.path())
	if err != nil {
		return err
	}
	env := a.env()
	name := f.ContextName(a.flags, env)
	if name == "" {
		name = defaultLoginContext
	}
	c := config.Context{Name: name}
	if cur := f.Context(name); cur != nil {
		c = *cur
	}
	// A new context gets the server in force; an existing one keeps its
	// own unless --server says otherwise.
	switch {
	case cmd.Flags().Changed("server"):
		c.Server = a.flags.Server
	case c.Server == "" && env.Server != "":
		c.Server = env.Server
	case c.Server == "":
		c.Server = config.DefaultServer
	}
	if cmd.Flags().Changed("namespace") {
		if fe := names.Namespace("", a.flags.Namespace); fe != nil {
			return usagef("namespace: %s", fe.Message)
		}
		c.Namespace = a.flags.Namespace
	}

	settings := config.OIDC{Issuer: o.issuer, ClientID: o.clientID, ClientSecret: o.clientSecret, Scopes: o.scopes}
	ctx = a.issuerContext(ctx)
	provider, oc, err := oauthConfig(ctx, settings)
	if err != nil {
		return err
	}
	da, err := oc.DeviceAuth(ctx)
	if err != nil {
		return fmt.Errorf("device authorization at %s: %w", o.issuer, err)
	}
	a.progress("Open %s and enter %s", da.VerificationURI, da.UserCode)
	if da.VerificationURIComplete != "" {
		a.progress("(or open %s)", da.VerificationURIComplete)
	}
	a.progress("Waiting for approval (Ctrl-C to give up)...")
	tok, err := oc.DeviceAccessToken(ctx, da)
	if err != nil {
		return deviceFlowError(ctx, err)
	}
	idToken, _ := tok.Extra("id_token").(string)
	if idToken == "" {
		return fmt.Errorf("the issuer %s returned no id_token (is %q among the scopes?)", o.issuer, gooidc.ScopeOpenID)
	}
	verified, err := provider.Verifier(&gooidc.Config{ClientID: o.clientID}).Verify(ctx, idToken)
	if err != nil {
		return fmt.Errorf("the issuer's ID token: %w", err)
	}
	var claims struct {
		Email string `json:"email"`
	}
	if err := verified.Claims(&claims); err != nil {
		return fmt.Errorf("the issuer's ID token: %w", err)
	}

	settings.RefreshToken = tok.RefreshToken
	c.Token, c.OIDC = idToken, &settings
	f.Set(c)
	if f.CurrentContext == "" {
		f.CurrentContext = c.Name
	}
	if err := f.Save(a.path()); err != nil {
		return err
	}
	who := claims.Email
	if who == "" {
		who = verified.Subject
	}
	fmt.Fprintf(a.streams.Out, "Logged in as %s (context %s); the token expires at %s\n", who, c.Name, verified.Expiry.UTC().Format(time.RFC3339))
	if tok.RefreshToken == "" {
		a.progress("warning: the issuer gave no refresh token: run no8s login again when the token expires (add the offline_access scope?)")
	}
	return nil
}

// issuerContext makes go-oidc and x/oauth2 send their requests to the
// issuer with an HTTP client whose requests each take at most
// --request-timeout (the device flow as a whole takes as long as the user
// does).
func (a *app) issuerContext(ctx context.Context) context.Context {
	hc := &http.Client{Timeout: a.timeout}
	return context.WithValue(gooidc.ClientContext(ctx, hc), oauth2.HTTPClient, hc)
}

// oauthConfig discovers the issuer and returns it with the OAuth client
// configuration on its endpoints.
func oauthConfig(ctx context.Context, o config.OIDC) (*gooidc.Provider, *oauth2.Config, error) {
	provider, err := gooidc.NewProvider(ctx, o.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("discover the issuer: %w", err)
	}
	ep := provider.Endpoint()
	if ep.AuthStyle, err = authStyle(provider, o.ClientSecret != ""); err != nil {
		return nil, nil, err
	}
	return provider, &oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Endpoint: ep, Scopes: o.Scopes}, nil
}

// authStyle is how the client authenticates at the token endpoint: a
// public client sends its id in the form; with a secret, HTTP Basic unless
// the issuer supports only client_secret_post (the default, per OpenID
// Connect Discovery, is client_secret_basic). It is never x/oauth2's
// auto-detection, which retries a refused request the other way: a
// refused device code is gone by then, and the user would read
// invalid_grant instead of access_denied.
func authStyle(provider *gooidc.Provider, secret bool) (oauth2.AuthStyle, error) {
	if !secret {
		return oauth2.AuthStyleInParams, nil
	}
	var meta struct {
		Methods []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := provider.Claims(&meta); err != nil {
		return 0, fmt.Errorf("read the issuer's discovery document: %w", err)
	}
	if len(meta.Methods) == 0 || slices.Contains(meta.Methods, "client_secret_basic") {
		return oauth2.AuthStyleInHeader, nil
	}
	return oauth2.AuthStyleInParams, nil
}

// deviceFlowError explains why polling for the device's token ended.
func deviceFlowError(ctx context.Context, err error) error {
	var re *oauth2.RetrieveError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("login cancelled; nothing was saved: %w", ctx.Err())
	case errors.As(err, &re) && re.ErrorCode == "access_denied":
		return fmt.Errorf("the login was refused at the issuer (access_denied); nothing was saved")
	case errors.As(err, &re) && re.ErrorCode == "expired_token",
		errors.Is(err, context.DeadlineExceeded): // x/oauth2 stops at the code's expiry
		return fmt.Errorf("the code expired before it was approved (expired_token); nothing was saved: run no8s login again")
	default:
		return fmt.Errorf("wait for the device's token: %w", err)
	}
}

// refreshIfDue returns the token to send: r's, or, when r's token is an
// ID token from no8s login (r.OIDC with a refresh token) that has expired
// or expires within refreshBefore, a new one from the issuer, saved in
// the context. Its exp is read without verification: the server verifies.
func (a *app) refreshIfDue(ctx context.Context, r config.Resolved) (string, error) {
	if r.OIDC == nil || r.OIDC.RefreshToken == "" {
		return r.Token, nil
	}
	if exp, ok := tokenExpiry(r.Token); ok && a.now().Add(refreshBefore).Before(exp) {
		return r.Token, nil
	}
	tok, err := a.refresh(ctx, r)
	if err != nil {
		return "", fmt.Errorf("refresh the ID token of context %q: %w: run no8s login again", r.Context, err)
	}
	return tok, nil
}

// refresh trades the context's refresh token for a new ID token and saves
// both (an issuer may rotate the refresh token).
func (a *app) refresh(ctx context.Context, r config.Resolved) (string, error) {
	ctx = a.issuerContext(ctx)
	_, oc, err := oauthConfig(ctx, *r.OIDC)
	if err != nil {
		return "", err
	}
	// A token without an access token is invalid: Token refreshes at once.
	tok, err := oc.TokenSource(ctx, &oauth2.Token{RefreshToken: r.OIDC.RefreshToken}).Token()
	if err != nil {
		return "", err
	}
	idToken, _ := tok.Extra("id_token").(string)
	if idToken == "" {
		return "", errors.New("the issuer returned no id_token")
	}
	f, err := config.Load(a.path())
	if err != nil {
		return "", err
	}
	c := f.Context(r.Context)
	if c == nil || c.OIDC == nil {
		return "", fmt.Errorf("context %q changed while refreshing", r.Context)
	}
	c.Token = idToken
	if tok.RefreshToken != "" {
		c.OIDC.RefreshToken = tok.RefreshToken
	}
	if err := f.Save(a.path()); err != nil {
		return "", err
	}
	return idToken, nil
}

// tokenExpiry reads a JWT's exp claim without verifying anything; ok is
// false when token is not a JWT with an exp.
func tokenExpiry(token string) (exp time.Time, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	secs, err := claims.Exp.Float64()
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(int64(secs), 0), true
}
