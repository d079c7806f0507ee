package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

const resourcesPath = "/api/v1/resources"

// ListOptions filter a resource list and a watch.
type ListOptions struct {
	TypeName, TypeVersion string
	// Namespace is sent as ?namespace=; empty means every namespace.
	Namespace     string
	LabelSelector string
	// Status filters by lifecycle status (list only).
	Status string
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
	set("status", o.Status)
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// Page is one page of a resource list.
type Page struct {
	Items []Resource
	// Revision is the revision the list was read at (first page only):
	// a watch from it sees every later change.
	Revision int64
	// Continue is the token of the next page; empty on the last.
	Continue string
}

// ListPage reads one page: the first when cont is empty, else the page
// that token names.
func (c *Client) ListPage(ctx context.Context, o ListOptions, cont string) (*Page, error) {
	q := o.query()
	if cont != "" {
		q.Set("continue", cont)
	}
	var p Page
	h, err := c.do(ctx, request{method: http.MethodGet, path: resourcesPath, query: q}, &p.Items)
	if err != nil {
		return nil, err
	}
	p.Revision, _ = strconv.ParseInt(h.Get(HeaderResourceVersion), 10, 64)
	p.Continue = h.Get(HeaderContinueToken)
	return &p, nil
}

// Pages iterates over the pages of a list, stopping after the last page or
// the first error.
func (c *Client) Pages(ctx context.Context, o ListOptions) iter.Seq2[*Page, error] {
	return func(yield func(*Page, error) bool) {
		cont := ""
		for {
			p, err := c.ListPage(ctx, o, cont)
			if !yield(p, err) || err != nil || p.Continue == "" {
				return
			}
			cont = p.Continue
		}
	}
}

// ListResources reads every page of a list. The revision is the first
// page's: a watch from it sees every later change.
func (c *Client) ListResources(ctx context.Context, o ListOptions) ([]Resource, int64, error) {
	var (
		all []Resource
		rev int64
	)
	first := true
	for p, err := range c.Pages(ctx, o) {
		if err != nil {
			return nil, 0, err
		}
		if first {
			rev, first = p.Revision, false
		}
		all = append(all, p.Items...)
	}
	return all, rev, nil
}

// GetResource reads a resource by (type, version, namespace, name); an
// empty namespace means the default one.
func (c *Client) GetResource(ctx context.Context, typeName, version, namespace, name string) (*Resource, error) {
	q := url.Values{}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	var out Resource
	path := resourcesPath + "/by-name/" + url.PathEscape(typeName) + "/" + url.PathEscape(version) + "/" + url.PathEscape(name)
	if _, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetResourceByID reads a resource by id.
func (c *Client) GetResourceByID(ctx context.Context, id int64) (*Resource, error) {
	var out Resource
	if _, err := c.do(ctx, request{method: http.MethodGet, path: idPath(resourcesPath+"/", id, "")}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateResource creates a resource.
func (c *Client) CreateResource(ctx context.Context, req CreateRequest, opts ...CallOption) (*Resource, error) {
	var out Resource
	if _, err := c.do(ctx, request{method: http.MethodPost, path: resourcesPath, body: req}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// Apply is server-side apply; result is ApplyCreated, ApplyConfigured or
// ApplyUnchanged.
func (c *Client) Apply(ctx context.Context, req ApplyRequest, opts ...CallOption) (*Resource, string, error) {
	var out Resource
	h, err := c.do(ctx, request{method: http.MethodPost, path: resourcesPath + "/apply", body: req}, &out, opts...)
	if err != nil {
		return nil, "", err
	}
	return &out, h.Get(HeaderApplyResult), nil
}

// UpdateResource replaces a resource's spec (and labels, annotations and
// owner references when given).
func (c *Client) UpdateResource(ctx context.Context, id int64, req UpdateRequest, opts ...CallOption) (*Resource, error) {
	var out Resource
	if _, err := c.do(ctx, request{method: http.MethodPut, path: idPath(resourcesPath+"/", id, ""), body: req}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// PatchResource applies a JSON merge patch (RFC 7386) to a resource's
// spec, labels, annotations and owner references.
func (c *Client) PatchResource(ctx context.Context, id int64, patch json.RawMessage, opts ...CallOption) (*Resource, error) {
	var out Resource
	r := request{method: http.MethodPatch, path: idPath(resourcesPath+"/", id, ""), body: []byte(patch), contentType: "application/merge-patch+json"}
	if _, err := c.do(ctx, r, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// JSONPatchResource applies a JSON patch (RFC 6902) to a resource's spec,
// labels, annotations and owner references, all operations or none; a
// failed test operation is a 409 (IsConflict).
func (c *Client) JSONPatchResource(ctx context.Context, id int64, ops []JSONPatchOperation, opts ...CallOption) (*Resource, error) {
	var out Resource
	r := request{method: http.MethodPatch, path: idPath(resourcesPath+"/", id, ""), body: ops, contentType: "application/json-patch+json"}
	if _, err := c.do(ctx, r, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateFinalizers adds and removes finalizers.
func (c *Client) UpdateFinalizers(ctx context.Context, id int64, req FinalizersUpdate, opts ...CallOption) (*Resource, error) {
	var out Resource
	if _, err := c.do(ctx, request{method: http.MethodPut, path: idPath(resourcesPath+"/", id, "/finalizers"), body: req}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteResource requests deletion of a resource; the answer is the
// resource as it now is (deleting, or the last state before the purge).
func (c *Client) DeleteResource(ctx context.Context, id int64, opts ...CallOption) (*Resource, error) {
	var out Resource
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: idPath(resourcesPath+"/", id, "")}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// Reconcile triggers a reconcile of a resource now.
func (c *Client) Reconcile(ctx context.Context, id int64, opts ...CallOption) (*Resource, error) {
	var out Resource
	if _, err := c.do(ctx, request{method: http.MethodPost, path: idPath(resourcesPath+"/", id, "/reconcile")}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// History reads a resource's reconcile attempts, newest first, at most
// limit (0: the server's default).
func (c *Client) History(ctx context.Context, id int64, limit int) ([]HistoryEntry, error) {
	var out []HistoryEntry
	_, err := c.do(ctx, request{method: http.MethodGet, path: idPath(resourcesPath+"/", id, "/history"), query: limitQuery(limit)}, &out)
	return out, err
}

// Outputs reads a resource's outputs.
func (c *Client) Outputs(ctx context.Context, id int64) (json.RawMessage, error) {
	var out Outputs
	_, err := c.do(ctx, request{method: http.MethodGet, path: idPath(resourcesPath+"/", id, "/outputs")}, &out)
	return out.Outputs, err
}

// EventRecords reads a resource's Events, newest first, at most limit.
func (c *Client) EventRecords(ctx context.Context, id int64, limit int) ([]EventRecord, error) {
	var out []EventRecord
	_, err := c.do(ctx, request{method: http.MethodGet, path: idPath(resourcesPath+"/", id, "/event-records"), query: limitQuery(limit)}, &out)
	return out, err
}

// RecordEvent records an Event on a resource.
func (c *Client) RecordEvent(ctx context.Context, id int64, ev EventRecordCreate, opts ...CallOption) (*EventRecord, error) {
	var out EventRecord
	if _, err := c.do(ctx, request{method: http.MethodPost, path: idPath(resourcesPath+"/", id, "/event-records"), body: ev}, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

func limitQuery(limit int) url.Values {
	if limit <= 0 {
		return nil
	}
	return url.Values{"limit": {strconv.Itoa(limit)}}
}
