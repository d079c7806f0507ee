// Package githubworkflow is the github-workflow reconciler: for each
// GitHubWorkflow/v1 resource it runs a GitHub Actions workflow through the
// github_actions action plugin (libs/sdk/action/github), so that a platform
// team gets seed 000's main use case without writing Go.
//
//	{"repository": "acme/infra", "workflow": "deploy.yml", "ref": "main",
//	 "inputs": {"environment": "prod", "db": {"size": 10}},
//	 "destroyWorkflow": "destroy.yml"}
//
// A new generation dispatches the workflow with the flattened inputs and
// the correlation id; the resource is ready once the run succeeded, its
// outputs show the run, its jobs and its artifacts. A failed run fails the
// resource and is retried with the type's backoff by a new run. Deletion
// runs the destroy workflow (when named) before the github_actions
// finalizer, which every resource carries from creation, goes. The token
// and the API base URL are the worker's configuration
// (no8s-reconciler github-workflow --token-env, --github-api-url); see
// docs/github-actions.md.
package githubworkflow

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/action"
	"github.com/no8s/no8s/libs/sdk/action/github"
	"github.com/no8s/no8s/services/reconcilerworker/typereg"
)

// Name is the reconciler's registered name; its finalizer is
// reconciler.no8s.io/github-workflow, and it owns github_actions too.
const Name = "github-workflow"

// Type is the resource type it serves.
var Type = sdk.Type("GitHubWorkflow", "v1")

// Spec is a GitHubWorkflow's spec: the plugin's Params.
type Spec struct {
	Repository      string          `json:"repository"`
	Workflow        string          `json:"workflow"`
	Ref             string          `json:"ref"`
	Inputs          json.RawMessage `json:"inputs,omitempty"`
	DestroyWorkflow string          `json:"destroyWorkflow,omitempty"`
}

// Schema is the GitHubWorkflow/v1 schema (OpenAPI v3). The patterns are
// the plugin's (github.Params.Validate); the inputs' flattening rule is
// checked when the workflow is dispatched (a terminal error names the
// offending path).
const Schema = `{
  "type": "object",
  "required": ["repository", "workflow", "ref"],
  "additionalProperties": false,
  "properties": {
    "repository": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$", "description": "owner/name of the repository holding the workflows"},
    "workflow": {"type": "string", "pattern": "^([A-Za-z0-9_.-]{1,255}\\.ya?ml|[0-9]{1,19})$", "description": "the workflow run on every new generation: its file name under .github/workflows (deploy.yml) or its id"},
    "ref": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^\\s~^:?*\\[\\\\]+$", "description": "branch or tag the workflows run on"},
    "inputs": {"type": "object", "description": "the workflow's inputs: strings as they are, numbers and booleans as text, objects flattened into <key>_<member>, arrays as JSON text; at most 24 inputs after flattening"},
    "destroyWorkflow": {"type": "string", "pattern": "^([A-Za-z0-9_.-]{1,255}\\.ya?ml|[0-9]{1,19})$", "description": "the workflow run when the resource is deleted (file name or id); none when absent"}
  }
}`

// Description is the type's description.
const Description = "A GitHub Actions workflow run for every generation, and a destroy workflow on deletion (no8s-reconciler github-workflow)"

// New returns the reconciler, running its workflows through the action
// plugins of reg (which must hold github_actions).
func New(reg *action.Registry) *sdk.Engine[Spec] {
	return sdk.New(Name, sdk.Func[Spec](func(ctx context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
		s := req.Spec
		return req.RunAction(ctx, github.Name, github.Params{
			Repository: s.Repository, Workflow: s.Workflow, Ref: s.Ref, Inputs: s.Inputs, DestroyWorkflow: s.DestroyWorkflow,
		})
	})).WithActions(reg).WithConditions(action.ConditionSucceeded)
}

// RegisterType creates the GitHubWorkflow/v1 type through the public API at
// apiURL when it does not exist yet.
func RegisterType(ctx context.Context, apiURL string, hc *http.Client) error {
	return typereg.Register(ctx, apiURL, hc, typereg.Definition{Type: Type, Description: Description, Schema: Schema})
}
