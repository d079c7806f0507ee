package testkit

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// useToken reads the control plane's administrator token and makes e.HTTP
// send it to the API.
func (e *Env) useToken(path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the administrator's token: %w", err)
	}
	e.Token = strings.TrimSpace(string(b))
	api, err := url.Parse(e.URL)
	if err != nil {
		return fmt.Errorf("api url: %w", err)
	}
	base := e.HTTP.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	e.HTTP.Transport = bearer{base: base, host: api.Host, token: e.Token}
	return nil
}

// bearer sends token to host, on requests without an Authorization
// header of their own.
type bearer struct {
	base  http.RoundTripper
	host  string
	token string
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != b.host || req.Header.Get("Authorization") != "" {
		return b.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}
