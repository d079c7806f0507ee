package postgresdb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// RegisterType creates the PostgresDatabase/v1 resource type through the
// public API at apiURL (the api-gateway, http://127.0.0.1:8000 by default)
// when it does not exist yet; an existing one is left as it is. Types are
// registered as a client registers them, never through the store's worker
// door. It is the same as
//
//	curl -X POST http://localhost:8000/api/v1/resource-types -H 'Content-Type: application/json' \
//	  -d '{"name": "PostgresDatabase", "version": "v1", "schema": <Schema>}'
func RegisterType(ctx context.Context, apiURL string, hc *http.Client) error {
	base := strings.TrimSuffix(apiURL, "/") + "/api/v1/resource-types"
	code, body, err := call(ctx, hc, http.MethodGet, base+"/"+Type.Name+"/"+Type.Version, nil)
	if err != nil {
		return fmt.Errorf("look up resource type %s at %s: %w", Type, apiURL, err)
	}
	switch code {
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
	default:
		return fmt.Errorf("look up resource type %s at %s: %d %s", Type, apiURL, code, body)
	}
	doc, err := json.Marshal(map[string]any{
		"name": Type.Name, "version": Type.Version, "description": Description, "schema": json.RawMessage(Schema),
	})
	if err != nil {
		return err
	}
	code, body, err = call(ctx, hc, http.MethodPost, base, doc)
	if err != nil {
		return fmt.Errorf("register resource type %s at %s: %w", Type, apiURL, err)
	}
	// 409: another replica registered it a moment ago.
	if code != http.StatusCreated && code != http.StatusOK && code != http.StatusConflict {
		return fmt.Errorf("register resource type %s at %s: %d %s", Type, apiURL, code, body)
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
