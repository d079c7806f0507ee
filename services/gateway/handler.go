package gateway

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v5"
	"google.golang.org/grpc/metadata"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/internal/rbac"
	"github.com/no8s/no8s/services/internal/resource"
)

//go:embed openapi.json
var openAPIDocument []byte

// HeaderRequestID carries the request id, echoed back or generated.
const HeaderRequestID = client.HeaderRequestID

// Response headers of a resource list.
const (
	HeaderContinueToken   = client.HeaderContinueToken
	HeaderResourceVersion = client.HeaderResourceVersion
)

// Error codes that only the HTTP edge produces.
const (
	codeMethodNotAllowed     = "method_not_allowed"
	codeUnsupportedMediaType = "unsupported_media_type"
	codeRequestTimeout       = "request_timeout"
	// codeCrossOrigin refuses a write a browser could send cross-site
	// (403, crossOrigin).
	codeCrossOrigin = "cross_origin"
	// codeHostNotAllowed refuses a request whose Host is not one of the
	// gateway's names (421, allowedHost).
	codeHostNotAllowed = "host_not_allowed"
)

const ctxKeyRequestID = "no8s.request_id"

// ctxKeyUnmatched marks a request that matched no route (or not its
// method): its metrics go under the route "unmatched", never its path.
const ctxKeyUnmatched = "no8s.unmatched"

// errorBody is the JSON document of every error response.
type errorBody struct {
	Detail    string               `json:"detail"`
	Code      string               `json:"code"`
	Errors    []problem.FieldError `json:"errors"`
	RequestID string               `json:"request_id,omitempty"`
}

// httpError is an error answered with a status that no problem kind has
// (405, 415).
type httpError struct {
	status int
	code   string
	detail string
}

func (e *httpError) Error() string { return e.detail }

