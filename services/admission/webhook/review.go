package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Limits on what a webhook may answer.
const (
	// MaxResponseBytes bounds a webhook's response body.
	MaxResponseBytes = 1 << 20
	// MaxPatchOperations bounds the operations of one response.
	MaxPatchOperations = 10000
	// MaxMessageBytes bounds the message passed on to the user; longer
	// messages are cut.
	MaxMessageBytes = 4096
)

// Request is the body POSTed to a webhook.
type Request struct {
	// UID identifies one admission: every webhook called for the same
	// request sees the same uid.
	UID string `json:"uid"`
	// Operation is CREATE, UPDATE or DELETE.
	Operation string `json:"operation"`
	// DryRun says that nothing will be stored: a webhook with side effects
	// must not perform them.
	DryRun bool `json:"dry_run"`
	// Resource is the resource document as GET /api/v1/resources/{id}
	// returns it: the proposed state on CREATE and UPDATE (after the schema's
	// defaults and the previous mutating webhooks' patches), the current
	// state on DELETE.
	Resource json.RawMessage `json:"resource"`
	// OldResource is the current state on UPDATE, null otherwise.
	OldResource json.RawMessage `json:"old_resource"`
	// User is who asks for the write, as the gateway authenticated them
	// (a user, an API token's owner, or a service identity's system user
	// such as system:no8s:garbage-collector); absent when no one is named
	// (authentication off and no credential presented).
	User *User `json:"user,omitempty"`
}

// User is who asks for a write, as a webhook is told.
type User struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups"`
}

// Response is a webhook's answer, checked.
type Response struct {
	Allowed bool
	Message string
	// Patch is the JSON Patch of a mutating webhook, every write within
	// /spec, /labels and /annotations; nil when there is none.
	Patch jsonpatch.Patch
}

// wireResponse is the JSON a webhook answers with.
type wireResponse struct {
	Allowed *bool             `json:"allowed"`
	Message *string           `json:"message"`
	Patches []json.RawMessage `json:"patches"`
}

// ParseResponse checks a webhook's response body. Anything but a JSON
// object with a boolean "allowed", an optional string "message" and, from a
// mutating webhook, an optional array of well-formed patch operations that
// write only within /spec, /labels and /annotations is an error: the
// webhook failed. A denial's patches are ignored.
func ParseResponse(body []byte, mutating bool) (*Response, error) {
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("the response is not a JSON object with allowed, message and patches: %v", err)
	}
	if w.Allowed == nil {
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '{' {
			return nil, errors.New(`the response has no boolean "allowed"`)
		}
		return nil, errors.New("the response is not a JSON object")
	}
	r := &Response{Allowed: *w.Allowed}
	if w.Message != nil {
		r.Message = cutMessage(*w.Message)
	}
	if !r.Allowed || len(w.Patches) == 0 {
		return r, nil
	}
	if !mutating {
		return nil, errors.New("a validating webhook answered with patches: only mutating webhooks may patch")
	}
	if len(w.Patches) > MaxPatchOperations {
		return nil, fmt.Errorf("%d patch operations, more than the %d allowed", len(w.Patches), MaxPatchOperations)
	}
	for i, raw := range w.Patches {
		if err := checkOperation(raw); err != nil {
			return nil, fmt.Errorf("patches/%d: %w", i, err)
		}
	}
	ops, err := json.Marshal(w.Patches)
	if err != nil {
		return nil, fmt.Errorf("re-encode patches: %v", err)
	}
	if r.Patch, err = jsonpatch.DecodePatch(ops); err != nil {
		return nil, fmt.Errorf("patches are not a JSON Patch: %v", err)
	}
	return r, nil
}

// cutMessage bounds a message and makes it valid UTF-8.
func cutMessage(m string) string {
	m = strings.ToValidUTF8(m, "\uFFFD")
	if len(m) <= MaxMessageBytes {
		return m
	}
	m = m[:MaxMessageBytes]
	for !utf8.ValidString(m) {
		m = m[:len(m)-1]
	}
	return m + "..."
}
