package gateway

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/rbac"
	"github.com/no8s/no8s/services/internal/resourcepb"
)

// API tokens: created for the caller (or, with the manage-tokens verb, a
// service account) and shown once, listed and revoked by their owner,
// their creator or a holder of manage-tokens.

// tokenStore is the TokenService, or 503 when the gateway has none.
func (s *Service) tokenStore() (storev1.TokenServiceClient, error) {
	if s.cfg.Tokens == nil {
		return nil, problem.New(problem.Unavailable, problem.CodeUnavailable, "API tokens are not served by this gateway")
	}
	return s.cfg.Tokens, nil
}

func (s *Service) createToken(c *echo.Context) error {
	p := principal(c)
	if p.Method == authn.MethodNone {
		return problem.Invalidf("authentication is off (--auth=none): a token would not be checked")
	}
	ts, err := s.tokenStore()
	if err != nil {
		return err
	}
	var body client.TokenCreate
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
	// A personal token is its owner's to make; a service account's
	// authenticates as nobody who asked, and is made only with the
	// manage-tokens verb.
	if body.ServiceAccount {
		if err := s.authorize(c.Request().Context(), rbac.Request{Verb: rbac.VerbManageTokens, Type: rbac.KindTokens, Name: body.Name}); err != nil {
			return err
		}
	}
	tok, err := s.newTokenDocument(p, body)
	if err != nil {
		return err
	}
	id, hash, value, err := authn.NewToken()
	if err != nil {
		return err
	}
	tok.ID = id
	resp, err := call(s, c, ts.CreateToken, &storev1.CreateTokenRequest{Token: resourcepb.TokenToProto(tok, hash)})
	if err != nil {
		return err
	}
	out := resourcepb.TokenFromProto(resp.GetToken())
	out.Value = value
	s.log.Info("API token created", "id", out.ID, "name", out.Name, "owner", out.Owner, "by", p.Username)
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/tokens/"+out.ID)
	return writeJSON(c, http.StatusCreated, out)
}

// newTokenDocument checks a token request against its creator: its name,
// expiry and groups (never more than the creator's).
func (s *Service) newTokenDocument(p *authn.Principal, body client.TokenCreate) (*client.Token, error) {
	var errs []problem.FieldError
	if fe := names.Name("/name", body.Name); fe != nil {
		errs = append(errs, *fe)
	}
	tok := &client.Token{Name: body.Name, Owner: p.Username, CreatedBy: p.Username, ServiceAccount: body.ServiceAccount}
	switch body.ExpiresIn {
	case "":
		e := time.Now().Add(s.cfg.Auth.TokenExpiry).UTC()
		tok.ExpiresAt = &e
	case "0":
	default:
		d, err := time.ParseDuration(body.ExpiresIn)
		if err != nil || d < time.Minute {
			errs = append(errs, problem.FieldError{Path: "/expires_in", Message: "want a duration of at least 1m (\"720h\"), or \"0\" for a token that does not expire"})
		} else {
			e := time.Now().Add(d).UTC()
			tok.ExpiresAt = &e
		}
	}
	switch {
	case body.Groups != nil:
		for i, g := range body.Groups {
			if !slices.Contains(p.Groups, g) {
				errs = append(errs, problem.FieldError{Path: "/groups/" + strconv.Itoa(i), Message: "a token's groups are a subset of its creator's: you are not in " + strconv.Quote(g)})
			}
		}
		tok.Groups = slices.Clone(body.Groups)
	case !body.ServiceAccount:
		tok.Groups = slices.Clone(p.Groups)
	}
	if tok.Groups == nil {
		tok.Groups = []string{}
	}
	if body.ServiceAccount {
		tok.Owner = rbac.ServiceAccountPrefix + body.Name
	}
	if err := fieldsError("invalid token", errs); err != nil {
		return nil, err
	}
	return tok, nil
}

// mayManage reports whether the caller p may see and revoke t: its owner
// or creator, or a holder of the manage-tokens verb.
func (s *Service) mayManage(ctx context.Context, p *authn.Principal, t *storev1.Token) (bool, error) {
	if t.GetOwner() == p.Username || t.GetCreatedBy() == p.Username {
		return true, nil
	}
	return s.allowed(ctx, rbac.Request{Verb: rbac.VerbManageTokens, Type: rbac.KindTokens, Name: strings.TrimPrefix(t.GetOwner(), rbac.ServiceAccountPrefix)})
}

func (s *Service) listTokens(c *echo.Context) error {
	ts, err := s.tokenStore()
	if err != nil {
		return err
	}
	p := principal(c)
	all := c.QueryParam("all") == "true"
	if all {
		if err := s.authorize(c.Request().Context(), rbac.Request{Verb: rbac.VerbManageTokens, Type: rbac.KindTokens}); err != nil {
			return err
		}
	}
	resp, err := call(s, c, ts.ListTokens, &storev1.ListTokensRequest{IncludeInactive: c.QueryParam("include_inactive") == "true"})
	if err != nil {
		return err
	}
	out := []*client.Token{}
	for _, t := range resp.GetTokens() {
		if all || t.GetOwner() == p.Username || t.GetCreatedBy() == p.Username {
			out = append(out, resourcepb.TokenFromProto(t))
		}
	}
	return writeJSON(c, http.StatusOK, out)
}

func (s *Service) revokeToken(c *echo.Context) error {
	ts, err := s.tokenStore()
	if err != nil {
		return err
	}
	id := c.Param("id")
	if !authn.ValidTokenID(id) {
		return problem.NotFoundf("no token %q", id)
	}
	p := principal(c)
	found, err := call(s, c, ts.LookupToken, &storev1.LookupTokenRequest{Id: id})
	if err != nil {
		return err
	}
	if ok, err := s.mayManage(c.Request().Context(), p, found.GetToken()); err != nil {
		return err
	} else if !ok {
		audit.EntryFrom(c.Request().Context()).Deny("not the token's owner, its creator or an administrator")
		return problem.NotFoundf("no token %q", id)
	}
	resp, err := call(s, c, ts.RevokeToken, &storev1.RevokeTokenRequest{Id: id})
	if err != nil {
		return err
	}
	s.authn.Forget(id)
	s.log.Info("API token revoked", "id", id, "owner", resp.GetToken().GetOwner(), "by", p.Username)
	return writeJSON(c, http.StatusOK, resourcepb.TokenFromProto(resp.GetToken()))
}
