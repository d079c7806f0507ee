// Package oidc verifies OpenID Connect ID tokens (JWTs) presented as bearer
// tokens and maps their claims to an authn.Principal, the way kube-apiserver
// does for its --oidc-* flags.
//
// A Verifier trusts one issuer: it discovers the issuer's keys lazily (so the
// gateway starts while the issuer is down), follows key rotation by
// refetching the JWKS when a token names an unknown key, accepts only the
// configured asymmetric signing algorithms, and checks iss, aud, exp, nbf
// and iat with a bounded clock skew. Verifiers routes a token to the Verifier
// of its (unverified) issuer, which then checks everything.
//
// A token whose signature fails with the cached keys (an unknown kid, or a
// forged signature) makes the key set refetch the JWKS before it is refused;
// concurrent refetches are shared, so one gateway sends at most one JWKS
// request at a time to an issuer.
package oidc