// routes builds the echo instance with every route and middleware.
func (s *Service) routes() *echo.Echo {
	e := echo.NewWithConfig(echo.Config{
		Logger: s.log,
		Router: echo.NewRouter(echo.RouterConfig{
			NotFoundHandler: func(c *echo.Context) error {
				c.Set(ctxKeyUnmatched, true)
				return problem.NotFoundf("no route for %s %s", c.Request().Method, c.Request().URL.Path)
			},
			MethodNotAllowedHandler: func(c *echo.Context) error {
				c.Set(ctxKeyUnmatched, true)
				if allow, ok := c.Get(echo.ContextKeyHeaderAllow).(string); ok && allow != "" {
					c.Response().Header().Set(echo.HeaderAllow, allow)
				}
				return &httpError{status: http.StatusMethodNotAllowed, code: codeMethodNotAllowed,
					detail: fmt.Sprintf("method %s is not allowed on %s", c.Request().Method, c.Request().URL.Path)}
			},
		}),
		HTTPErrorHandler: s.handleError,
	})
	e.Pre(securityHeaders, headAsGet)
	e.Use(s.requestID, s.accessLog, s.auditRequest, s.recoverPanic, s.allowedHost, s.crossOrigin, s.limitRefused, s.authenticate, s.limitRequests, checkRequestText, s.boundBody, requireJSON, s.fenceContext)

	ready := echo.WrapHandler(health.ProbeHandler(s.cfg.Health, s.cfg.Health.Ready))
	e.GET("/health", ready)
	e.GET(health.ReadyPath, ready)
	e.GET(health.LivePath, echo.WrapHandler(health.ProbeHandler(s.cfg.Health, s.cfg.Health.Live)))
	e.GET("/api/v1/openapi.json", s.openAPI)
	if s.cfg.Health.Metrics != nil {
		e.GET(health.MetricsPath, echo.WrapHandler(s.cfg.Health.Metrics))
	}

	e.POST("/api/v1/resource-types", s.createType, s.require(rbac.VerbCreate, rbac.KindResourceTypes))
	e.GET("/api/v1/resource-types", s.listTypes, s.require(rbac.VerbList, rbac.KindResourceTypes))
	e.GET("/api/v1/resource-types/:id", s.getType, s.require(rbac.VerbGet, rbac.KindResourceTypes))
	e.GET("/api/v1/resource-types/:id/:version", s.getTypeByName, s.require(rbac.VerbGet, rbac.KindResourceTypes))
	e.PUT("/api/v1/resource-types/:id", s.updateType, s.require(rbac.VerbUpdate, rbac.KindResourceTypes))
	e.DELETE("/api/v1/resource-types/:id", s.deleteType, s.require(rbac.VerbDelete, rbac.KindResourceTypes))

	e.POST("/api/v1/namespaces", s.createNamespace, s.require(rbac.VerbCreate, rbac.KindNamespaces))
	e.GET("/api/v1/namespaces", s.listNamespaces, s.require(rbac.VerbList, rbac.KindNamespaces))
	e.GET("/api/v1/namespaces/:name", s.getNamespace, s.require(rbac.VerbGet, rbac.KindNamespaces))
	e.DELETE("/api/v1/namespaces/:name", s.deleteNamespace, s.require(rbac.VerbDelete, rbac.KindNamespaces))

	e.POST("/api/v1/resources", s.createResource)
	e.POST("/api/v1/resources/apply", s.applyResource)
	e.GET("/api/v1/resources", s.listResources)
	e.GET("/api/v1/resources/by-name/:type/:version/:name", s.getResourceByName)
	e.GET("/api/v1/resources/:id", s.getResource, s.requireStored(rbac.VerbGet))
	e.PUT("/api/v1/resources/:id", s.updateResource)
	e.PATCH("/api/v1/resources/:id", s.patchResource)
	e.DELETE("/api/v1/resources/:id", s.deleteResource)
	e.PUT("/api/v1/resources/:id/finalizers", s.updateFinalizers, s.requireStored(rbac.VerbUpdate))
	e.POST("/api/v1/resources/:id/reconcile", s.requestReconcile, s.requireStored(rbac.VerbReconcile))
	e.GET("/api/v1/resources/:id/history", s.listHistory, s.requireStored(rbac.VerbGet))
	e.GET("/api/v1/resources/:id/outputs", s.getOutputs, s.requireStored(rbac.VerbGet))
	e.GET("/api/v1/reconcilers", s.listReconcilers, s.require(rbac.VerbList, rbac.KindResourceTypes))
	e.GET("/api/v1/resources/:id/events", s.watchResourceEvents, s.requireStored(rbac.VerbWatch))
	e.GET("/api/v1/events", s.watchEvents)
	e.GET("/api/v1/resources/:id/event-records", s.listResourceEventRecords, s.requireStored(rbac.VerbGet))
	e.POST("/api/v1/resources/:id/event-records", s.recordEvent, s.requireStored(rbac.VerbUpdate))
	e.GET("/api/v1/event-records", s.listEventRecords, s.require(rbac.VerbList, rbac.Wildcard))

	e.POST("/api/v1/admission-webhooks", s.createWebhook, s.require(rbac.VerbCreate, rbac.KindWebhooks))
	e.GET("/api/v1/admission-webhooks", s.listWebhooks, s.require(rbac.VerbList, rbac.KindWebhooks))
	e.GET("/api/v1/admission-webhooks/:id", s.getWebhook, s.require(rbac.VerbGet, rbac.KindWebhooks))
	e.PUT("/api/v1/admission-webhooks/:id", s.updateWebhook, s.require(rbac.VerbUpdate, rbac.KindWebhooks))
	e.PATCH("/api/v1/admission-webhooks/:id", s.patchWebhook, s.require(rbac.VerbPatch, rbac.KindWebhooks))
	e.DELETE("/api/v1/admission-webhooks/:id", s.deleteWebhook, s.require(rbac.VerbDelete, rbac.KindWebhooks))

	e.GET("/api/v1/whoami", s.whoAmI)
	e.POST("/api/v1/tokens", s.createToken)
	e.GET("/api/v1/tokens", s.listTokens)
	e.DELETE("/api/v1/tokens/:id", s.revokeToken)
	e.POST("/api/v1/access-review", s.accessReview)
	return e
}

