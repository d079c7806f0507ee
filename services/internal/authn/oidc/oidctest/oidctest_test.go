package oidctest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/no8s/no8s/services/internal/authn/oidc"
	"github.com/no8s/no8s/services/internal/authn/oidc/oidctest"
)

const clientID = "no8s-cli"

// oauthConfig discovers iss with go-oidc, as a CLI would, and returns the
// x/oauth2 config of a public client on its endpoints.
func oauthConfig(t *testing.T, iss *oidctest.Issuer, style oauth2.AuthStyle) *oauth2.Config {
	t.Helper()
	provider, err := gooidc.NewProvider(t.Context(), iss.URL())
	if err != nil {
		t.Fatal(err)
	}
	ep := provider.Endpoint()
	if ep.DeviceAuthURL != iss.URL()+oidctest.DevicePath || ep.TokenURL != iss.URL()+oidctest.TokenPath {
		t.Fatalf("discovered endpoints %+v", ep)
	}
	ep.AuthStyle = style
	return &oauth2.Config{ClientID: clientID, Endpoint: ep, Scopes: []string{gooidc.ScopeOpenID, "email", "groups"}}
}

// postToken posts form to the token endpoint and returns the status and
// the OAuth error code (or "").
func postToken(t *testing.T, iss *oidctest.Issuer, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, iss.URL()+oidctest.TokenPath, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var body struct {
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body.Error
}

func devicePoll(deviceCode string) url.Values {
	return url.Values{
		"grant_type":  {"urn:ietf:params:oauth:grant-type:device_code"},
		"device_code": {deviceCode},
		"client_id":   {clientID},
	}
}

// TestDeviceFlowWithOAuth2Client runs RFC 8628 end to end with
// golang.org/x/oauth2 as the client: device authorization, pending until
// the user approves, an ID token the oidc Verifier accepts, and a refresh.
func TestDeviceFlowWithOAuth2Client(t *testing.T) {
	for name, style := range map[string]oauth2.AuthStyle{
		"auto-detect": oauth2.AuthStyleAutoDetect, // tries Basic first, then the form
		"in params":   oauth2.AuthStyleInParams,
	} {
		t.Run(name, func(t *testing.T) {
			iss := oidctest.New(t)
			cfg := oauthConfig(t, iss, style)

			da, err := cfg.DeviceAuth(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if da.DeviceCode == "" || len(da.UserCode) != 9 || da.VerificationURI != iss.URL()+oidctest.VerifyUserPath ||
				da.Interval != oidctest.PollInterval || time.Until(da.Expiry) < 9*time.Minute {
				t.Fatalf("device authorization %+v", da)
			}

			if status, code := postToken(t, iss, devicePoll(da.DeviceCode)); status != http.StatusBadRequest || code != "authorization_pending" {
				t.Fatalf("before approval: %d %q, want 400 authorization_pending", status, code)
			}

			iss.Approve(da.UserCode, map[string]any{"sub": "alice", "email": "alice@example.com", "groups": []string{"dev"}})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			tok, err := cfg.DeviceAccessToken(ctx, da)
			if err != nil {
				t.Fatal(err)
			}
			if tok.AccessToken == "" || tok.RefreshToken == "" || tok.TokenType != "Bearer" || time.Until(tok.Expiry) < 50*time.Minute {
				t.Fatalf("token %+v", tok)
			}
			v, err := oidc.New(oidc.Config{IssuerURL: iss.URL(), Audiences: []string{clientID}, UsernameClaim: "email"}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			idToken, _ := tok.Extra("id_token").(string)
			p, err := v.Verify(t.Context(), idToken)
			if err != nil {
				t.Fatalf("id_token: %v", err)
			}
			if p.Username != "alice@example.com" || !reflect.DeepEqual(p.Groups, []string{"dev"}) {
				t.Fatalf("principal %+v", p)
			}

			// The device code is used up.
			if status, code := postToken(t, iss, devicePoll(da.DeviceCode)); status != http.StatusBadRequest || code != "invalid_grant" {
				t.Fatalf("second exchange: %d %q, want invalid_grant", status, code)
			}

			// Refresh through x/oauth2's token source.
			refreshed, err := cfg.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
			if err != nil {
				t.Fatal(err)
			}
			newID, _ := refreshed.Extra("id_token").(string)
			if newID == "" {
				t.Fatal("refresh returned no id_token")
			}
			if p, err := v.Verify(t.Context(), newID); err != nil || p.Username != "alice@example.com" {
				t.Fatalf("refreshed id_token: %+v, %v", p, err)
			}
		})
	}
}

func TestDeviceFlowRefusals(t *testing.T) {
	iss := oidctest.New(t)
	cfg := oauthConfig(t, iss, oauth2.AuthStyleInParams)

	da, err := cfg.DeviceAuth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	iss.Deny(da.UserCode)
	if status, code := postToken(t, iss, devicePoll(da.DeviceCode)); status != http.StatusBadRequest || code != "access_denied" {
		t.Fatalf("denied: %d %q", status, code)
	}

	for name, tc := range map[string]struct {
		form url.Values
		want string
	}{
		"unknown device code":   {devicePoll("nope"), "invalid_grant"},
		"unknown refresh token": {url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"nope"}, "client_id": {clientID}}, "invalid_grant"},
		"unsupported grant":     {url.Values{"grant_type": {"password"}, "client_id": {clientID}}, "unsupported_grant_type"},
		"no client":             {url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"nope"}}, "invalid_client"},
	} {
		if _, code := postToken(t, iss, tc.form); code != tc.want {
			t.Errorf("%s: error %q, want %q", name, code, tc.want)
		}
	}

	// Another client cannot redeem this client's device code.
	da, err = cfg.DeviceAuth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	iss.Approve(da.UserCode, map[string]any{"sub": "alice"})
	form := devicePoll(da.DeviceCode)
	form.Set("client_id", "intruder")
	if _, code := postToken(t, iss, form); code != "invalid_grant" {
		t.Fatalf("other client: %q", code)
	}
}

func TestDeviceCodeExpires(t *testing.T) {
	var now atomic.Int64 // Unix seconds
	now.Store(time.Now().Unix())
	iss := oidctest.New(t, oidctest.WithClock(func() time.Time { return time.Unix(now.Load(), 0) }))
	cfg := oauthConfig(t, iss, oauth2.AuthStyleInParams)
	da, err := cfg.DeviceAuth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	now.Add(int64((oidctest.DeviceCodeLifetime + time.Second).Seconds()))
	if _, code := postToken(t, iss, devicePoll(da.DeviceCode)); code != "expired_token" {
		t.Fatalf("expired device code: %q", code)
	}
}

func TestIssuerUnavailable(t *testing.T) {
	iss := oidctest.New(t)
	iss.SetAvailable(false)
	if _, err := gooidc.NewProvider(t.Context(), iss.URL()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("discovery while down: %v", err)
	}
	iss.SetAvailable(true)
	if _, err := gooidc.NewProvider(t.Context(), iss.URL()); err != nil {
		t.Fatal(err)
	}
}
