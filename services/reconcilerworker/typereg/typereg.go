// Package typereg registers a built-in reconciler's resource type through
// the public API, as a client does (a worker's store address does not take
// types): `no8s-reconciler <name> --register-type`.
package typereg

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/no8s/no8s/libs/sdk"
)

// Definition is a resource type to register.
type Definition struct {
	Type        sdk.TypeRef
	Description string
	// Schema is the OpenAPI v3 schema (JSON).
	Schema string
}

// Register creates the type through the public API at apiURL (the
// api-gateway, http://127.0.0.1:8000 by default) when it does not exist
// yet; an existing one is left as it is. It is the same as
//
//	curl -X POST http://localhost:8000/api/v1/resource-types -H 'Content-Type: application/json' \
//	  -d '{"name": ..., "version": ..., "description": ..., "schema": ...}'
func Register(ctx context.Context, apiURL string, hc *http.Client, def Definition) error {
	base := strings.TrimSuffix(apiURL, "/") + "/api/v1/resource-types"
	code, body, err := call(ctx, hc, http.MethodGet, base+"/"+def.Type.Name+"/"+def.Type.Version, nil)
	if err != nil {
		return fmt.Errorf("look up resource type %s at %s: %w", def.Type, apiURL, err)
	}
	switch code {
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
	default:
		return fmt.Errorf("look up resource type %s at %s: %d %s", def.Type, apiURL, code, body)
	}
	doc, err := json.Marshal(map[string]any{
		"name": def.Type.Name, "version": def.Type.Version, "description": def.Description, "schema": json.RawMessage(def.Schema),
	})
	if err != nil {
		return fmt.Errorf("resource type %s: %w", def.Type, err)
	}
	code, body, err = call(ctx, hc, http.MethodPost, base, doc)
	if err != nil {
		return fmt.Errorf("register resource type %s at %s: %w", def.Type, apiURL, err)
	}
	// 409: another replica registered it a moment ago.
	if code != http.StatusCreated && code != http.StatusOK && code != http.StatusConflict {
		return fmt.Errorf("register resource type %s at %s: %d %s", def.Type, apiURL, code, body)
	}
	return nil
}

func call(ctx context.Context, hc *http.Client, method, url string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}
