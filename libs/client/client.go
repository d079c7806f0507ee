package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
)

// Headers of the API.
const (
	// HeaderRequestID is echoed (or generated) by the server on every
	// answer and quoted in its logs.
	HeaderRequestID = "X-Request-Id"
	// HeaderContinueToken, on a list page, is the token of the next page.
	HeaderContinueToken = "X-Continue-Token"
	// HeaderResourceVersion, on a list's first page, is the revision the
	// list was read at: a watch from it sees every later change.
	HeaderResourceVersion = "X-Resource-Version"
	// HeaderApplyResult says what server-side apply did: created,
	// configured or unchanged.
	HeaderApplyResult = "X-Apply-Result"
	// HeaderWarning carries warnings (RFC 9111 Warning, code 299).
	HeaderWarning = "Warning"
)

// Apply results (HeaderApplyResult).
const (
	ApplyCreated    = "created"
	ApplyConfigured = "configured"
	ApplyUnchanged  = "unchanged"
)

// maxAnswer bounds an answer's body.
const maxAnswer = 64 << 20

// Client talks to one no8s API server. It is safe for concurrent use.
type Client struct {
	base      string
	token     string
	userAgent string
	http      *http.Client
	// stream sends watches: http's transport without a timeout.
	stream   *http.Client
	timeout  time.Duration
	retries  int
	warnings func(string)
	// caFile is WithCAFile's.
	caFile string
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as a bearer token on every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sends requests through hc (its transport: TLS, proxies,
// connection pool). Watches use the same transport without hc's timeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithCAFile trusts the CA certificates of the PEM file path, and no
// other, for the server's certificate: a server whose certificate comes
// from a private CA (no8s dev --tls: <data-dir>/tls/ca.crt), as curl
// --cacert. With WithHTTPClient, set the CA in that client's transport
// instead.
func WithCAFile(path string) Option { return func(c *Client) { c.caFile = path } }

// WithUserAgent sets the User-Agent of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithTimeout bounds each request but watches (default 30 s; 0: none).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetries sets how many times an idempotent request (GET, PUT, DELETE)
// is tried again after a transport error, a 5xx, 408 or 429, with
// backoff from 100 ms doubling to 2 s or the server's Retry-After (default
// 3; 0: never). POST and PATCH are retried only after a 429
// rate_limited, which the server answers before doing anything.
func WithRetries(n int) Option { return func(c *Client) { c.retries = max(n, 0) } }

// WithWarningHandler calls f with each Warning header of every answer.
func WithWarningHandler(f func(warning string)) Option { return func(c *Client) { c.warnings = f } }

// New returns a client of the server at base (http://127.0.0.1:8000).
func New(base string, opts ...Option) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q is not an http:// or https:// URL", base)
	}
	c := &Client{
		base:      strings.TrimRight(base, "/"),
		userAgent: "no8s-client",
		timeout:   30 * time.Second,
		retries:   3,
	}
	for _, o := range opts {
		o(c)
	}
	if c.caFile != "" {
		if c.http != nil {
			return nil, errors.New("WithCAFile and WithHTTPClient: set the CA in the HTTP client's transport")
		}
		tr, err := caTransport(c.caFile)
		if err != nil {
			return nil, err
		}
		c.http = &http.Client{Transport: tr}
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	stream := *c.http
	stream.Timeout = 0
	c.stream = &stream
	return c, nil
}

// caTransport is the default transport trusting the CA certificates of the
// PEM file path alone.
func caTransport(path string) (*http.Transport, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate", path)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return tr, nil
}

// Server is the base URL.
func (c *Client) Server() string { return c.base }

// CallOption changes one call.
type CallOption func(*callOptions)

type callOptions struct {
	dryRun          bool
	propagation     lifecycle.Propagation
	resourceVersion int64
	header          http.Header
}

// DryRun asks the server to judge a write (admission, schema, defaults,
// webhooks) and answer what it would store, storing nothing.
func DryRun() CallOption { return func(o *callOptions) { o.dryRun = true } }

// DryRunIf is DryRun when dry is true, else nothing.
func DryRunIf(dry bool) CallOption {
	return func(o *callOptions) { o.dryRun = o.dryRun || dry }
}

// WithPropagation sets a delete's propagation policy (the
// propagation_policy query parameter): what becomes of the resource's
// dependents. Background, the server's default, sends nothing.
func WithPropagation(p lifecycle.Propagation) CallOption {
	return func(o *callOptions) { o.propagation = p }
}

// IfResourceVersion makes a delete a precondition on the resource's
// resource_version (the resource_version query parameter): 409 when it
// changed since.
func IfResourceVersion(rv int64) CallOption {
	return func(o *callOptions) { o.resourceVersion = rv }
}

// WithHeader adds a request header to one call.
func WithHeader(key, value string) CallOption {
	return func(o *callOptions) {
		if o.header == nil {
			o.header = http.Header{}
		}
		o.header.Add(key, value)
	}
}

// request is one API call.
type request struct {
	method string
	path   string
	query  url.Values
	// body is nil, []byte or json.RawMessage (sent as is) or a value sent
	// as JSON.
	body        any
	contentType string
	header      http.Header
}

func (r *request) apply(opts []CallOption) {
	var o callOptions
	for _, f := range opts {
		f(&o)
	}
	if o.dryRun {
		if r.query == nil {
			r.query = url.Values{}
		}
		r.query.Set("dry_run", "true")
	}
	if o.propagation != "" && o.propagation != lifecycle.PropagationBackground {
		if r.query == nil {
			r.query = url.Values{}
		}
		r.query.Set("propagation_policy", string(o.propagation))
	}
	if o.resourceVersion > 0 {
		if r.query == nil {
			r.query = url.Values{}
		}
		r.query.Set("resource_version", strconv.FormatInt(o.resourceVersion, 10))
	}
	for k, v := range o.header {
		if r.header == nil {
			r.header = http.Header{}
		}
		r.header[k] = append(r.header[k], v...)
	}
}

// do sends r, retrying an idempotent one, and decodes a 2xx JSON answer
// into out (when not nil). It returns the answer's headers.
func (c *Client) do(ctx context.Context, r request, out any, opts ...CallOption) (http.Header, error) {
	r.apply(opts)
	body, err := encodeBody(r.body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: encode request: %w", r.method, r.path, err)
	}
	idempotent := r.method == http.MethodGet || r.method == http.MethodHead || r.method == http.MethodPut || r.method == http.MethodDelete
	for attempt := 0; ; attempt++ {
		h, err := c.once(ctx, r, body, out)
		if err == nil || attempt >= c.retries || !(idempotent && transient(err) || HasCode(err, CodeRateLimited)) {
			return h, err
		}
		wait := backoff(attempt)
		if e := AsError(err); e != nil && e.RetryAfter > 0 {
			wait = min(e.RetryAfter, 30*time.Second)
		}
		if err := sleep(ctx, wait); err != nil {
			return h, err
		}
	}
}

func (c *Client) once(ctx context.Context, r request, body []byte, out any) (http.Header, error) {
	_, h, data, err := c.exchange(ctx, r, body)
	if err != nil {
		return h, err
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("%s %s: decode answer: %w", r.method, r.path, err)
		}
	}
	return h, nil
}

