package gateway

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/problem"
)

// The defences every request passes at the HTTP edge: security headers,
// HEAD as GET, the Host allow-list (DNS rebinding), cross-origin writes
// (CSRF), the Content-Type of a write with a body, and bounded body reads.
// The server's own timeouts, and TLS, are set in ServeListeners.

// RetryAfterSeconds is the Retry-After of every 503.
const RetryAfterSeconds = 2

// contentSecurityPolicy forbids everything: the API serves JSON and event
// streams, never a document to render.
const contentSecurityPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

const ctxKeyHead = "no8s.head"

// securityHeaders sets the standard security headers on every answer.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		return next(c)
	}
}

// headAsGet routes HEAD as GET. The handler sees a GET; net/http, which
// still holds the HEAD request, sends no body.
func headAsGet(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if req := c.Request(); req.Method == http.MethodHead {
			get := req.Clone(req.Context())
			get.Method = http.MethodGet
			c.SetRequest(get)
			c.Set(ctxKeyHead, true)
		}
		return next(c)
	}
}

// isHead reports whether the request came as HEAD.
func isHead(c *echo.Context) bool {
	h, _ := c.Get(ctxKeyHead).(bool)
	return h
}

// hasBody reports whether a request carries a body.
func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0
}

// requireJSON refuses a write with a body unless it is JSON (or, for PATCH,
// a merge patch): a browser can send a cross-site form or text/plain POST
// without asking, but not an application/json one. Body-less writes (a
// DELETE, POST .../reconcile) need no Content-Type.
func requireJSON(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		req := c.Request()
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return next(c)
		}
		if !hasBody(req) {
			return next(c)
		}
		accepted := []string{mediaJSON}
		if req.Method == http.MethodPatch {
			accepted = []string{mediaMergePatch, mediaJSON, mediaJSONPatch}
		}
		ct := req.Header.Get(echo.HeaderContentType)
		if acceptedMediaType(ct, accepted) {
			return next(c)
		}
		detail := fmt.Sprintf("a %s with a body needs Content-Type %s", req.Method, strings.Join(accepted, " or "))
		if ct != "" {
			detail = fmt.Sprintf("Content-Type %q is not supported here: %s", ct, detail)
		}
		return &httpError{status: http.StatusUnsupportedMediaType, code: codeUnsupportedMediaType, detail: detail}
	}
}

// acceptedMediaType reports whether the Content-Type ct is one of accepted
// and, when it names a charset, that charset is UTF-8: JSON is UTF-8 (RFC
// 8259), and a body declared in another charset would be read as what it
// is not.
func acceptedMediaType(ct string, accepted []string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !slices.Contains(accepted, mt) {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8") || strings.EqualFold(cs, "utf8")
}

// Body read failures that readBody turns into answers.
var (
	errBodySlots   = errors.New("too many request bodies are being read")
	errBodyTimeout = errors.New("the request body did not arrive in time")
)

// boundBody makes every body read take one of its source address's
// MaxBodyReadsPerSource slots (none left: 429 at once, and the connection
// closed), then one of MaxConcurrentBodyReads slots (waiting at most
// BodyReadTimeout for one), and finish within
// BodyReadTimeout, and reads and discards what the handler left unread (up
// to the body's read deadline, BodyReadTimeout) before the answer is sent,
// so that a client that writes its whole body before reading the answer
// (20 MB over a 1 MiB limit, say) reads the 413 rather than a reset.
func (s *Service) boundBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		req := c.Request()
		if !hasBody(req) {
			return next(c)
		}
		b := &boundedBody{body: req.Body, s: s, rc: http.NewResponseController(c.Response()), source: sourceKey(req.RemoteAddr)}
		req.Body = b
		defer b.release()
		err := next(c)
		b.drain()
		var se *bodySourceError
		if errors.As(b.err, &se) {
			h := c.Response().Header()
			h.Set("Retry-After", strconv.Itoa(bodyRetryAfterSeconds))
			h.Set("Connection", "close")
		}
		return err
	}
}

