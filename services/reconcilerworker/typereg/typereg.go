// Package typereg registers a built-in reconciler's resource type through
// the public API, as a client does (a worker's store address does not take
// types): `no8s-reconciler <name> --register-type`.
package typereg

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/no8s/no8s/libs/client"
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
// api-gateway, http://127.0.0.1:8000 by default), sending requests through
// hc, when it does not exist yet; an existing one is left as it is. It is
// the same as
//
//	curl -X POST http://localhost:8000/api/v1/resource-types -H 'Content-Type: application/json' \
//	  -d '{"name": ..., "version": ..., "description": ..., "schema": ...}'
func Register(ctx context.Context, apiURL string, hc *http.Client, def Definition) error {
	api, err := client.New(apiURL, client.WithHTTPClient(hc), client.WithUserAgent("no8s-reconciler"))
	if err != nil {
		return fmt.Errorf("register resource type %s: %w", def.Type, err)
	}
	_, err = api.GetType(ctx, def.Type.Name, def.Type.Version)
	switch {
	case err == nil:
		return nil
	case !client.IsNotFound(err):
		return fmt.Errorf("look up resource type %s at %s: %w", def.Type, apiURL, err)
	}
	_, err = api.CreateType(ctx, client.ResourceTypeWrite{Name: def.Type.Name, Version: def.Type.Version,
		Description: def.Description, Schema: json.RawMessage(def.Schema)})
	// 409: another replica registered it a moment ago.
	if err != nil && !client.IsConflict(err) {
		return fmt.Errorf("register resource type %s at %s: %w", def.Type, apiURL, err)
	}
	return nil
}