// exchange sends one request and reads the whole answer; an answer of 300
// or more is also returned as an *Error.
func (c *Client) exchange(ctx context.Context, r request, body []byte) (int, http.Header, []byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	resp, err := c.send(ctx, c.http, r, body)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, resp.Header, nil, fmt.Errorf("%s %s: read answer: %w", r.method, r.path, err)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, resp.Header, data, decodeError(resp.StatusCode, resp.Header, data)
	}
	return resp.StatusCode, resp.Header, data, nil
}

func encodeBody(b any) ([]byte, error) {
	switch v := b.(type) {
	case nil:
		return nil, nil
	case []byte:
		return v, nil
	case json.RawMessage:
		return v, nil
	default:
		return json.Marshal(v)
	}
}

// send builds and sends one request with hc.
func (c *Client) send(ctx context.Context, hc *http.Client, r request, body []byte) (*http.Response, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set("Accept", "application/json")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %s: %w", r.method, c.base+r.path, err)
	}
	if c.warnings != nil {
		for _, w := range resp.Header.Values(HeaderWarning) {
			c.warnings(warningText(w))
		}
	}
	return resp, nil
}

// warningText is the text of a Warning header: `299 - "text"` gives text.
func warningText(h string) string {
	code, rest, ok := strings.Cut(h, " ")
	if !ok || len(code) != 3 {
		return h
	}
	_, rest, ok = strings.Cut(rest, " ")
	if !ok {
		return h
	}
	if s, err := strconv.Unquote(strings.TrimSpace(rest)); err == nil {
		return s
	}
	return strings.Trim(strings.TrimSpace(rest), `"`)
}

// transient reports whether a failure is worth another try: transport
// errors (not the caller's cancellation), the server's 5xx, 408 and 429.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var he *handlerError
	if errors.As(err, &he) {
		return false
	}
	if e := AsError(err); e != nil {
		return e.Status >= 500 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests
	}
	return true
}

// retryAfter parses a Retry-After of seconds (dates are not sent by no8s).
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// backoff is the pause before retry n: 100 ms doubling to 2 s.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for range min(n, 5) {
		d *= 2
	}
	return min(d, 2*time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func idPath(prefix string, id int64, suffix string) string {
	return prefix + strconv.FormatInt(id, 10) + suffix
}

// Raw sends one request as given (path relative to the server, with its
// query; body sent as application/json unless contentType says otherwise)
// and returns the answer's status, headers and body, unretried. An answer
// of 300 or more also comes back as an *Error. It is for what the typed
// methods do not cover, and for load generators that must not decode.
func (c *Client) Raw(ctx context.Context, method, path string, body []byte, contentType string) (int, http.Header, []byte, error) {
	return c.exchange(ctx, request{method: method, path: path, contentType: contentType}, body)
}

// BearerTransport returns rt (http.DefaultTransport when nil) sending
// token as a bearer token on every request to host ("" any host) that
// carries no Authorization header of its own: for HTTP clients that are
// not a Client (a token "" returns rt as it is).
func BearerTransport(rt http.RoundTripper, token, host string) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	if token == "" {
		return rt
	}
	return bearerTransport{base: rt, token: token, host: host}
}

type bearerTransport struct {
	base        http.RoundTripper
	token, host string
}

func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, ok := req.Header["Authorization"]; ok || (b.host != "" && req.URL.Host != b.host) {
		return b.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of the transport
// underneath, as http.Client.CloseIdleConnections expects.
func (b bearerTransport) CloseIdleConnections() {
	if c, ok := b.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
