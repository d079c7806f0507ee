// Package client is the no8s CLI's client of the REST API (docs/api.md):
// namespaces, resource types, resources (server-side apply included),
// webhooks, reconciliation, Event records, and list-then-watch over
// Server-Sent Events with resume.
// Errors from the server come back as *APIError, with the server's message
// and field paths.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
)

// Client talks to one no8s API server.
type Client struct {
	base  string
	token string
	http  *http.Client
	// stream is http without a timeout, for watches.
	stream *http.Client
}

// New returns a client of the server at base (http://127.0.0.1:8000). A
// token, when given, is sent as a bearer token. timeout bounds each request
// except watches.
func New(base, token string, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q is not an http:// or https:// URL", base)
	}
	return &Client{
		base:   strings.TrimRight(base, "/"),
		token:  token,
		http:   &http.Client{Timeout: timeout},
		stream: &http.Client{},
	}, nil
}

// WithHTTPClient returns a copy of c that sends its requests (watches
// excepted) through hc: a program calling the API from many goroutines
// (the tenant reconciler) gives it a transport that keeps enough idle
// connections.
func (c *Client) WithHTTPClient(hc *http.Client) *Client {
	cp := *c
	cp.http = hc
	return &cp
}

// Server is the base URL.
func (c *Client) Server() string { return c.base }

// APIError is an error answer of the server: its status, code, message and
// the offending fields.
type APIError struct {
	Status    int                `json:"-"`
	Detail    string             `json:"detail"`
	Code      string             `json:"code"`
	Errors    []names.FieldError `json:"errors"`
	RequestID string             `json:"request_id"`
}

// Error is "Error from server (400 validation_failed): detail", then one
// line per field.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Error from server (%d %s): %s", e.Status, e.Code, e.Detail)
	for _, f := range e.Errors {
		b.WriteString("\n  ")
		if f.Path != "" {
			b.WriteString(f.Path)
			b.WriteString(": ")
		}
		b.WriteString(f.Message)
	}
	return b.String()
}

// IsNotFound reports whether err is the server's 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// request is one API call.
type request struct {
	method string
	path   string
	query  url.Values
	body   any // nil, []byte (sent as is) or a value sent as JSON
	header http.Header
}

// do sends r and decodes a 2xx JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, r request, out any) (http.Header, error) {
	resp, err := c.send(ctx, c.http, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", r.method, r.path, err)
	}
	if resp.StatusCode >= 300 {
		return resp.Header, decodeError(resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("%s %s: decode answer: %w", r.method, r.path, err)
		}
	}
	return resp.Header, nil
}

func (c *Client) send(ctx context.Context, hc *http.Client, r request) (*http.Response, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
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
	return resp, nil
}

// decodeError turns an error answer into an *APIError.
func decodeError(status int, data []byte) error {
	e := &APIError{Status: status}
	if json.Unmarshal(data, e) != nil || e.Detail == "" {
		e.Detail = strings.TrimSpace(string(data))
		if e.Detail == "" {
			e.Detail = http.StatusText(status)
		}
	}
	if e.Code == "" {
		e.Code = strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
	}
	return e
}

// Resource is a resource as the API answers it.
type Resource = resource.Resource

// Namespace is a namespace as the API answers it.
type Namespace = resource.Namespace

// Type is a resource type as the API answers it.
type Type = resource.Type

// Webhook is an admission webhook registration as the API answers it.
type Webhook struct {
	ID                  int64     `json:"id"`
	Name                string    `json:"name"`
	ResourceTypeName    *string   `json:"resource_type_name"`
	ResourceTypeVersion *string   `json:"resource_type_version"`
	WebhookURL          string    `json:"webhook_url"`
	WebhookType         string    `json:"webhook_type"`
	Operations          []string  `json:"operations"`
	TimeoutSeconds      int       `json:"timeout_seconds"`
	FailurePolicy       string    `json:"failure_policy"`
	Ordering            int       `json:"ordering"`
	CABundle            *string   `json:"ca_bundle"`
	ResourceVersion     int64     `json:"resource_version"`
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
}