// requestID echoes a well-formed X-Request-Id or generates one, and passes
// it on to the backends as gRPC metadata.
func (s *Service) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		id := c.Request().Header.Get(HeaderRequestID)
		if !validRequestID(id) {
			id = newRequestID()
		}
		c.Set(ctxKeyRequestID, id)
		c.Response().Header().Set(HeaderRequestID, id)
		req := c.Request()
		c.SetRequest(req.WithContext(metadata.AppendToOutgoingContext(req.Context(), "x-request-id", id)))
		return next(c)
	}
}

// newRequestID makes a request id.
func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func requestIDOf(c *echo.Context) string {
	id, _ := c.Get(ctxKeyRequestID).(string)
	return id
}

// accessLog writes one line per request and records it in the HTTP
// metrics by route template. It answers errors itself so that
// the status it logs is the one sent.
func (s *Service) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		start := time.Now()
		s.http.Start()
		if err := next(c); err != nil {
			s.handleError(c, err)
		}
		status := http.StatusOK
		if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Status != 0 {
			status = r.Status
		}
		route := c.Path()
		if unmatched, _ := c.Get(ctxKeyUnmatched).(bool); unmatched {
			route = ""
		}
		s.http.Done(route, c.Request().Method, status, time.Since(start))
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelWarn
		}
		s.log.LogAttrs(c.Request().Context(), level, "http request",
			slog.String("method", c.Request().Method),
			slog.String("path", c.Request().URL.Path),
			slog.Int("status", status),
			slog.Duration("duration", time.Since(start)),
			slog.String("request_id", requestIDOf(c)),
		)
		return nil
	}
}

// recoverPanic turns a handler panic into a 500 answer.
func (s *Service) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(c.Request().Context(), "handler panic", "panic", fmt.Sprint(v), "request_id", requestIDOf(c), "stack", string(debug.Stack()))
				err = errors.New("handler panic")
			}
		}()
		return next(c)
	}
}

// handleError answers err as a JSON error document.
func (s *Service) handleError(c *echo.Context, err error) {
	if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Committed {
		return
	}
	status, b, _ := s.errorDocument(c.Request().Context(), requestIDOf(c), err)
	setRetryAfter(c, status)
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSONBlob(status, b)
}

// errorDocument is the status and the JSON error document that answer err
// (HTTP and the queue input alike), and the document's detail. ctx is the
// request's: the log line of an internal error carries its trace.
func (s *Service) errorDocument(ctx context.Context, requestID string, err error) (int, []byte, string) {
	status, body := s.errorAnswer(ctx, requestID, err)
	body.RequestID = requestID
	if body.Errors == nil {
		body.Errors = []problem.FieldError{}
	}
	b, merr := resource.Marshal(body)
	if merr != nil {
		b = []byte(`{"detail":"internal error","code":"internal","errors":[]}`)
	}
	return status, b, body.Detail
}

