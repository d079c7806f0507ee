package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apiclient "github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// APIError is an error answer of the REST API (libs/client's).
type APIError = apiclient.Error

// ctx bounds one helper's API call.
func callContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func (e *Env) must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Policy is a type's reconcile policy (zero fields take the defaults:
// resync 300 s, backoff 60 s doubling to 61440 s, timeout 300 s).
type Policy = apiclient.ReconcilePolicyWrite

// TypeOption configures CreateType.
type TypeOption func(*apiclient.ResourceTypeWrite)

// WithPolicy sets the type's reconcile policy.
func WithPolicy(p Policy) TypeOption {
	return func(w *apiclient.ResourceTypeWrite) { w.ReconcilePolicy = &p }
}

// WithDescription sets the type's description.
func WithDescription(d string) TypeOption {
	return func(w *apiclient.ResourceTypeWrite) { w.Description = d }
}

// CreateType registers a resource type (schema: an OpenAPI v3 schema as a
// JSON string, []byte, json.RawMessage or a Go value) and returns its id.
func (e *Env) CreateType(t testing.TB, name, version string, schema any, opts ...TypeOption) int64 {
	t.Helper()
	body := apiclient.ResourceTypeWrite{Name: name, Version: version, Schema: rawJSON(t, schema)}
	for _, o := range opts {
		o(&body)
	}
	ctx, cancel := callContext()
	defer cancel()
	out, err := e.API.CreateType(ctx, body)
	e.must(t, fmt.Sprintf("create type %s/%s", name, version), err)
	return out.ID
}

func rawJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := toJSON(v)
	if err != nil {
		t.Fatalf("testkit: not JSON: %v", err)
	}
	return b
}

// toJSON is v as JSON: a string, []byte or json.RawMessage as is, any
// other value encoded.
func toJSON(v any) (json.RawMessage, error) {
	switch s := v.(type) {
	case string:
		return json.RawMessage(s), nil
	case []byte:
		return json.RawMessage(s), nil
	case json.RawMessage:
		return s, nil
	}
	return json.Marshal(v)
}

// ResourceOption configures CreateResource.
type ResourceOption func(*apiclient.CreateRequest)

// WithLabels sets labels.
func WithLabels(l map[string]string) ResourceOption {
	return func(r *apiclient.CreateRequest) { r.Labels = l }
}

// WithAnnotations sets annotations.
func WithAnnotations(a map[string]string) ResourceOption {
	return func(r *apiclient.CreateRequest) { r.Annotations = a }
}

// WithNamespace creates the resource in namespace ns (CreateNamespace
// makes it; without this option, the resource goes to "default").
func WithNamespace(ns string) ResourceOption {
	return func(r *apiclient.CreateRequest) { r.Namespace = ns }
}

// WithFinalizers sets extra finalizers.
func WithFinalizers(f ...string) ResourceOption {
	return func(r *apiclient.CreateRequest) { r.Finalizers = f }
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
	raw, err := toJSON(spec)
	if err != nil {
		return nil, err
	}
	req := apiclient.CreateRequest{Name: name, ResourceTypeName: typ.Name, ResourceTypeVersion: typ.Version, Spec: raw}
	for _, o := range opts {
		o(&req)
	}
	ctx, cancel := callContext()
	defer cancel()
	out, err := e.API.CreateResource(ctx, req)
	if err != nil {
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
	ctx, cancel := callContext()
	defer cancel()
	_, err := e.API.UpdateResource(ctx, r.ID, apiclient.UpdateRequest{Spec: rawJSON(t, spec)})
	e.must(t, fmt.Sprintf("update resource %d", r.ID), err)
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
	ctx, cancel := callContext()
	defer cancel()
	_, err := e.API.PatchResource(ctx, r.ID, rawJSON(t, map[string]any{"annotations": ann}))
	e.must(t, fmt.Sprintf("annotate resource %d", r.ID), err)
	got, _ := e.Get(t, r)
	return got
}

// Trigger asks for a reconcile (POST .../reconcile, the manual trigger).
func (e *Env) Trigger(t testing.TB, r *sdk.Resource) {
	t.Helper()
	ctx, cancel := callContext()
	defer cancel()
	_, err := e.API.Reconcile(ctx, r.ID)
	e.must(t, fmt.Sprintf("reconcile resource %d", r.ID), err)
}

// Delete requests deletion through the REST API.
func (e *Env) Delete(t testing.TB, r *sdk.Resource) {
	t.Helper()
	ctx, cancel := callContext()
	defer cancel()
	_, err := e.API.DeleteResource(ctx, r.ID)
	e.must(t, fmt.Sprintf("delete resource %d", r.ID), err)
}

// UpdateFinalizers adds and removes finalizers through the REST API.
func (e *Env) UpdateFinalizers(t testing.TB, r *sdk.Resource, add, remove []string) {
	t.Helper()
	ctx, cancel := callContext()
	defer cancel()
	_, err := e.API.UpdateFinalizers(ctx, r.ID, apiclient.FinalizersUpdate{Add: add, Remove: remove})
	e.must(t, fmt.Sprintf("update finalizers of resource %d", r.ID), err)
}

// Namespace is a namespace as the REST API answers it.
type Namespace = apiclient.Namespace

// CreateNamespace creates a namespace through the REST API.
func (e *Env) CreateNamespace(t testing.TB, name string) *Namespace {
	t.Helper()
	ctx, cancel := callContext()
	defer cancel()
	out, err := e.API.CreateNamespace(ctx, name)
	e.must(t, "create namespace "+name, err)
	return out
}

// DeleteNamespace requests a namespace's deletion through the REST API: it
// turns terminating, its resources are deleted (their reconcilers clean
// up), and it is gone once they are (WaitNamespaceGone).
func (e *Env) DeleteNamespace(t testing.TB, name string) *Namespace {
	t.Helper()
	ctx, cancel := callContext()
	defer cancel()
	out, err := e.API.DeleteNamespace(ctx, name)
	e.must(t, "delete namespace "+name, err)
	return out
}

// GetNamespace reads a namespace; ok is false when it does not exist.
func (e *Env) GetNamespace(t testing.TB, name string) (*Namespace, bool) {
	t.Helper()
	ctx, cancel := callContext()
	defer cancel()
	out, err := e.API.GetNamespace(ctx, name)
	if apiclient.IsNotFound(err) {
		return nil, false
	}
	e.must(t, "get namespace "+name, err)
	return out, true
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
