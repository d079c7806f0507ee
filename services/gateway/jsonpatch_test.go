package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/no8s/no8s/libs/client"
)

// TestJSONPatch: PATCH with application/json-patch+json applies an RFC 6902
// patch to {spec, labels, annotations, owner_references}, all or nothing,
// through libs/client against the gateway: a failed test is a 409 and a
// path outside those members a 400 naming the operation; neither writes.
func TestJSONPatch(t *testing.T) {
	createType(t, "Patched", "v1", `{"type":"object","properties":{"size":{"type":"integer"},"tier":{"type":"string"}}}`)
	r := createResource(t, map[string]any{"name": "jp", "resource_type_name": "Patched", "resource_type_version": "v1",
		"spec": map[string]any{"size": 1}, "labels": map[string]string{"legacy": "yes"}})
	api, err := client.New(env.server.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

	got, err := api.JSONPatchResource(ctx, r.ID, []client.JSONPatchOperation{
		{Op: "test", Path: "/spec/size", Value: raw(1)},
		{Op: "replace", Path: "/spec/size", Value: raw(3)},
		{Op: "add", Path: "/spec/tier", Value: raw("gold")},
		{Op: "remove", Path: "/labels/legacy"},
		{Op: "add", Path: "/annotations/owner", Value: raw("platform")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	_ = json.Unmarshal(got.Spec, &spec)
	if spec["size"] != float64(3) || spec["tier"] != "gold" || len(got.Labels) != 0 || got.Annotations["owner"] != "platform" || got.Generation != 2 {
		t.Fatalf("after the patch: spec %v labels %v annotations %v generation %d", spec, got.Labels, got.Annotations, got.Generation)
	}

	unchanged(t, func() {
		// A failed test: 409, nothing written.
		_, err := api.JSONPatchResource(ctx, r.ID, []client.JSONPatchOperation{
			{Op: "test", Path: "/spec/size", Value: raw(1)}, {Op: "replace", Path: "/spec/size", Value: raw(9)}})
		if !client.IsConflict(err) {
			t.Errorf("failed test: %v, want 409", err)
		}
		// Outside the patchable members: 400 naming the operation.
		_, err = api.JSONPatchResource(ctx, r.ID, []client.JSONPatchOperation{
			{Op: "replace", Path: "/spec/size", Value: raw(4)}, {Op: "replace", Path: "/status", Value: raw("ready")}})
		if e := client.AsError(err); e == nil || e.Status != 400 || len(e.Errors) != 1 || e.Errors[0].Path != "/1/path" {
			t.Errorf("path outside: %v", err)
		}
		// A move from outside, a value the schema refuses, a label value that is not a string.
		for _, ops := range [][]client.JSONPatchOperation{
			{{Op: "move", From: "/uid", Path: "/spec/x"}},
			{{Op: "replace", Path: "/spec/size", Value: raw("big")}},
			{{Op: "add", Path: "/labels/x", Value: raw(7)}},
			{{Op: "remove", Path: "/spec/missing"}},
		} {
			if _, err := api.JSONPatchResource(ctx, r.ID, ops); client.AsError(err) == nil || client.AsError(err).Status != 400 {
				t.Errorf("%+v: %v, want 400", ops, err)
			}
		}
		// Not an array, an unknown op, not JSON.
		path := fmt.Sprintf("/api/v1/resources/%d", r.ID)
		for _, body := range []string{`{"op":"add"}`, `[{"op":"frobnicate","path":"/spec/size"}]`, `[{`} {
			do(t, http.MethodPatch, path, body, "Content-Type", "application/json-patch+json").expectError(t, http.StatusBadRequest, "")
		}
	})
}
