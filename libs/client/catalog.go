package client

import (
	"context"
	"net/http"
	"net/url"
)

const (
	typesPath      = "/api/v1/resource-types"
	webhooksPath   = "/api/v1/admission-webhooks"
	namespacesPath = "/api/v1/namespaces"
)

// ListTypes lists the resource types, those named name only when name is
// not empty.
func (c *Client) ListTypes(ctx context.Context, name string) ([]ResourceType, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	var out []ResourceType
	_, err := c.do(ctx, request{method: http.MethodGet, path: typesPath, query: q}, &out)
	return out, err
}

// GetType reads a type by name and version.
func (c *Client) GetType(ctx context.Context, name, version string) (*ResourceType, error) {
	var out ResourceType
	if _, err := c.do(ctx, request{method: http.MethodGet, path: typesPath + "/" + url.PathEscape(name) + "/" + url.PathEscape(version)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateType registers a type. body is a ResourceTypeWrite, or any value
// (json.RawMessage) that encodes to one.
func (c *Client) CreateType(ctx context.Context, body any, opts ...CallOption) (*ResourceType, error) {
	var out ResourceType
	if _, err := c.do(ctx, request{method: http.MethodPost, path: typesPath, body: body}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateType replaces a type's description, schema and policy; body as
// for CreateType.
func (c *Client) UpdateType(ctx context.Context, id int64, body any, opts ...CallOption) (*ResourceType, error) {
	var out ResourceType
	if _, err := c.do(ctx, request{method: http.MethodPut, path: idPath(typesPath+"/", id, ""), body: body}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteType deletes a type (refused while resources of it exist).
func (c *Client) DeleteType(ctx context.Context, id int64, opts ...CallOption) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: idPath(typesPath+"/", id, "")}, nil, opts...)
	return err
}

// ListWebhooks lists every webhook registration.
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var out []Webhook
	_, err := c.do(ctx, request{method: http.MethodGet, path: webhooksPath}, &out)
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

// CreateWebhook registers a webhook. body is a WebhookWrite, or any value
// (json.RawMessage) that encodes to one.
func (c *Client) CreateWebhook(ctx context.Context, body any, opts ...CallOption) (*Webhook, error) {
	var out Webhook
	if _, err := c.do(ctx, request{method: http.MethodPost, path: webhooksPath, body: body}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateWebhook changes the fields body carries (a merge: null clears
// resource_type_name, resource_type_version and ca_bundle); body as for
// CreateWebhook.
func (c *Client) UpdateWebhook(ctx context.Context, id int64, body any, opts ...CallOption) (*Webhook, error) {
	var out Webhook
	if _, err := c.do(ctx, request{method: http.MethodPut, path: idPath(webhooksPath+"/", id, ""), body: body}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteWebhook removes a registration.
func (c *Client) DeleteWebhook(ctx context.Context, id int64, opts ...CallOption) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: idPath(webhooksPath+"/", id, "")}, nil, opts...)
	return err
}

// ListNamespaces lists every namespace by name, the terminating ones
// included.
func (c *Client) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	var out []Namespace
	_, err := c.do(ctx, request{method: http.MethodGet, path: namespacesPath}, &out)
	return out, err
}

// GetNamespace reads a namespace by name.
func (c *Client) GetNamespace(ctx context.Context, name string) (*Namespace, error) {
	var out Namespace
	if _, err := c.do(ctx, request{method: http.MethodGet, path: namespacesPath + "/" + url.PathEscape(name)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateNamespace creates a namespace.
func (c *Client) CreateNamespace(ctx context.Context, name string, opts ...CallOption) (*Namespace, error) {
	var out Namespace
	if _, err := c.do(ctx, request{method: http.MethodPost, path: namespacesPath, body: NamespaceCreate{Name: name}}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteNamespace requests deletion of a namespace: it turns terminating,
// its resources are deleted, and it goes with the last of them.
func (c *Client) DeleteNamespace(ctx context.Context, name string, opts ...CallOption) (*Namespace, error) {
	var out Namespace
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: namespacesPath + "/" + url.PathEscape(name)}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// Reconcilers lists the registered reconcilers.
func (c *Client) Reconcilers(ctx context.Context) ([]Reconciler, error) {
	var out []Reconciler
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/reconcilers"}, &out)
	return out, err
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
