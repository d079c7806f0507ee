package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

const (
	tokensPath = "/api/v1/tokens"
	whoAmIPath = "/api/v1/whoami"
)

// Token is an API token's record. Value, the token itself, is set only in
// the answer that created it: it is shown once and stored nowhere.
type Token struct {
	ID             string     `json:"id"`
	Name           string     `json:"name"`
	Owner          string     `json:"owner"`
	Groups         []string   `json:"groups"`
	ServiceAccount bool       `json:"service_account"`
	CreatedBy      string     `json:"created_by"`
	CreatedAt      time.Time  `json:"created_at"`
	ExpiresAt      *time.Time `json:"expires_at"`
	RevokedAt      *time.Time `json:"revoked_at"`
	Value          string     `json:"token,omitempty"`
}

// TokenCreate is the body that creates a token.
type TokenCreate struct {
	// Name tells its owner's tokens apart.
	Name string `json:"name"`
	// ExpiresIn is a Go duration ("720h"); "" is the server's default,
	// "0" a token that does not expire.
	ExpiresIn string `json:"expires_in,omitempty"`
	// ServiceAccount makes a token for automation: it authenticates as
	// "serviceaccount:<name>" rather than as its creator.
	ServiceAccount bool `json:"service_account,omitempty"`
	// Groups are the token's groups, a subset of its creator's (default:
	// the creator's for a personal token, none for a service account).
	Groups []string `json:"groups,omitempty"`
}

// WhoAmI is who the server took a request to come from.
type WhoAmI struct {
	Username  string     `json:"username"`
	Groups    []string   `json:"groups"`
	Method    string     `json:"method"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// CreateToken creates an API token; the answer's Value is the token, shown
// this once.
func (c *Client) CreateToken(ctx context.Context, body TokenCreate) (*Token, error) {
	var out Token
	if _, err := c.do(ctx, request{method: http.MethodPost, path: tokensPath, body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTokens lists the caller's tokens (every token for an administrator
// with all); revoked and expired ones with inactive.
func (c *Client) ListTokens(ctx context.Context, all, inactive bool) ([]Token, error) {
	q := url.Values{}
	if all {
		q.Set("all", "true")
	}
	if inactive {
		q.Set("include_inactive", "true")
	}
	var out []Token
	_, err := c.do(ctx, request{method: http.MethodGet, path: tokensPath, query: q}, &out)
	return out, err
}

// RevokeToken revokes a token by id.
func (c *Client) RevokeToken(ctx context.Context, id string) (*Token, error) {
	var out Token
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: tokensPath + "/" + url.PathEscape(id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WhoAmI asks the server who it takes the client's credentials to be.
func (c *Client) WhoAmI(ctx context.Context) (*WhoAmI, error) {
	var out WhoAmI
	if _, err := c.do(ctx, request{method: http.MethodGet, path: whoAmIPath}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
