package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// Hook is a registered webhook ready to be called.
type Hook struct {
	webhookconf.Webhook
	client *http.Client
	// broken, when set, fails every call (a CA bundle that does not parse).
	broken error
}

// newTransportClient returns a client with its own connection pool that
// trusts roots (the system's when nil) and connects only where dialer's
// address rule allows. Redirects are not followed: a webhook answers
// itself.
func newTransportClient(roots *x509.CertPool, dialer *outbound.Dialer) *http.Client {
	return outbound.NewClient(outbound.NewTransport(dialer, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))
}

// clientPool keeps one client, and so one pool of kept-alive connections,
// per CA bundle. It is used by one goroutine at a time (the registry's
// refresh).
type clientPool struct {
	// dialer applies the outbound address rule to every connection.
	dialer  *outbound.Dialer
	clients map[[32]byte]*http.Client
}

// rebuild returns the client of every bundle in use, reusing the known
// ones, and closes the idle connections of the clients no longer used.
func (p *clientPool) rebuild(hooks []*Hook) {
	next := make(map[[32]byte]*http.Client, len(p.clients))
	for _, h := range hooks {
		key := sha256.Sum256([]byte(h.CABundle))
		c := next[key]
		if c == nil {
			c = p.clients[key]
		}
		if c == nil {
			var roots *x509.CertPool
			if h.CABundle != "" {
				var err error
				if roots, err = webhookconf.ParseCABundle(h.CABundle); err != nil {
					h.broken = fmt.Errorf("its ca_bundle does not parse: %v", err)
					continue
				}
			}
			c = newTransportClient(roots, p.dialer)
		}
		next[key] = c
		h.client = c
	}
	for key, c := range p.clients {
		if next[key] == nil {
			c.CloseIdleConnections()
		}
	}
	p.clients = next
}

func (p *clientPool) closeAll() {
	for _, c := range p.clients {
		c.CloseIdleConnections()
	}
}

// The classes of failure a client is told. The details (the remote answer,
// the transport's error) go to admission's log only: echoing them would let
// whoever registers a webhook scan ports and read services that admission
// can reach.
const (
	classAddress  = "address not allowed"
	classRefused  = "connection refused"
	classConnect  = "connection failed"
	classTimeout  = "timed out"
	classTLS      = "TLS handshake failed"
	classInvalid  = "invalid response"
	classDeadline = "timed out: the admission chain's deadline passed before it answered"
)

// callError is a failed call: what the client is told, and why.
type callError struct {
	class string
	cause error
}

func (e *callError) Error() string { return e.class }

func (e *callError) Unwrap() error { return e.cause }

// call POSTs body to the webhook within its timeout (and ctx's deadline) and
// parses the answer. Any error is a failure of the webhook, a *callError
// unless the registration itself is broken.
func (h *Hook) call(ctx context.Context, body []byte) (*Response, error) {
	if h.broken != nil {
		return nil, h.broken
	}
	// A traced write's webhook call is a client span of its own, whose
	// context the request carries (W3C traceparent): the webhook's own
	// spans join the change's trace under it.
	ctx, span := tracing.StartChild(ctx, "webhook "+h.Name, trace.SpanKindClient,
		attribute.String("no8s.webhook.name", h.Name), attribute.String("no8s.webhook.type", string(h.Type)),
		attribute.String("http.request.method", http.MethodPost))
	defer span.End()
	resp, err := h.exchange(ctx, body)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return resp, err
}

// exchange makes call's request and reads its answer.
func (h *Hook) exchange(ctx context.Context, body []byte) (*Response, error) {
	cctx, cancel := context.WithTimeout(ctx, h.Timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bad request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "no8s-admission")
	// A review may reach a webhook more than once (as Kubernetes' webhook
	// calls may): marked idempotent (the key itself is not sent), a request
	// on a kept-alive connection that the webhook closed meanwhile is sent
	// again on another connection by net/http instead of failing the write.
	req.Header[idempotencyKey] = nil
	tracing.InjectHTTP(ctx, req.Header)
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, transportError(ctx, cctx, err)
	}
	defer resp.Body.Close()
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, transportError(ctx, cctx, err)
	}
	if len(data) > MaxResponseBytes {
		return nil, &callError{class: classInvalid, cause: fmt.Errorf("its response is larger than %d bytes", MaxResponseBytes)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &callError{class: fmt.Sprintf("answered HTTP status %d", resp.StatusCode), cause: fmt.Errorf("HTTP %d%s", resp.StatusCode, snippet(data))}
	}
	r, err := ParseResponse(data, h.Type == webhookconf.TypeMutating)
	if err != nil {
		return nil, &callError{class: classInvalid, cause: fmt.Errorf("its answer is not valid: %w", err)}
	}
	return r, nil
}

// idempotencyKey, present with no value, makes net/http's Transport treat a
// POST as replayable without sending the header.
const idempotencyKey = "Idempotency-Key"

// transportError classifies a failed exchange.
func transportError(chain, call context.Context, err error) error {
	var (
		netErr    net.Error
		recordErr tls.RecordHeaderError
		alertErr  tls.AlertError
		verifyErr *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		certErr   x509.CertificateInvalidError
		opErr     *net.OpError
	)
	class := classInvalid
	switch {
	case chain.Err() != nil && errors.Is(chain.Err(), context.DeadlineExceeded):
		class = classDeadline
	case call.Err() != nil && errors.Is(call.Err(), context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		class = classTimeout
	case errors.Is(err, outbound.ErrRefused):
		class = classAddress
	case errors.Is(err, syscall.ECONNREFUSED):
		class = classRefused
	case errors.As(err, &recordErr), errors.As(err, &alertErr), errors.As(err, &verifyErr),
		errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &certErr),
		strings.Contains(err.Error(), "HTTP response to HTTPS client"), strings.Contains(err.Error(), "tls: "):
		class = classTLS
	case errors.As(err, &opErr) && opErr.Op == "dial", isDNSError(err):
		class = classConnect
	}
	return &callError{class: class, cause: err}
}

func isDNSError(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// snippet quotes the start of an error response body (for the log).
func snippet(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if s == "" {
		return ""
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return fmt.Sprintf(": %q", s)
}
