// Package authn says who a user or automation calling the public API is:
// API tokens (generated here, stored hashed by the store), the bootstrap
// token of a file, and OIDC JWTs (package oidc). The gateway's middleware
// puts the resulting Principal in each request's context.
package authn
