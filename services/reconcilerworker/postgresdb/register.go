package postgresdb

import (
	"context"
	"net/http"

	"github.com/no8s/no8s/services/reconcilerworker/typereg"
)

// RegisterType creates the PostgresDatabase/v1 resource type through the
// public API at apiURL when it does not exist yet (typereg.Register):
// types are registered as a client registers them, never through the
// store's worker door.
func RegisterType(ctx context.Context, apiURL string, hc *http.Client) error {
	return typereg.Register(ctx, apiURL, hc, typereg.Definition{Type: Type, Description: Description, Schema: Schema})
}
