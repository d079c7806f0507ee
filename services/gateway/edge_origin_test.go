package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// edgeRequest is one request to a gateway at addr, sent as given: its Host
// (when not ""), its headers (name, value pairs) and its body ("" for
// none). It returns the status and the body.
func edgeRequest(t *testing.T, addr, method, path, host, body string, headers ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// expectEdgeError checks an error answer's status and code.
func expectEdgeError(t *testing.T, what string, status int, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	var doc errorDoc
	if status != wantStatus || json.Unmarshal(body, &doc) != nil || doc.Code != wantCode || doc.Detail == "" {
		t.Errorf("%s: %d %s, want %d with code %s", what, status, body, wantStatus, wantCode)
	}
}

// TestCrossSiteWritesAreRefused shows that what a page on another site can
// make a browser send is refused, 403 cross_origin, with nothing written:
// a form POST (body-less or not, marked cross-site by Origin or by
// Sec-Fetch-Site, or carrying a form Content-Type alone); while curl-shaped
// requests, JSON clients and the pages of an allowed origin are served.
func TestCrossSiteWritesAreRefused(t *testing.T) {
	createType(t, "CrossSite", "v1", `{"type":"object"}`)
	r := createResource(t, map[string]any{"name": "csrf", "resource_type_name": "CrossSite", "resource_type_version": "v1", "spec": map[string]any{}})
	addr := serveReal(t, func(c *Config) { c.AllowedOrigins = []string{"https://console.example"} })
	reconcile := fmt.Sprintf("/api/v1/resources/%d/reconcile", r.ID)
	const form = "application/x-www-form-urlencoded"

	for _, tc := range []struct {
		what    string
		body    string
		headers []string
	}{
		{"form, no body", "", []string{"Content-Type", form}},
		{"form, no body, cross-site Origin", "", []string{"Content-Type", form, "Origin", "https://evil.example"}},
		{"form with a body, cross-site Origin", "a=b", []string{"Content-Type", form, "Origin", "https://evil.example"}},
		{"form, no body, Sec-Fetch-Site cross-site", "", []string{"Content-Type", form, "Sec-Fetch-Site", "cross-site"}},
		{"form with a body, Sec-Fetch-Site cross-site", "a=b", []string{"Content-Type", form, "Sec-Fetch-Site", "cross-site"}},
		{"text/plain, no body", "", []string{"Content-Type", "Text/Plain; charset=utf-8"}},
		{"multipart, no body", "", []string{"Content-Type", "multipart/form-data; boundary=x"}},
		{"JSON, cross-site Origin", "", []string{"Content-Type", "application/json", "Origin", "https://evil.example"}},
		{"no Content-Type, Sec-Fetch-Site same-site", "", []string{"Sec-Fetch-Site", "same-site"}},
	} {
		unchanged(t, func() {
			status, body := edgeRequest(t, addr, http.MethodPost, reconcile, "", tc.body, tc.headers...)
			expectEdgeError(t, tc.what, status, body, http.StatusForbidden, codeCrossOrigin)
		})
	}
	// A cross-site DELETE is refused too, and the resource stays.
	unchanged(t, func() {
		status, body := edgeRequest(t, addr, http.MethodDelete, fmt.Sprintf("/api/v1/resources/%d", r.ID), "", "", "Origin", "https://evil.example")
		expectEdgeError(t, "cross-site DELETE", status, body, http.StatusForbidden, codeCrossOrigin)
	})

	// Served: each one triggers a reconcile (a new revision).
	rv := r.ResourceVersion
	for _, tc := range []struct {
		what    string
		headers []string
	}{
		{"curl-shaped: no Origin, no Sec-Fetch-Site, no Content-Type", nil},
		{"a JSON client", []string{"Content-Type", "application/json", "Accept", "application/json"}},
		{"the allowed origin", []string{"Origin", "https://console.example", "Sec-Fetch-Site", "cross-site"}},
		{"the gateway's own origin", []string{"Origin", "http://" + addr}},
		{"a browser's same-origin request", []string{"Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}},
	} {
		status, body := edgeRequest(t, addr, http.MethodPost, reconcile, "", "", tc.headers...)
		if status != http.StatusAccepted {
			t.Errorf("%s: %d %s, want 202", tc.what, status, body)
			continue
		}
		var got struct {
			ResourceVersion int64 `json:"resource_version"`
		}
		if err := json.Unmarshal(body, &got); err != nil || got.ResourceVersion <= rv {
			t.Errorf("%s: no reconcile requested: %s", tc.what, body)
		}
		rv = got.ResourceVersion
	}
	// A JSON write with a body from a curl-shaped client.
	status, body := edgeRequest(t, addr, http.MethodPost, "/api/v1/resources", "",
		`{"name":"csrf-json","resource_type_name":"CrossSite","resource_type_version":"v1","spec":{}}`, "Content-Type", "application/json")
	if status != http.StatusCreated {
		t.Errorf("JSON create: %d %s", status, body)
	}
	// Reads are never concerned.
	if status, body := edgeRequest(t, addr, http.MethodGet, fmt.Sprintf("/api/v1/resources/%d", r.ID), "", "", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); status != http.StatusOK {
		t.Errorf("cross-site GET: %d %s", status, body)
	}
}

// TestHostAllowList shows the Host allow-list against DNS rebinding: a
// request for another name is refused, 421 host_not_allowed, with nothing
// written; the allowed names (any port, an IPv6 address with or without
// brackets, a wildcard's subdomains) are served; the probes answer any
// Host; and an empty list allows any Host.
func TestHostAllowList(t *testing.T) {
	createType(t, "Rebound", "v1", `{"type":"object"}`)
	addr := serveReal(t, func(c *Config) {
		c.AllowedHosts = []string{"localhost", "127.0.0.1", "[::1]", "*.api.example.com"}
	})
	_, port, _ := net.SplitHostPort(addr)
	create := func(host, name string) (int, []byte) {
		return edgeRequest(t, addr, http.MethodPost, "/api/v1/resources", host,
			fmt.Sprintf(`{"name":%q,"resource_type_name":"Rebound","resource_type_version":"v1","spec":{}}`, name), "Content-Type", "application/json")
	}
	for _, host := range []string{"rebind.evil.example", "rebind.evil.example:" + port, "api.example.com", "evil.example.com", "localhost.evil.example"} {
		unchanged(t, func() {
			status, body := create(host, "rebound")
			expectEdgeError(t, "create with Host "+host, status, body, http.StatusMisdirectedRequest, codeHostNotAllowed)
		})
	}
	if status, body := edgeRequest(t, addr, http.MethodGet, "/api/v1/resources", "rebind.evil.example", ""); status != http.StatusMisdirectedRequest {
		t.Errorf("list with a foreign Host: %d %s", status, body)
	}
	for i, host := range []string{"localhost:" + port, "LOCALHOST", "127.0.0.1:" + port, "[::1]:" + port, "eu.api.example.com", "a.b.api.example.com:443", "localhost."} {
		if status, body := create(host, fmt.Sprintf("allowed-%d", i)); status != http.StatusCreated {
			t.Errorf("create with Host %q: %d %s", host, status, body)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/health"} {
		if status, body := edgeRequest(t, addr, http.MethodGet, path, "rebind.evil.example", ""); status != http.StatusOK {
			t.Errorf("%s with a foreign Host: %d %s", path, status, body)
		}
	}
	// No list: any Host.
	open := serveReal(t, nil)
	if status, body := edgeRequest(t, open, http.MethodGet, "/api/v1/resources?limit=1", "rebind.evil.example", ""); status != http.StatusOK {
		t.Errorf("without an allow-list: %d %s", status, body)
	}
}

// TestEdgeConfigIsValidated: a malformed origin or host, or half a TLS
// pair, stops ServeListeners before it serves.
func TestEdgeConfigIsValidated(t *testing.T) {
	for _, c := range []Config{
		{AllowedOrigins: []string{"evil.example"}},
		{AllowedHosts: []string{"*"}},
		{AllowedHosts: []string{"a*.example.com"}},
		{AllowedHosts: []string{"https://example.com"}},
		{AllowedHosts: []string{"exa mple.com"}},
		{AllowedHosts: []string{""}},
		{TLSCertFile: "tls.crt"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: valid", c)
		}
	}
	ok := Config{AllowedOrigins: []string{"https://console.example:8443"}, AllowedHosts: []string{"example.com", "*.example.com", "::1", "[::1]", "10.0.0.1", "localhost:8000"}}
	if err := ok.Validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
}