// HistoryEntry is one reconcile attempt.
type HistoryEntry struct {
	ID               int64     `json:"id"`
	Generation       int64     `json:"generation"`
	Success          bool      `json:"success"`
	Phase            string    `json:"phase"`
	ErrorMessage     *string   `json:"error_message"`
	ResourcesCreated int       `json:"resources_created"`
	ResourcesUpdated int       `json:"resources_updated"`
	ResourcesDeleted int       `json:"resources_deleted"`
	StartedAt        time.Time `json:"started_at"`
	DurationMS       int64     `json:"duration_ms"`
	Holder           string    `json:"holder"`
	Reason           string    `json:"reason"`
}

// EventRecord is an Event in the Kubernetes sense, as the API answers it:
// a record attached to a resource saying what happened to it (not a change
// of the event stream).
type EventRecord struct {
	ID         int64  `json:"id"`
	ResourceID int64  `json:"resource_id"`
	Type       string `json:"type"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
	Source     string `json:"source"`
	// Count is how many times it happened within the dedup window, from
	// FirstTime to LastTime.
	Count     int32     `json:"count"`
	FirstTime time.Time `json:"first_time"`
	LastTime  time.Time `json:"last_time"`
}

// EventRecords reads a resource's Events, newest first, at most limit.
func (c *Client) EventRecords(ctx context.Context, id int64, limit int) ([]EventRecord, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []EventRecord
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/resources/" + strconv.FormatInt(id, 10) + "/event-records", query: q}, &out)
	return out, err
}

// ListTypes lists the resource types, those named name only when name is
// not empty.
func (c *Client) ListTypes(ctx context.Context, name string) ([]Type, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	var out []Type
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/resource-types", query: q}, &out)
	return out, err
}

// GetType reads a type by name and version.
func (c *Client) GetType(ctx context.Context, name, version string) (*Type, error) {
	var out Type
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/resource-types/" + url.PathEscape(name) + "/" + url.PathEscape(version)}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateType registers a type from its body (name, version, description,
// schema, reconcile_policy).
func (c *Client) CreateType(ctx context.Context, body map[string]json.RawMessage, dryRun bool) (*Type, error) {
	var out Type
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/resource-types", query: dryRunQuery(dryRun), body: body}, &out)
	return &out, err
}

// UpdateType replaces a type's description, schema and policy.
func (c *Client) UpdateType(ctx context.Context, id int64, body map[string]json.RawMessage, dryRun bool) (*Type, error) {
	var out Type
	_, err := c.do(ctx, request{method: http.MethodPut, path: "/api/v1/resource-types/" + strconv.FormatInt(id, 10), query: dryRunQuery(dryRun), body: body}, &out)
	return &out, err
}

// DeleteType deletes a type.
func (c *Client) DeleteType(ctx context.Context, id int64, dryRun bool) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/resource-types/" + strconv.FormatInt(id, 10), query: dryRunQuery(dryRun)}, nil)
	return err
}

// ListWebhooks lists every webhook registration.
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var out []Webhook
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admission-webhooks"}, &out)
	return out, err
}

// GetWebhookByName finds a registration by name; nil when there is none.
func (c *Client) GetWebhookByName(ctx context.Context, name string) (*Webhook, error) {
	all, err := c.ListWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Name == name {
			return &all[i], nil
		}
	}
	return nil, nil
}

// CreateWebhook registers a webhook from its body.
func (c *Client) CreateWebhook(ctx context.Context, body json.RawMessage, dryRun bool) (*Webhook, error) {
	var out Webhook
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/admission-webhooks", query: dryRunQuery(dryRun), body: []byte(body)}, &out)
	return &out, err
}

// UpdateWebhook changes the given fields of a registration.
func (c *Client) UpdateWebhook(ctx context.Context, id int64, body json.RawMessage, dryRun bool) (*Webhook, error) {
	var out Webhook
	_, err := c.do(ctx, request{method: http.MethodPut, path: "/api/v1/admission-webhooks/" + strconv.FormatInt(id, 10), query: dryRunQuery(dryRun), body: []byte(body)}, &out)
	return &out, err
}

// DeleteWebhook removes a registration.
func (c *Client) DeleteWebhook(ctx context.Context, id int64, dryRun bool) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/admission-webhooks/" + strconv.FormatInt(id, 10), query: dryRunQuery(dryRun)}, nil)
	return err
}

func dryRunQuery(dry bool) url.Values {
	if dry {
		return url.Values{"dry_run": {"true"}}
	}
	return nil
}

// ListNamespaces lists every namespace by name, the terminating ones
// included.
func (c *Client) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	var out []Namespace
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/namespaces"}, &out)
	return out, err
}

// GetNamespace reads a namespace by name.
func (c *Client) GetNamespace(ctx context.Context, name string) (*Namespace, error) {
	var out Namespace
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/namespaces/" + url.PathEscape(name)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateNamespace creates a namespace.
func (c *Client) CreateNamespace(ctx context.Context, name string, dryRun bool) (*Namespace, error) {
	var out Namespace
	body := map[string]string{"name": name}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/namespaces", query: dryRunQuery(dryRun), body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteNamespace requests deletion of a namespace: it turns terminating,
// its resources are deleted, and it goes with the last of them.
func (c *Client) DeleteNamespace(ctx context.Context, name string, dryRun bool) (*Namespace, error) {
	var out Namespace
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/namespaces/" + url.PathEscape(name), query: dryRunQuery(dryRun)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListOptions filter a resource list and a watch.
type ListOptions struct {
	TypeName, TypeVersion string
	// Namespace is sent as ?namespace=; empty means every namespace.
	Namespace     string
	LabelSelector string
	// Limit is the page size (0: the server's default).
	Limit int
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("resource_type", o.TypeName)
	set("resource_type_version", o.TypeVersion)
	set("namespace", o.Namespace)
	set("label_selector", o.LabelSelector)
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// ListResources reads every page of a list. The revision is the first
// page's X-Resource-Version: a watch from it sees every later change.
func (c *Client) ListResources(ctx context.Context, o ListOptions) ([]Resource, int64, error) {
	items, rev, _, err := c.listPages(ctx, o, 0)
	return items, rev, err
}

// ListResourcesPage reads the first page of a list (o.Limit items) and
// reports whether more follow.
func (c *Client) ListResourcesPage(ctx context.Context, o ListOptions) ([]Resource, bool, error) {
	items, _, more, err := c.listPages(ctx, o, 1)
	return items, more, err
}

// listPages reads up to maxPages pages of a list (0: every page).
func (c *Client) listPages(ctx context.Context, o ListOptions, maxPages int) ([]Resource, int64, bool, error) {
	q := o.query()
	var (
		all []Resource
		rev int64
	)
	for page := 0; ; page++ {
		var items []Resource
		h, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/resources", query: q}, &items)
		if err != nil {
			return nil, 0, false, err
		}
		if page == 0 {
			rev, _ = strconv.ParseInt(h.Get("X-Resource-Version"), 10, 64)
		}
		all = append(all, items...)
		tok := h.Get("X-Continue-Token")
		if tok == "" {
			return all, rev, false, nil
		}
		if maxPages > 0 && page+1 >= maxPages {
			return all, rev, true, nil
		}
		q.Set("continue", tok)
	}
}

// GetResource reads a resource by (type, version, namespace, name).
func (c *Client) GetResource(ctx context.Context, typeName, version, namespace, name string) (*Resource, error) {
	q := url.Values{}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	var out Resource
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/resources/by-name/" + url.PathEscape(typeName) + "/" + url.PathEscape(version) + "/" + url.PathEscape(name), query: q}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetResourceByID reads a resource by id.
func (c *Client) GetResourceByID(ctx context.Context, id int64) (*Resource, error) {
	var out Resource
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/resources/" + strconv.FormatInt(id, 10)}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ApplyRequest is the body of server-side apply.
type ApplyRequest struct {
	Namespace           string             `json:"namespace,omitempty"`
	Name                string             `json:"name"`
	ResourceTypeName    string             `json:"resource_type_name"`
	ResourceTypeVersion string             `json:"resource_type_version"`
	Spec                json.RawMessage    `json:"spec"`
	Labels              *map[string]string `json:"labels,omitempty"`
	Annotations         *map[string]string `json:"annotations,omitempty"`
	// OwnerReferences, when not nil, replace the stored ones.
	OwnerReferences *[]resource.OwnerReference `json:"owner_references,omitempty"`
}

// CreateRequest is the body of a create.
type CreateRequest struct {
	Namespace           string                    `json:"namespace,omitempty"`
	Name                string                    `json:"name"`
	ResourceTypeName    string                    `json:"resource_type_name"`
	ResourceTypeVersion string                    `json:"resource_type_version"`
	Spec                json.RawMessage           `json:"spec"`
	Labels              map[string]string         `json:"labels,omitempty"`
	Annotations         map[string]string         `json:"annotations,omitempty"`
	OwnerReferences     []resource.OwnerReference `json:"owner_references,omitempty"`
}

// CreateResource creates a resource (POST /api/v1/resources).
func (c *Client) CreateResource(ctx context.Context, req CreateRequest) (*Resource, error) {
	var out Resource
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/resources", body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReplaceRequest is the body of PUT /api/v1/resources/{id}: the spec is
// replaced, labels, annotations and owner references when not nil.
type ReplaceRequest struct {
	Spec            json.RawMessage            `json:"spec"`
	Labels          *map[string]string         `json:"labels,omitempty"`
	Annotations     *map[string]string         `json:"annotations,omitempty"`
	OwnerReferences *[]resource.OwnerReference `json:"owner_references,omitempty"`
	// ResourceVersion, when not zero, must be the stored one (else 409).
	ResourceVersion int64 `json:"resource_version,omitempty"`
}

// ReplaceResource replaces a resource's spec (PUT /api/v1/resources/{id}).
func (c *Client) ReplaceResource(ctx context.Context, id int64, req ReplaceRequest) (*Resource, error) {
	var out Resource
	if _, err := c.do(ctx, request{method: http.MethodPut, path: "/api/v1/resources/" + strconv.FormatInt(id, 10), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PatchResource applies a JSON merge patch (RFC 7386) to a resource's spec,
// labels, annotations and owner references (PATCH /api/v1/resources/{id}).
func (c *Client) PatchResource(ctx context.Context, id int64, patch json.RawMessage) (*Resource, error) {
	var out Resource
	h := http.Header{}
	h.Set("Content-Type", "application/merge-patch+json")
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: "/api/v1/resources/" + strconv.FormatInt(id, 10), body: []byte(patch), header: h}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Apply is server-side apply; result is created, configured or unchanged.
func (c *Client) Apply(ctx context.Context, req ApplyRequest, dryRun bool) (*Resource, string, error) {
	var out Resource
	h, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/resources/apply", query: dryRunQuery(dryRun), body: req}, &out)
	if err != nil {
		return nil, "", err
	}
	return &out, h.Get("X-Apply-Result"), nil
}

// DeleteResource requests deletion of a resource.
func (c *Client) DeleteResource(ctx context.Context, id int64, dryRun bool) (*Resource, error) {
	var out Resource
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/resources/" + strconv.FormatInt(id, 10), query: dryRunQuery(dryRun)}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Reconcile triggers a reconcile of a resource now.
func (c *Client) Reconcile(ctx context.Context, id int64) (*Resource, error) {
	var out Resource
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/resources/" + strconv.FormatInt(id, 10) + "/reconcile"}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// History reads a resource's reconcile attempts, newest first.
func (c *Client) History(ctx context.Context, id int64, limit int) ([]HistoryEntry, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []HistoryEntry
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/resources/" + strconv.FormatInt(id, 10) + "/history", query: q}, &out)
	return out, err
}

// Outputs reads a resource's outputs.
func (c *Client) Outputs(ctx context.Context, id int64) (json.RawMessage, error) {
	var out struct {
		Outputs json.RawMessage `json:"outputs"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/resources/" + strconv.FormatInt(id, 10) + "/outputs"}, &out)
	return out.Outputs, err
}

// Ping reads the OpenAPI document's version: the server answers and
// speaks the API.
func (c *Client) Ping(ctx context.Context) (string, error) {
	var doc struct {
		Info struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/openapi.json"}, &doc)
	return doc.Info.Version, err
}
