// Package oidctest runs an OpenID Connect issuer for tests: discovery, a
// JWKS that can rotate, signing of ID tokens, and the OAuth 2.0 device
// authorization grant (RFC 8628) with refresh tokens, in the REST shapes
// real issuers use, so that golang.org/x/oauth2 and go-oidc work against
// it. It is for tests only (gateway, CLI and e2e tests import it); it
// depends on go-jose and the standard library.
//
//	iss := oidctest.New(t)
//	tok := iss.Sign(iss.Claims("alice", "no8s")) // RS256, current key
//	iss.Rotate()                                   // new key, still published with the old
//	iss.SetAvailable(false)                        // every endpoint answers 503
//
// The device grant: POST /device returns a device code and a user code;
// POST /token with the device code answers authorization_pending until the
// test calls Approve(userCode, claims) (or Deny), then an id_token signed
// with the current key, an access token and a refresh token; the refresh
// token grant issues a fresh id_token for the same claims.
package oidctest