// errorAnswer is the status and error document that answer err, for HTTP
// and the queue input alike; requestID (and ctx's trace) is logged with
// internal errors.
func (s *Service) errorAnswer(ctx context.Context, requestID string, err error) (int, errorBody) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status, errorBody{Detail: he.detail, Code: he.code}
	}
	if pe := problem.As(err); pe != nil {
		status := httpStatus(pe.Kind)
		if pe.Kind == problem.Internal {
			s.log.ErrorContext(ctx, "internal error", "error", pe.Error(), "request_id", requestID)
			return status, errorBody{Detail: "internal error", Code: problem.CodeInternal}
		}
		if pe.Kind == problem.Unavailable && pe.Code != problem.CodeWebhookFailed && pe.Code != problem.CodeUndeliverable {
			s.log.WarnContext(ctx, "backend unavailable", "error", pe.Error(), "request_id", requestID)
			return status, errorBody{Detail: "a backend service is unavailable; retry later", Code: problem.CodeUnavailable}
		}
		return status, errorBody{Detail: pe.Detail, Code: pe.Code, Errors: pe.Fields}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, errorBody{Detail: "a backend service did not answer in time; retry later", Code: problem.CodeUnavailable}
	case errors.Is(err, context.Canceled):
		return 499, errorBody{Detail: "request canceled", Code: "canceled"}
	}
	if code := echo.StatusCode(err); code != 0 {
		return code, errorBody{Detail: http.StatusText(code), Code: codeForStatus(code)}
	}
	s.log.ErrorContext(ctx, "internal error", "error", err.Error(), "request_id", requestID)
	return http.StatusInternalServerError, errorBody{Detail: "internal error", Code: problem.CodeInternal}
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusNotFound:
		return problem.CodeNotFound
	case http.StatusMethodNotAllowed:
		return codeMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		return problem.CodeTooLarge
	case http.StatusUnsupportedMediaType:
		return codeUnsupportedMediaType
	case http.StatusRequestTimeout:
		return codeRequestTimeout
	case http.StatusServiceUnavailable:
		return problem.CodeUnavailable
	}
	if status >= 500 {
		return problem.CodeInternal
	}
	return problem.CodeInvalid
}

func (s *Service) openAPI(c *echo.Context) error {
	return c.JSONBlob(http.StatusOK, openAPIDocument)
}

// backendCtx bounds the backend calls of one step of a request.
func (s *Service) backendCtx(c *echo.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Request().Context(), s.cfg.RequestTimeout)
}

// fenceContext puts a fenced write's lease and epoch (the X-No8s-Fence-*
// headers) on the request's context as outgoing gRPC metadata: every
// backend call of the request carries them on to the store, which checks
// them where the write commits. With identities on, a request carrying them
// from anyone but registry-sync is refused (authz.REST.Fence).
func (s *Service) fenceContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := c.Request()
		if lease, epoch := r.Header.Get(fence.HeaderLease), r.Header.Get(fence.HeaderEpoch); lease != "" || epoch != "" {
			// With identities on, the headers are registry-sync's only.
			if err := s.rest.Fence(r.Context()); err != nil {
				return err
			}
			c.SetRequest(r.WithContext(metadata.AppendToOutgoingContext(r.Context(), fence.MetadataLease, lease, fence.MetadataEpoch, epoch)))
		}
		return next(c)
	}
}

// fenceLease is the leader lease a request's writes are fenced by ("" for
// none).
func fenceLease(ctx context.Context) string {
	md, _ := metadata.FromOutgoingContext(ctx)
	if v := md.Get(fence.MetadataLease); len(v) > 0 {
		return v[0]
	}
	return ""
}

// writeJSON answers v as JSON without HTML escaping.
func writeJSON(c *echo.Context, status int, v any) error {
	b, err := resource.Marshal(v)
	if err != nil {
		return fmt.Errorf("marshal response: %w", err)
	}
	return c.JSONBlob(status, b)
}

// backendErr converts an error from a gRPC call into a domain error.
func backendErr(err error) error {
	return grpcstatus.FromStatus(err)
}

// httpStatus is the HTTP status for a kind of problem: the one place the
// gateway maps the error vocabulary onto HTTP.
func httpStatus(k problem.Kind) int {
	switch k {
	case problem.Invalid:
		return http.StatusBadRequest
	case problem.NotFound:
		return http.StatusNotFound
	case problem.AlreadyExists, problem.Conflict:
		return http.StatusConflict
	case problem.TooLarge:
		return http.StatusRequestEntityTooLarge
	case problem.Unavailable:
		return http.StatusServiceUnavailable
	case problem.Forbidden:
		return http.StatusForbidden
	case problem.Gone:
		return http.StatusGone
	case problem.FailedPrecondition:
		return http.StatusConflict
	default:
		return http.StatusInternalServerError
	}
}
