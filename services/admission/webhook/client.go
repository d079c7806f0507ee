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
	"time"

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
// trusts roots (the system's when nil). Redirects are not followed: a
// webhook answers itself.
func newTransportClient(roots *x509.CertPool) *http.Client {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// clientPool keeps one client, and so one pool of kept-alive connections,
// per CA bundle. It is used by one goroutine at a time (the registry's
// refresh).
type clientPool struct {
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
			c = newTransportClient(roots)
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

// call POSTs body to the webhook within its timeout (and ctx's deadline) and
// parses the answer. Any error is a failure of the webhook.
func (h *Hook) call(ctx context.Context, body []byte) (*Response, error) {
	if h.broken != nil {
		return nil, h.broken
	}
	cctx, cancel := context.WithTimeout(ctx, h.Timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bad request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "no8s-admission")
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.transportError(ctx, cctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, h.transportError(ctx, cctx, err)
	}
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("its response is larger than %d bytes", MaxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("it answered HTTP %d%s", resp.StatusCode, snippet(data))
	}
	r, err := ParseResponse(data, h.Type == webhookconf.TypeMutating)
	if err != nil {
		return nil, fmt.Errorf("its answer is not valid: %v", err)
	}
	return r, nil
}

// transportError says why a call failed without the noise of url.Error.
func (h *Hook) transportError(chain, call context.Context, err error) error {
	switch {
	case chain.Err() != nil && errors.Is(chain.Err(), context.DeadlineExceeded):
		return errors.New("the admission chain's deadline passed before it answered")
	case call.Err() != nil && errors.Is(call.Err(), context.DeadlineExceeded):
		return fmt.Errorf("it did not answer within its timeout of %ds", h.TimeoutSeconds)
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		err = ue.Unwrap()
	}
	return fmt.Errorf("calling it failed: %v", err)
}

// snippet quotes the start of an error response body.
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
