package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/client"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resourcepb"
)

// Who calls the public API: every request but the public paths carries a
// bearer credential (an API token, the bootstrap token or an OIDC JWT),
// which becomes the request's authn.Principal; requests on the service
// listener carry their service identity instead. With Auth.Mode none every
// request is anonymous.

// codeUnauthenticated answers a request without acceptable credentials.
const codeUnauthenticated = client.CodeUnauthenticated

// authRealm is the realm of every WWW-Authenticate challenge.
const authRealm = "no8s"

// anonymous is the principal of every request with authentication off.
var anonymous = &authn.Principal{Username: "anonymous", Method: authn.MethodNone}

// newAuthenticator builds the authenticator of cfg.Auth, looking API
// tokens up in the store's TokenService.
func newAuthenticator(cfg Config) *authn.Authenticator {
	ac := authn.Config{BootstrapToken: cfg.Auth.BootstrapToken, JWT: cfg.Auth.JWT, AdminGroups: cfg.Auth.AdminGroups}
	if cfg.Tokens != nil {
		ac.Tokens = func(ctx context.Context, id string) (*authn.TokenRecord, error) {
			ctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
			defer cancel()
			resp, err := cfg.Tokens.LookupToken(ctx, &storev1.LookupTokenRequest{Id: id})
			if err != nil {
				if err = backendErr(err); problem.KindOf(err) == problem.NotFound {
					return nil, authn.ErrUnknownToken
				}
				return nil, err
			}
			return resourcepb.TokenRecordFromProto(resp.GetToken()), nil
		}
	}
	return authn.New(ac)
}

// authenticate puts the caller's Principal in the request's context, or
// answers 401 with a challenge.
func (s *Service) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		req := c.Request()
		if s.cfg.Auth.Open() {
			c.SetRequest(req.WithContext(authn.WithPrincipal(req.Context(), anonymous)))
			return next(c)
		}
		if _, ok := authz.Caller(req.Context()); ok || slices.Contains(s.cfg.Auth.PublicPaths, req.URL.Path) {
			return next(c)
		}
		token, err := bearerOf(req)
		stream := req.Method == http.MethodGet && isEventStream(c.Path())
		if err == nil && token == "" && stream {
			token = streamToken(req)
		}
		var p *authn.Principal
		if err == nil {
			p, err = s.authn.Authenticate(req.Context(), token)
		}
		if err != nil {
			return s.refuseCredentials(c, err)
		}
		ctx := authn.WithPrincipal(req.Context(), p)
		if stream {
			ctx = s.watchCredential(ctx, token, p)
		}
		c.SetRequest(req.WithContext(ctx))
		return next(c)
	}
}

// bearerOf reads the request's bearer token ("" when it sends none).
func bearerOf(req *http.Request) (string, error) {
	h := req.Header.Values(echo.HeaderAuthorization)
	switch {
	case len(h) == 0:
		return "", nil
	case len(h) > 1:
		return "", &authn.InvalidError{Reason: "more than one Authorization header"}
	}
	tok, ok := authn.BearerToken(h[0])
	if !ok {
		return "", &authn.InvalidError{Reason: "the Authorization header is not a Bearer credential"}
	}
	return tok, nil
}

// accessTokenParam carries an event stream's token in its URL (RFC 6750,
// section 2.3) for clients that cannot send headers: a browser's
// EventSource. Only the watch routes take it; the access log never writes
// query strings.
const accessTokenParam = "access_token"

// streamToken is an event stream request's access_token parameter.
func streamToken(req *http.Request) string {
	return req.URL.Query().Get(accessTokenParam)
}

// refuseCredentials answers a refused credential: 401 with a challenge
// (RFC 6750), or the backend's error when the token store could not be
// asked.
func (s *Service) refuseCredentials(c *echo.Context, err error) error {
	var inv *authn.InvalidError
	challenge := fmt.Sprintf("Bearer realm=%q", authRealm)
	switch {
	case errors.Is(err, authn.ErrNoCredentials):
	case errors.As(err, &inv):
		challenge += fmt.Sprintf(`, error="invalid_token", error_description=%q`, strings.ReplaceAll(inv.Reason, `"`, "'"))
	default:
		return err
	}
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, challenge)
	return unauthenticated(err)
}

// unauthenticated is the 401 of a refused credential; other errors (the
// token store could not be asked) pass as they are.
func unauthenticated(err error) error {
	var inv *authn.InvalidError
	if !errors.Is(err, authn.ErrNoCredentials) && !errors.As(err, &inv) {
		return err
	}
	return &httpError{status: http.StatusUnauthorized, code: codeUnauthenticated, detail: err.Error()}
}

// isEventStream reports whether route is one of the watch routes, whose
// answers last.
func isEventStream(route string) bool {
	return route == "/api/v1/events" || route == "/api/v1/resources/:id/events"
}

// watchCredential returns ctx canceled once the stream's credential is
// no longer valid: revoked, expired, or refused on a later check.
func (s *Service) watchCredential(ctx context.Context, token string, p *authn.Principal) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		t := time.NewTicker(s.cfg.Auth.StreamRecheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if !p.Expiry.IsZero() && !now.Before(p.Expiry) {
					cancel(errors.New("the credential expired"))
					return
				}
				if _, err := s.authn.Authenticate(ctx, token); err != nil && ctx.Err() == nil {
					var inv *authn.InvalidError
					if errors.As(err, &inv) {
						s.log.Info("event stream ended: its credential is no longer valid", "user", p.Username, "reason", inv.Reason)
						cancel(err)
						return
					}
				}
			}
		}
	}()
	return ctx
}

// principal is the request's Principal (anonymous when it has none: a
// public path or a service caller).
func principal(c *echo.Context) *authn.Principal {
	if p := authn.FromContext(c.Request().Context()); p != nil {
		return p
	}
	if id, ok := authz.Caller(c.Request().Context()); ok {
		return &authn.Principal{Username: "service:" + id.String(), Method: "identity"}
	}
	return anonymous
}

func (s *Service) whoAmI(c *echo.Context) error {
	p := principal(c)
	out := client.WhoAmI{Username: p.Username, Groups: p.Groups, Method: p.Method}
	if out.Groups == nil {
		out.Groups = []string{}
	}
	if !p.Expiry.IsZero() {
		e := p.Expiry.UTC()
		out.ExpiresAt = &e
	}
	return writeJSON(c, http.StatusOK, out)
}
