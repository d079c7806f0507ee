// Package httppoll fetches an HttpSource's URL for registry-sync: one GET
// with the source's headers (each resolved from its secret reference at
// every poll, so a rotated secret is picked up), If-None-Match with the
// ETag of the last complete read (304: not modified), a per-request timeout
// that covers the body, and a body size limit. The client it is given dials
// through the outbound address rule (libs/platform/outbound, the webhooks' and
// datasources' dialer) and follows no redirects. Every failure is an *Error
// with the reason the source's Synced condition shows; it summarises the
// peer's answer (outbound.Summary: status, content type, size, a short
// sanitised excerpt of a text body only; outbound.TransportError: never the
// bytes of a peer that is not HTTP) and holds no form of the headers'
// secrets (secret.Redact).
package httppoll

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/httpsource"
)

// Reasons say why a poll failed.
const (
	ReasonSecret      = "SecretUnresolved"
	ReasonNotGranted  = "SecretNotGranted"
	ReasonAddress     = "AddressRefused"
	ReasonUnreachable = "SourceUnreachable"
	ReasonTimeout     = "Timeout"
	ReasonHTTP        = "HTTPError"
	ReasonTooLarge    = "BodyTooLarge"
)

// DefaultBodyLimit bounds a body when the Poller names no limit.
const DefaultBodyLimit = 8 << 20

// Error is a failed poll and its reason.
type Error struct {
	Reason string
	Err    error
}

// Error is what went wrong, without the reason: a condition or an Event
// shows the reason beside the message, which must not repeat it.
func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Poller polls URLs.
type Poller struct {
	// Client sends the requests (outbound.NewClient over the outbound
	// dialer in registry-sync).
	Client *http.Client
	// Secrets resolves the headers' references.
	Secrets secret.Resolver
	// BodyLimit bounds a body in bytes (DefaultBodyLimit when zero).
	BodyLimit int64
	// Grants are the credential grants: a header's secret is resolved
	// only when the source's namespace may send it to the URL's origin
	// (nil: nothing granted, every header refused).
	Grants *grants.Set
}

// Response is a successful poll.
type Response struct {
	// NotModified: the server answered 304 to If-None-Match.
	NotModified bool
	// Status is the HTTP status code.
	Status int
	// ETag is the response's ETag header (the request's on a 304 without
	// one).
	ETag string
	// Body is the body of a 2xx answer.
	Body []byte
}

// Poll sends one GET of spec's URL, a source of namespace ns. etag, when
// not empty, is sent as If-None-Match.
func (p *Poller) Poll(ctx context.Context, ns string, spec httpsource.Spec, etag string) (*Response, error) {
	origin, err := grants.Origin(spec.URL)
	if err != nil {
		return nil, &Error{Reason: ReasonUnreachable, Err: err}
	}
	for name, ref := range spec.Headers {
		if err := p.Grants.Allow(grants.UseHTTPHeader, ns, ref, origin); err != nil {
			return nil, &Error{Reason: ReasonNotGranted, Err: fmt.Errorf("header %s: %w", name, err)}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, spec.URL, nil)
	if err != nil {
		return nil, &Error{Reason: ReasonUnreachable, Err: err}
	}
	var secrets []secret.Value
	for name, ref := range spec.Headers {
		v, err := p.Secrets.Resolve(ctx, ref)
		if err != nil {
			return nil, &Error{Reason: ReasonSecret, Err: fmt.Errorf("header %s: %w", name, err)}
		}
		val := strings.TrimRight(v.Reveal(), "\r\n")
		if strings.IndexFunc(val, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) >= 0 {
			return nil, &Error{Reason: ReasonSecret, Err: fmt.Errorf("header %s: the secret %s holds a control character: not a header value", name, ref)}
		}
		req.Header.Set(name, val)
		secrets = append(secrets, v, secret.NewValue([]byte(val)))
	}
	out, err := p.send(ctx, spec, req, etag)
	var pe *Error
	if errors.As(err, &pe) {
		return nil, &Error{Reason: pe.Reason, Err: secret.RedactError(pe.Err, secrets...)}
	}
	return out, secret.RedactError(err, secrets...)
}

// send sends the request and reads the answer.
func (p *Poller) send(ctx context.Context, spec httpsource.Spec, req *http.Request, etag string) (*Response, error) {
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "no8s-registry-sync")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	start := time.Now()
	resp, err := p.Client.Do(req)
	if err != nil {
		return nil, classify(ctx, spec, start, err)
	}
	defer resp.Body.Close()
	out := &Response{Status: resp.StatusCode, ETag: resp.Header.Get("ETag")}
	if resp.StatusCode == http.StatusNotModified {
		out.NotModified = true
		if out.ETag == "" {
			out.ETag = etag
		}
		return out, nil
	}
	limit := p.BodyLimit
	if limit <= 0 {
		limit = DefaultBodyLimit
	}
	if resp.ContentLength > limit {
		return nil, &Error{Reason: ReasonTooLarge, Err: fmt.Errorf("GET %s: the body is %d bytes, more than the limit of %d", spec.URL, resp.ContentLength, limit)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, classify(ctx, spec, start, fmt.Errorf("reading the body: %w", err))
	}
	if int64(len(body)) > limit {
		return nil, &Error{Reason: ReasonTooLarge, Err: fmt.Errorf("GET %s: the body is more than the limit of %d bytes", spec.URL, limit)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &Error{Reason: ReasonHTTP, Err: fmt.Errorf("GET %s: %s", spec.URL, outbound.Summary(resp.Status, resp.Header.Get("Content-Type"), body))}
	}
	out.Body = body
	return out, nil
}

// classify maps a transport error to its reason.
func classify(ctx context.Context, spec httpsource.Spec, start time.Time, err error) error {
	switch {
	case errors.Is(err, outbound.ErrRefused):
		return &Error{Reason: ReasonAddress, Err: err}
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return &Error{Reason: ReasonTimeout, Err: fmt.Errorf("GET %s: no complete answer within %s (timeoutSeconds), after %s", spec.URL, spec.Timeout(), time.Since(start).Round(time.Millisecond))}
	}
	return &Error{Reason: ReasonUnreachable, Err: outbound.TransportError(err)}
}
