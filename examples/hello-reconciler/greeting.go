package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/no8s/no8s/libs/client"
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
    "style": {"type": "string", "enum": ["plain", "shout"], "default": "plain"},
    "reply": {"type": "boolean", "default": false}
  }
}`

// Spec is a Greeting's spec.
type Spec struct {
	Name  string `json:"name"`
	Style string `json:"style"`
	// Reply asks for a reply: a child Greeting (ReplyName) that greets
	// this one back.
	Reply bool `json:"reply,omitempty"`
}

// ConditionGreeted is the condition the reconciler reports.
const ConditionGreeted = "Greeted"

// New returns the reconciler: a step that computes the greeting and
// publishes it as the output "message", and one that writes the reply
// asked for.
func New() *sdk.Engine[Spec] {
	return sdk.New[Spec]("hello", greet{}, reply{}).WithConditions(ConditionGreeted).
		// It owns its replies: when one changes or goes, the Greeting
		// that wrote it is reconciled (and writes it again).
		Owns(Type)
}

// ReplyName is the name of the reply to the Greeting called name.
func ReplyName(name string) string { return name + "-reply" }

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

// reply writes the child resource when the spec asks for a reply: a
// Greeting called ReplyName that greets this one back. It goes through the
// request's API client, the control plane's REST API as this reconciler,
// so that admission applies as to any client's write; its owner reference
// makes the child go when this Greeting goes. Server-side apply makes the
// write idempotent: every attempt may repeat it.
type reply struct{}

func (reply) Name() string { return "reply" }

func (reply) Do(ctx context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
	if !req.Spec.Reply {
		return sdk.Result{}, nil
	}
	api := req.API()
	if api == nil {
		return sdk.Result{}, sdk.Terminalf("no API client to write the reply with")
	}
	spec, err := json.Marshal(Spec{Name: req.Resource.Name, Style: req.Spec.Style})
	if err != nil {
		return sdk.Result{}, sdk.Terminal(err)
	}
	owners := []client.OwnerReference{{UID: req.Resource.UID, ResourceTypeName: Type.Name, ResourceTypeVersion: Type.Version,
		Name: req.Resource.Name, Controller: true, BlockOwnerDeletion: true}}
	child, _, err := api.Apply(ctx, client.ApplyRequest{Namespace: req.Namespace(), Name: ReplyName(req.Resource.Name),
		ResourceTypeName: Type.Name, ResourceTypeVersion: Type.Version, Spec: spec, OwnerReferences: &owners})
	if err != nil {
		return sdk.Result{}, fmt.Errorf("write the reply: %w", err)
	}
	req.SetOutput("reply", child.Name)
	return sdk.Result{}, nil
}
