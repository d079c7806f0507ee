package authn

import (
	"context"
	"time"
)

// Methods a Principal authenticated with.
const (
	MethodToken     = "token"
	MethodBootstrap = "bootstrap"
	MethodOIDC      = "oidc"
	MethodNone      = "none"
)

// GroupAdmins is the group of the bootstrap token, whose members may do
// everything once roles exist.
const GroupAdmins = "no8s:admins"

// Principal is who a request comes from.
type Principal struct {
	// Username identifies the user or service account.
	Username string
	// Groups are the groups it belongs to.
	Groups []string
	// Method is how it authenticated (MethodToken, ...).
	Method string
	// TokenID is the API token's id when Method is MethodToken.
	TokenID string
	// Expiry is when its credential stops being valid (zero: never).
	Expiry time.Time
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the request's Principal, or nil when it has none.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
