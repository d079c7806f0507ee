package oidctest

import (
	"crypto/rand"
	"maps"
	"net/http"
	"net/url"
	"strings"
)

// Grant types of the token endpoint.
const (
	grantDeviceCode   = "urn:ietf:params:oauth:grant-type:device_code"
	grantRefreshToken = "refresh_token"
)

// userCodeAlphabet has no vowels or look-alikes (RFC 8628 §6.1).
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// deviceAuthorization is RFC 8628 §3.1-3.2: a client_id (and scope) in,
// a device code and a user code out.
func (i *Issuer) deviceAuthorization(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "malformed form")
		return
	}
	clientID := clientIDOf(r)
	if clientID == "" {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client_id is required")
		return
	}
	deviceCode := randomString(32)
	userCode := newUserCode()
	i.mu.Lock()
	i.devices[deviceCode] = &deviceGrant{clientID: clientID, userCode: userCode, expires: i.now().Add(DeviceCodeLifetime)}
	i.userCodes[userCode] = deviceCode
	i.mu.Unlock()
	verify := i.URL() + VerifyUserPath
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code":               deviceCode,
		"user_code":                 userCode,
		"verification_uri":          verify,
		"verification_uri_complete": verify + "?user_code=" + userCode,
		"expires_in":                int(DeviceCodeLifetime.Seconds()),
		"interval":                  PollInterval,
	})
}

// newUserCode is "XXXX-XXXX" over userCodeAlphabet.
func newUserCode() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	var sb strings.Builder
	for n, c := range b {
		if n == 4 {
			sb.WriteByte('-')
		}
		sb.WriteByte(userCodeAlphabet[int(c)%len(userCodeAlphabet)])
	}
	return sb.String()
}

// Approve is the user approving userCode's device as the user that claims
// describe (sub, email, groups, ...): the device's next poll gets an ID
// token with these claims over iss, aud (the client id), iat and exp. An
// unknown user code is a test error.
func (i *Issuer) Approve(userCode string, claims map[string]any) {
	i.decide(userCode, func(g *deviceGrant) { g.claims = maps.Clone(claims) })
}

// Deny is the user refusing userCode's device: its next poll gets
// access_denied.
func (i *Issuer) Deny(userCode string) {
	i.decide(userCode, func(g *deviceGrant) { g.denied = true })
}

func (i *Issuer) decide(userCode string, f func(*deviceGrant)) {
	i.mu.Lock()
	defer i.mu.Unlock()
	g, ok := i.devices[i.userCodes[userCode]]
	if !ok {
		i.errorf("oidctest: unknown user code %q", userCode)
		return
	}
	f(g)
}

// token is the token endpoint (RFC 6749 §5, RFC 8628 §3.4-3.5): the device
// code grant and the refresh token grant.
func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "malformed form")
		return
	}
	clientID := clientIDOf(r)
	if clientID == "" {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client_id is required")
		return
	}
	switch gt := r.PostForm.Get("grant_type"); gt {
	case grantDeviceCode:
		i.deviceCodeGrant(w, r.PostForm.Get("device_code"), clientID)
	case grantRefreshToken:
		i.refreshTokenGrant(w, r.PostForm.Get("refresh_token"), clientID)
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type "+gt+" is not supported")
	}
}

func (i *Issuer) deviceCodeGrant(w http.ResponseWriter, deviceCode, clientID string) {
	i.mu.Lock()
	g, ok := i.devices[deviceCode]
	if !ok || g.clientID != clientID {
		i.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown device code")
		return
	}
	switch {
	case i.now().After(g.expires):
		i.forgetDevice(deviceCode)
		i.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "expired_token", "the device code expired")
	case g.denied:
		i.forgetDevice(deviceCode)
		i.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "access_denied", "the user denied the request")
	case g.claims == nil:
		i.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "authorization_pending", "the user has not approved yet")
	default:
		i.forgetDevice(deviceCode) // a device code is used once
		refresh := randomString(32)
		i.refresh[refresh] = refreshGrant{clientID: clientID, claims: g.claims}
		i.mu.Unlock()
		i.issue(w, clientID, g.claims, refresh)
	}
}

// forgetDevice drops a device grant; i.mu is held.
func (i *Issuer) forgetDevice(deviceCode string) {
	delete(i.userCodes, i.devices[deviceCode].userCode)
	delete(i.devices, deviceCode)
}

// refreshTokenGrant issues a new ID token for the same user. The refresh
// token is not rotated: it is returned again and stays valid.
func (i *Issuer) refreshTokenGrant(w http.ResponseWriter, refresh, clientID string) {
	i.mu.Lock()
	g, ok := i.refresh[refresh]
	i.mu.Unlock()
	if !ok || g.clientID != clientID {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown refresh token")
		return
	}
	i.issue(w, clientID, g.claims, refresh)
}

// issue answers a successful token request: an ID token with claims over
// the defaults, an opaque access token, and refresh.
func (i *Issuer) issue(w http.ResponseWriter, clientID string, claims map[string]any, refresh string) {
	idClaims := i.Claims("", clientID)
	delete(idClaims, "sub")
	for k, v := range claims {
		idClaims[k] = v
	}
	idToken := i.Sign(idClaims)
	if idToken == "" {
		oauthError(w, http.StatusInternalServerError, "server_error", "cannot sign")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":  randomString(32),
		"token_type":    "Bearer",
		"expires_in":    int(TokenLifetime.Seconds()),
		"refresh_token": refresh,
		"id_token":      idToken,
		"scope":         "openid",
	})
}

// clientIDOf reads the client id from HTTP Basic authentication or the
// form (public clients send no secret; none is checked).
func clientIDOf(r *http.Request) string {
	if id, _, ok := r.BasicAuth(); ok && id != "" {
		// golang.org/x/oauth2 form-encodes the id in the header.
		if unescaped, err := url.QueryUnescape(id); err == nil {
			return unescaped
		}
		return id
	}
	return r.PostForm.Get("client_id")
}

// oauthError writes an RFC 6749 §5.2 error response.
func oauthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}
