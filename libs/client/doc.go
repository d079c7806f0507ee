// Package client is the Go client of the no8s REST API (docs/api.md) and
// the one home of its document types: Resource, ResourceType, Namespace,
// Webhook, EventRecord, HistoryEntry, the problem body (Error, FieldError),
// list pages and watch frames. The server renders these types; the CLI,
// registry-sync, the tenant reconciler, the SDK's test kit and the bench
// all call the API through this client.
//
// One Client serves many goroutines:
//
//	c, err := client.New("http://127.0.0.1:8000", client.WithToken(token))
//	r, err := c.CreateResource(ctx, client.CreateRequest{Name: "web", ResourceTypeName: "App", ResourceTypeVersion: "v1", Spec: spec})
//	r, err = c.Wait(ctx, r.ID, func(r *client.Resource) bool {
//		return client.ConditionMet(r, "Ready", "True")
//	}, client.WaitOptions{})
//
// Errors from the server come back as *Error (AsError, IsNotFound,
// IsConflict, HasCode), with the server's code, message, field paths and
// request id. Idempotent calls are retried with backoff, honouring
// Retry-After (WithRetries), and so is any call refused by one of the
// caller's limits (429 rate_limited: nothing was done). ListAndWatch lists, then follows the watch
// stream from the list's revision, resuming after dropped connections and
// listing again when the history to resume from is gone.
//
// The module is its own (github.com/no8s/no8s/libs/client), depends only
// on the standard library and libs/api, and is versioned by tags of the
// form libs/client/vX.Y.Z, so that a reconciler outside this repository
// can require it.
package client
