package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// APIError is an error answer of the REST API.
type APIError struct {
	Status int
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Errors []struct {
		Path    string `json:"path"`
		Message string `json:"message"`
	} `json:"errors"`
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Detail) }

// Do sends one request to the REST API (body: nil, []byte, string,
// json.RawMessage or anything JSON-encodable) and returns the status and
// body; an answer of 400 or more is an *APIError.
func (e *Env) Do(ctx context.Context, method, path string, body any, contentType ...string) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	case json.RawMessage:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if rd != nil {
		ct := "application/json"
		if len(contentType) > 0 {
			ct = contentType[0]
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if resp.StatusCode >= 400 {
		ae := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(data, ae)
		return resp.StatusCode, data, ae
	}
	return resp.StatusCode, data, nil
}

func (e *Env) must(t testing.TB, method, path string, body any, contentType ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, data, err := e.Do(ctx, method, path, body, contentType...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return data
}

// Policy is a type's reconcile policy (zero fields take the defaults:
// resync 300 s, backoff 60 s doubling to 61440 s, timeout 300 s).
type Policy struct {
	ResyncSeconds      int `json:"resync_seconds,omitempty"`
	BackoffBaseSeconds int `json:"backoff_base_seconds,omitempty"`
	BackoffMaxSeconds  int `json:"backoff_max_seconds,omitempty"`
	TimeoutSeconds     int `json:"timeout_seconds,omitempty"`
}

// TypeOption configures CreateType.
type TypeOption func(map[string]any)

// WithPolicy sets the type's reconcile policy.
func WithPolicy(p Policy) TypeOption { return func(m map[string]any) { m["reconcile_policy"] = p } }

// WithDescription sets the type's description.
func WithDescription(d string) TypeOption { return func(m map[string]any) { m["description"] = d } }

// CreateType registers a resource type (schema: an OpenAPI v3 schema as a
// JSON string, []byte, json.RawMessage or a Go value) and returns its id.
func (e *Env) CreateType(t testing.TB, name, version string, schema any, opts ...TypeOption) int64 {
	t.Helper()
	body := map[string]any{"name": name, "version": version, "schema": rawJSON(t, schema)}
	for _, o := range opts {
		o(body)
	}
	var out struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(e.must(t, http.MethodPost, "/api/v1/resource-types", body), &out); err != nil {
		t.Fatalf("create type %s/%s: %v", name, version, err)
	}
	return out.ID
}

func rawJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	switch s := v.(type) {
	case string:
		return json.RawMessage(s)
	case []byte:
		return json.RawMessage(s)
	case json.RawMessage:
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("testkit: not JSON: %v", err)
	}
	return b
}

// ResourceOption configures CreateResource.
type ResourceOption func(map[string]any)

// WithLabels sets labels.
func WithLabels(l map[string]string) ResourceOption {
	return func(m map[string]any) { m["labels"] = l }
}

// WithAnnotations sets annotations.
func WithAnnotations(a map[string]string) ResourceOption {
	return func(m map[string]any) { m["annotations"] = a }
}

// WithNamespace creates the resource in namespace ns (CreateNamespace
// makes it; without this option, the resource goes to "default").
func WithNamespace(ns string) ResourceOption {
	return func(m map[string]any) { m["namespace"] = ns }
}

// WithFinalizers sets extra finalizers.
func WithFinalizers(f ...string) ResourceOption {
	return func(m map[string]any) { m["finalizers"] = f }
}

// CreateResource creates a resource through the REST API (admission,
// defaults and the live-reconciler rule apply) and returns it as stored.
func (e *Env) CreateResource(t testing.TB, typ sdk.TypeRef, name string, spec any, opts ...ResourceOption) *sdk.Resource {
	t.Helper()
	r, err := e.TryCreateResource(typ, name, spec, opts...)
	if err != nil {
		t.Fatalf("create %s %s: %v", typ, name, err)
	}
	return r
}

// TryCreateResource is CreateResource returning the error (an *APIError
// for a refusal) instead of failing the test.
func (e *Env) TryCreateResource(typ sdk.TypeRef, name string, spec any, opts ...ResourceOption) (*sdk.Resource, error) {
	var raw json.RawMessage
	switch s := spec.(type) {
	case string:
		raw = json.RawMessage(s)
	case []byte:
		raw = s
	case json.RawMessage:
		raw = s
	default:
		b, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	body := map[string]any{"name": name, "resource_type_name": typ.Name, "resource_type_version": typ.Version, "spec": raw}
	for _, o := range opts {
		o(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, data, err := e.Do(ctx, http.MethodPost, "/api/v1/resources", body)
	if err != nil {
		return nil, err
	}
	var out struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return e.Client.Get(ctx, out.ID)
}

// Get reads a resource from the store; ok is false when it is gone.
func (e *Env) Get(t testing.TB, r *sdk.Resource) (*sdk.Resource, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := e.Client.Get(ctx, r.ID)
	if isNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("get resource %d: %v", r.ID, err)
	}
	return got, true
}

// UpdateSpec replaces the spec (a new generation) through the REST API.
func (e *Env) UpdateSpec(t testing.TB, r *sdk.Resource, spec any) *sdk.Resource {
	t.Helper()
	e.must(t, http.MethodPut, fmt.Sprintf("/api/v1/resources/%d", r.ID), map[string]any{"spec": rawJSON(t, spec)})
	got, _ := e.Get(t, r)
	return got
}

// Annotate sets annotations (an empty value removes one) with a merge patch.
func (e *Env) Annotate(t testing.TB, r *sdk.Resource, kv map[string]string) *sdk.Resource {
	t.Helper()
	ann := map[string]any{}
	for k, v := range kv {
		if v == "" {
			ann[k] = nil
		} else {
			ann[k] = v
		}
	}
	e.must(t, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", r.ID), map[string]any{"annotations": ann}, "application/merge-patch+json")
	got, _ := e.Get(t, r)
	return got
}

// Trigger asks for a reconcile (POST .../reconcile, the manual trigger).
func (e *Env) Trigger(t testing.TB, r *sdk.Resource) {
	t.Helper()
	e.must(t, http.MethodPost, fmt.Sprintf("/api/v1/resources/%d/reconcile", r.ID), nil)
}

// Delete requests deletion through the REST API.
func (e *Env) Delete(t testing.TB, r *sdk.Resource) {
	t.Helper()
	e.must(t, http.MethodDelete, fmt.Sprintf("/api/v1/resources/%d", r.ID), nil)
}

// UpdateFinalizers adds and removes finalizers through the REST API.
func (e *Env) UpdateFinalizers(t testing.TB, r *sdk.Resource, add, remove []string) {
	t.Helper()
	e.must(t, http.MethodPut, fmt.Sprintf("/api/v1/resources/%d/finalizers", r.ID), map[string]any{"add": add, "remove": remove})
}

// Namespace is a namespace as the REST API answers it.
type Namespace struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Status is "active", or "terminating" while its deletion waits for its
	// resources' finalizers.
	Status          string     `json:"status"`
	ResourceVersion int64      `json:"resource_version"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	DeletedAt       *time.Time `json:"deleted_at"`
}

// CreateNamespace creates a namespace through the REST API.
func (e *Env) CreateNamespace(t testing.TB, name string) *Namespace {
	t.Helper()
	var out Namespace
	if err := json.Unmarshal(e.must(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": name}), &out); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return &out
}

// DeleteNamespace requests a namespace's deletion through the REST API: it
// turns terminating, its resources are deleted (their reconcilers clean
// up), and it is gone once they are (WaitNamespaceGone).
func (e *Env) DeleteNamespace(t testing.TB, name string) *Namespace {
	t.Helper()
	var out Namespace
	if err := json.Unmarshal(e.must(t, http.MethodDelete, "/api/v1/namespaces/"+name, nil), &out); err != nil {
		t.Fatalf("delete namespace %s: %v", name, err)
	}
	return &out
}

// GetNamespace reads a namespace; ok is false when it does not exist.
func (e *Env) GetNamespace(t testing.TB, name string) (*Namespace, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, data, err := e.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+name, nil)
	if status == http.StatusNotFound {
		return nil, false
	}
	if err != nil {
		t.Fatalf("get namespace %s: %v", name, err)
	}
	var out Namespace
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("get namespace %s: %v", name, err)
	}
	return &out, true
}

// WaitNamespaceGone waits until a namespace being deleted is gone: its
// resources' finalizers were all removed.
func (e *Env) WaitNamespaceGone(t testing.TB, name string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, ok := e.GetNamespace(t, name)
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s not gone within %v: %+v", name, timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// History returns the resource's reconciliation history, newest first.
func (e *Env) History(t testing.TB, r *sdk.Resource) []*reconcilev1.HistoryEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*reconcilev1.HistoryEntry
	var before int64
	for {
		resp, err := e.Reconcile.ListHistory(ctx, &reconcilev1.ListHistoryRequest{ResourceId: r.ID, Limit: 500, BeforeId: before})
		if err != nil {
			t.Fatalf("history of %d: %v", r.ID, err)
		}
		out = append(out, resp.GetEntries()...)
		if len(resp.GetEntries()) < 500 {
			return out
		}
		before = resp.GetEntries()[len(resp.GetEntries())-1].GetId()
	}
}