// boundedBody is a request body read under a slot and a deadline.
type boundedBody struct {
	body io.ReadCloser
	s    *Service
	rc   *http.ResponseController
	// held is set while the body holds a slot; done once it hit EOF or an
	// error.
	held, done bool
	err        error
	n          int64
	// source is the sender's address (sourceKey); sourceHeld is set while
	// the body holds one of its slots.
	source     string
	sourceHeld bool
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, b.err
	}
	if !b.held {
		if err := b.acquire(); err != nil {
			b.done, b.err = true, err
			return 0, err
		}
	}
	n, err := b.body.Read(p)
	b.n += int64(n)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w: %w", errBodyTimeout, err)
		}
		b.done, b.err = true, err
		b.release()
	}
	return n, err
}

func (b *boundedBody) acquire() error {
	if bodies := b.s.limits.bodies; bodies != nil {
		if !bodies.acquire(b.source) {
			b.s.limits.refused(limitBodiesPerSource)
			return &bodySourceError{max: bodies.max}
		}
		b.sourceHeld = true
	}
	t := time.NewTimer(b.s.cfg.BodyReadTimeout)
	defer t.Stop()
	select {
	case b.s.bodySlots <- struct{}{}:
	case <-t.C:
		b.releaseSource()
		return errBodySlots
	}
	b.held = true
	_ = b.rc.SetReadDeadline(time.Now().Add(b.s.cfg.BodyReadTimeout))
	return nil
}

// release frees the slot and, unless the body timed out, lifts the
// deadline: an expired deadline would cancel a long request once its body
// is read. A body that timed out keeps it, so that its connection is
// closed rather than waited on.
func (b *boundedBody) release() {
	if !b.held {
		return
	}
	b.held = false
	if !errors.Is(b.err, errBodyTimeout) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	<-b.s.bodySlots
	b.releaseSource()
}

// releaseSource frees the source address's slot.
func (b *boundedBody) releaseSource() {
	if b.sourceHeld {
		b.sourceHeld = false
		b.s.limits.bodies.release(b.source)
	}
}

// drain reads and discards what is left of the body, under its slot and
// within its read deadline (BodyReadTimeout from its first read): a body
// that does not end in time closes its connection.
func (b *boundedBody) drain() {
	if b.done {
		return
	}
	_, _ = io.Copy(io.Discard, b)
}

func (b *boundedBody) Close() error { return b.body.Close() }

// bodyReadError answers a failed body read.
func bodyReadError(err error) error {
	var se *bodySourceError
	switch {
	case errors.As(err, &se):
		return &httpError{status: http.StatusTooManyRequests, code: codeRateLimited, detail: se.Error()}
	case errors.Is(err, errBodySlots):
		return &httpError{status: http.StatusServiceUnavailable, code: problem.CodeUnavailable, detail: "the gateway is reading too many request bodies; retry later"}
	case errors.Is(err, errBodyTimeout):
		return &httpError{status: http.StatusRequestTimeout, code: codeRequestTimeout, detail: "the request body did not arrive in time"}
	}
	return problem.New(problem.Invalid, problem.CodeMalformedJSON, "reading the request body failed: %v", err)
}

// setRetryAfter adds Retry-After to a 503.
func setRetryAfter(c *echo.Context, status int) {
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
}

// newOriginCheck is the cross-origin check of state-changing requests, with
// origins (scheme://host[:port]) trusted besides the gateway's own. A
// malformed origin is an error (Config.Validate).
func newOriginCheck(origins []string) (*http.CrossOriginProtection, error) {
	p := http.NewCrossOriginProtection()
	for _, o := range origins {
		if err := p.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", o, err)
		}
	}
	return p, nil
}

