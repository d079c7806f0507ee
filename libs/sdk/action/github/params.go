package github

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Params is what the plugin applies: the resource's workflow and inputs.
// RunAction marshals whatever a reconciler gives it into JSON; this is the
// shape the plugin reads (the github-workflow reconciler's spec has it).
type Params struct {
	// Repository is owner/name.
	Repository string `json:"repository"`
	// Workflow is the workflow's file name (deploy.yml) or numeric id.
	Workflow string `json:"workflow"`
	// Ref is the branch or tag the workflow runs on.
	Ref string `json:"ref"`
	// Inputs are the workflow's inputs, flattened by Flatten.
	Inputs json.RawMessage `json:"inputs,omitempty"`
	// DestroyWorkflow runs on deletion (file name or id); none when empty.
	DestroyWorkflow string `json:"destroyWorkflow,omitempty"`
}

var (
	repoPartRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
	workflowRE = regexp.MustCompile(`^([A-Za-z0-9_.-]{1,255}\.ya?ml|[0-9]{1,19})$`)
)

// ParamError is a parameter the plugin cannot use: its field and why.
type ParamError struct {
	Field   string
	Message string
}

func (e *ParamError) Error() string { return e.Field + ": " + e.Message }

// DecodeParams reads and checks Params.
func DecodeParams(raw json.RawMessage) (Params, error) {
	var p Params
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, &ParamError{Field: "params", Message: err.Error()}
	}
	return p, p.Validate()
}

// Validate checks the repository, workflows and ref.
func (p Params) Validate() error {
	owner, name, ok := strings.Cut(p.Repository, "/")
	if !ok || !repoPartRE.MatchString(owner) || !repoPartRE.MatchString(name) {
		return &ParamError{Field: "repository", Message: fmt.Sprintf("%q is not owner/name", p.Repository)}
	}
	if !workflowRE.MatchString(p.Workflow) {
		return &ParamError{Field: "workflow", Message: fmt.Sprintf("%q is not a workflow file name (deploy.yml) or id", p.Workflow)}
	}
	if p.DestroyWorkflow != "" && !workflowRE.MatchString(p.DestroyWorkflow) {
		return &ParamError{Field: "destroyWorkflow", Message: fmt.Sprintf("%q is not a workflow file name (destroy.yml) or id", p.DestroyWorkflow)}
	}
	if p.Ref == "" || strings.ContainsAny(p.Ref, " \t\n\r~^:?*[\\") || len(p.Ref) > 255 {
		return &ParamError{Field: "ref", Message: fmt.Sprintf("%q is not a branch or tag name", p.Ref)}
	}
	return nil
}

// repo splits Repository.
func (p Params) repo() (owner, name string) {
	owner, name, _ = strings.Cut(p.Repository, "/")
	return owner, name
}

// workflowID returns a numeric workflow's id, 0 for a file name.
func workflowID(w string) int64 {
	id, err := strconv.ParseInt(w, 10, 64)
	if err != nil {
		return 0
	}
	return id
}
