package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/client"
)

// strictDecode decodes data into T refusing unknown fields, encodes it
// back, and fails unless both say the same (zero values and absent keys
// count as the same: omitempty drops them).
func strictDecode[T any](t *testing.T, what string, data []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: decode into %T (unknown fields refused): %v\n%s", what, v, err, data)
	}
	back, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: encode %T: %v", what, v, err)
	}
	var a, b any
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(back, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dropZero(a), dropZero(b)) {
		t.Fatalf("%s: %T does not round-trip:\nserver: %s\nclient: %s", what, v, data, back)
	}
	return v
}

// dropZero removes object keys whose values are null, "", 0, false, [] or
// {}, recursively.
func dropZero(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			e = dropZero(e)
			if e == nil || e == "" || e == float64(0) || e == false {
				continue
			}
			if m, ok := e.(map[string]any); ok && len(m) == 0 {
				continue
			}
			if l, ok := e.([]any); ok && len(l) == 0 {
				continue
			}
			out[k] = e
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = dropZero(e)
		}
		return out
	}
	return v
}

// TestEveryDocumentDecodesIntoClientTypes: what the gateway renders, on
// every path, decodes into libs/client's types with unknown fields
// refused and encodes back equal in meaning: the gateway's hand-written
// renderers and the client's types are one shape.
func TestEveryDocumentDecodesIntoClientTypes(t *testing.T) {
	createType(t, "Shape", "v1", `{"type":"object","properties":{"size":{"type":"integer","default":1}}}`)
	get := func(path string) []byte {
		t.Helper()
		return do(t, http.MethodGet, path, nil).expect(t, http.StatusOK).Body
	}

	ns := strictDecode[client.Namespace](t, "create namespace",
		do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "shapes"}).expect(t, http.StatusCreated).Body)
	strictDecode[client.Namespace](t, "get namespace", get("/api/v1/namespaces/"+ns.Name))
	strictDecode[[]client.Namespace](t, "list namespaces", get("/api/v1/namespaces"))

	strictDecode[[]client.ResourceType](t, "list types", get("/api/v1/resource-types"))
	ty := strictDecode[client.ResourceType](t, "get type by name", get("/api/v1/resource-types/Shape/v1"))
	strictDecode[client.ResourceType](t, "get type", get(fmt.Sprintf("/api/v1/resource-types/%d", ty.ID)))

	r := strictDecode[client.Resource](t, "create resource", do(t, http.MethodPost, "/api/v1/resources", map[string]any{
		"namespace": ns.Name, "name": "s1", "resource_type_name": "Shape", "resource_type_version": "v1", "spec": map[string]any{"size": 2},
		"labels": map[string]string{"app": "shapes"}, "annotations": map[string]string{"note": "x"},
	}).expect(t, http.StatusCreated).Body)
	strictDecode[client.Resource](t, "get resource", get(fmt.Sprintf("/api/v1/resources/%d", r.ID)))
	strictDecode[client.Resource](t, "get resource by name", get("/api/v1/resources/by-name/Shape/v1/s1?namespace="+ns.Name))
	strictDecode[client.Resource](t, "apply", do(t, http.MethodPost, "/api/v1/resources/apply", map[string]any{
		"namespace": ns.Name, "name": "s2", "resource_type_name": "Shape", "resource_type_version": "v1", "spec": map[string]any{},
	}).expect(t, http.StatusCreated).Body)
	page := do(t, http.MethodGet, "/api/v1/resources?limit=1&namespace="+ns.Name, nil).expect(t, http.StatusOK)
	if len(strictDecode[[]client.Resource](t, "list page", page.Body)) != 1 || page.Header.Get(client.HeaderContinueToken) == "" ||
		page.Header.Get(client.HeaderResourceVersion) == "" {
		t.Fatalf("page of one: %s, headers %v", page.Body, page.Header)
	}
	strictDecode[client.Resource](t, "merge patch", do(t, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", r.ID),
		`{"labels":{"tier":"gold"}}`, "Content-Type", "application/merge-patch+json").expect(t, http.StatusOK).Body)

	reconcileNow(t, r)
	deadline := time.Now().Add(10 * time.Second)
	for len(strictDecode[[]client.HistoryEntry](t, "history", get(fmt.Sprintf("/api/v1/resources/%d/history", r.ID)))) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reconcile attempt recorded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	strictDecode[client.Outputs](t, "outputs", get(fmt.Sprintf("/api/v1/resources/%d/outputs", r.ID)))
	strictDecode[client.EventRecord](t, "record event", do(t, http.MethodPost, fmt.Sprintf("/api/v1/resources/%d/event-records", r.ID),
		map[string]any{"type": "Normal", "reason": "Shaped", "message": "a shape"}).expect(t, http.StatusCreated).Body)
	strictDecode[[]client.EventRecord](t, "events of a resource", get(fmt.Sprintf("/api/v1/resources/%d/event-records", r.ID)))
	strictDecode[[]client.EventRecord](t, "all events", get("/api/v1/event-records?limit=5"))
	strictDecode[[]client.Reconciler](t, "reconcilers", get("/api/v1/reconcilers"))
	strictDecode[client.Health](t, "health", get("/health"))

	wh := strictDecode[client.Webhook](t, "create webhook", do(t, http.MethodPost, "/api/v1/admission-webhooks", map[string]any{
		"name": "shapes.example.com", "resource_type_name": "Shape", "resource_type_version": "v1", "namespaces": []string{ns.Name},
		"webhook_url": "http://127.0.0.1:9/admit", "webhook_type": "validating", "operations": []string{"DELETE"}, "failure_policy": "Ignore",
	}).expect(t, http.StatusCreated).Body)
	t.Cleanup(func() { do(t, http.MethodDelete, fmt.Sprintf("/api/v1/admission-webhooks/%d", wh.ID), nil) })
	if len(wh.Namespaces) != 1 || wh.Namespaces[0] != ns.Name {
		t.Fatalf("webhook namespaces %q", wh.Namespaces)
	}
	strictDecode[client.Webhook](t, "get webhook", get(fmt.Sprintf("/api/v1/admission-webhooks/%d", wh.ID)))
	strictDecode[[]client.Webhook](t, "list webhooks", get("/api/v1/admission-webhooks"))

	// Errors: not found, and a refusal with field paths.
	e := strictDecode[client.Error](t, "404", do(t, http.MethodGet, "/api/v1/resources/987654321", nil).expect(t, http.StatusNotFound).Body)
	if e.Code != client.CodeNotFound {
		t.Fatalf("404 code %q", e.Code)
	}
	e = strictDecode[client.Error](t, "400", do(t, http.MethodPost, "/api/v1/resources", map[string]any{
		"name": "Not A Name", "resource_type_name": "Shape", "resource_type_version": "v1", "spec": map[string]any{"size": "big"},
	}).expect(t, http.StatusBadRequest).Body)
	if len(e.Errors) == 0 {
		t.Fatalf("400 without field errors: %+v", e)
	}

	// SSE frames: every change of the namespace, then a bookmark.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.server.URL+"/api/v1/events?since=0&namespace="+ns.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := env.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var name string
	events := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && name == client.EventBookmark:
			strictDecode[client.WatchBookmark](t, "bookmark", []byte(strings.TrimPrefix(line, "data: ")))
			if events < 3 {
				t.Fatalf("bookmark after %d events, want at least 3", events)
			}
			return
		case strings.HasPrefix(line, "data: ") && name == client.EventError:
			strictDecode[client.WatchError](t, "error frame", []byte(strings.TrimPrefix(line, "data: ")))
			t.Fatalf("the watch ended: %s", line)
		case strings.HasPrefix(line, "data: "):
			ev := strictDecode[client.WatchEvent](t, "event "+name, []byte(strings.TrimPrefix(line, "data: ")))
			if ev.EventType != name || ev.ResourceData == nil {
				t.Fatalf("event %s: %+v", name, ev)
			}
			events++
		}
	}
	t.Fatalf("the stream ended without a bookmark: %v", sc.Err())
}
