package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/no8s/no8s/libs/sdk"
)

// Type is the resource type this reconciler serves.
var Type = sdk.Type("Greeting", "v1")

// Schema is Greeting/v1's OpenAPI v3 schema, registered with the control
// plane (see README.md).
const Schema = `{
  "type": "object",
  "required": ["name"],
  "properties": {
    "name":  {"type": "string", "minLength": 1, "maxLength": 100},
    "style": {"type": "string", "enum": ["plain", "shout"], "default": "plain"}
  }
}`

// Spec is a Greeting's spec.
type Spec struct {
	Name  string `json:"name"`
	Style string `json:"style"`
}

// ConditionGreeted is the condition the reconciler reports.
const ConditionGreeted = "Greeted"

// New returns the reconciler: one step that computes the greeting and
// publishes it as the output "message".
func New() *sdk.Engine[Spec] {
	return sdk.New[Spec]("hello", greet{}).WithConditions(ConditionGreeted)
}

// greet is the one step. A real reconciler's step would call an API here;
// it must be idempotent and look at the world as it is now.
type greet struct{}

func (greet) Name() string { return "greet" }

func (greet) Do(ctx context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
	if strings.TrimSpace(req.Spec.Name) == "" {
		// Retrying cannot fix a spec: terminal, until the spec changes.
		req.MarkFalse(ConditionGreeted, "NoName", "spec.name is empty")
		return sdk.Result{}, sdk.Terminalf("spec.name is empty")
	}
	msg := fmt.Sprintf("Hello, %s!", req.Spec.Name)
	if req.Spec.Style == "shout" {
		msg = strings.ToUpper(msg)
	}
	req.SetOutput("message", msg)
	req.MarkTrue(ConditionGreeted, "Greeted", msg)
	req.Log.Info("greeted", "message", msg)
	return sdk.Result{}, nil
}

// Cleanup runs when the resource is deleted (in reverse step order); the
// engine removes its finalizer once every Cleanup succeeded.
func (greet) Cleanup(ctx context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
	req.Log.Info("goodbye", "name", req.Spec.Name)
	return sdk.Result{}, nil
}