// crossOrigin refuses what a web page on another site could make a
// browser send: a POST, PUT, PATCH or DELETE that the browser marks as
// cross-site (Sec-Fetch-Site) or whose Origin is neither the gateway's
// Host nor an allowed origin (http.CrossOriginProtection), and a body-less
// one with a CORS-safelisted Content-Type (a form or text/plain: a browser
// sends those cross-site without a preflight, and an old one without
// Sec-Fetch-Site or Origin). With a body such a Content-Type is
// requireJSON's 415. A client that is no browser (curl, the SDK, the CLI)
// sends no Sec-Fetch-Site and no Origin and is not concerned; GET, HEAD
// and OPTIONS never are.
func (s *Service) crossOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		req := c.Request()
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return next(c)
		}
		if err := s.origins.Check(req); err != nil {
			return &httpError{status: http.StatusForbidden, code: codeCrossOrigin, detail: fmt.Sprintf(
				"a cross-origin %s from a browser is refused (Origin %q, Sec-Fetch-Site %q): call the API from a page the gateway serves, "+
					"from a client that is no browser, or add the page's origin to the gateway's --allowed-origins",
				req.Method, req.Header.Get("Origin"), req.Header.Get("Sec-Fetch-Site"))}
		}
		if ct := req.Header.Get(echo.HeaderContentType); !hasBody(req) && safelistedContentType(ct) {
			return &httpError{status: http.StatusForbidden, code: codeCrossOrigin, detail: fmt.Sprintf(
				"a %s with Content-Type %q is refused: a browser sends it from any site without asking; "+
					"send no Content-Type (or application/json) with a body-less write", req.Method, ct)}
		}
		return next(c)
	}
}

// safelistedContentType reports whether ct is one of the media types a
// browser sends cross-site without asking first (a CORS-safelisted
// Content-Type: a form or text/plain write needs no preflight), read as a
// browser does: its essence before any parameter, case folded.
func safelistedContentType(ct string) bool {
	essence, _, _ := strings.Cut(ct, ";")
	switch strings.ToLower(strings.TrimSpace(essence)) {
	case "application/x-www-form-urlencoded", "multipart/form-data", "text/plain":
		return true
	}
	return false
}

// hostList is Config.AllowedHosts, normalized: host names without a port,
// lower case, IPv6 addresses without brackets; "*.example.com" matches any
// name under example.com (not example.com itself). An empty list allows
// any Host.
type hostList []string

// newHostList normalizes patterns; a pattern that is no host name, address
// or leading wildcard is an error (Config.Validate).
func newHostList(patterns []string) (hostList, error) {
	var l hostList
	for _, p := range patterns {
		h := normalizeHost(strings.TrimSpace(p))
		if !validHostPattern(h) || strings.ContainsAny(p, "/@") {
			return nil, fmt.Errorf("allowed host %q: want a host name, an IP address or *.domain", p)
		}
		l = append(l, h)
	}
	return l, nil
}

// validHostPattern reports whether a normalized pattern is an IP address,
// a host name, or "*." and a host name.
func validHostPattern(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	name := strings.TrimPrefix(h, "*.")
	if name == "" || strings.HasPrefix(name, ".") || strings.Contains(name, "..") {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// normalizeHost is a Host header's name: its port dropped, brackets of an
// IPv6 address removed, lower case, without a trailing dot.
func normalizeHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// allows reports whether the Host header host names one of the list's
// hosts (always, for an empty list).
func (l hostList) allows(host string) bool {
	if len(l) == 0 {
		return true
	}
	h := normalizeHost(host)
	if h == "" {
		return false
	}
	for _, p := range l {
		if suffix, ok := strings.CutPrefix(p, "*"); ok {
			if strings.HasSuffix(h, suffix) && len(h) > len(suffix) {
				return true
			}
		} else if h == p {
			return true
		}
	}
	return false
}

// hostExempt reports whether every Host may read path: the probes and
// metrics, which load balancers and scrapers ask for by address, and which
// hold no resource.
func hostExempt(path string) bool {
	switch path {
	case "/health", health.LivePath, health.ReadyPath, health.MetricsPath:
		return true
	}
	return false
}

// allowedHost refuses (421) a request whose Host is not one of
// Config.AllowedHosts: a page that an attacker's DNS name resolves to the
// gateway (DNS rebinding) sends its own name as Host. The probes and
// metrics (hostExempt) and the service listener, whose callers present a
// client certificate and may dial it by address, are not checked.
func (s *Service) allowedHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		req := c.Request()
		if s.hosts.allows(req.Host) || hostExempt(req.URL.Path) {
			return next(c)
		}
		if _, identified := authz.Caller(req.Context()); identified {
			return next(c)
		}
		return &httpError{status: http.StatusMisdirectedRequest, code: codeHostNotAllowed, detail: fmt.Sprintf(
			"host %q is not one of this gateway's names: use one of them in the URL, or add it to the gateway's --allowed-hosts", req.Host)}
	}
}
