// Package resource defines the canonical document of a no8s resource and
// resource type: the snake_case JSON shape that the REST API returns and that
// every event carries as resource_data, plus the naming rules and size limits
// that every writer enforces.
package resource

import (
	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/client"
)

// Lifecycle statuses of a resource.
const (
	StatusPending     = client.StatusPending
	StatusReconciling = client.StatusReconciling
	StatusReady       = client.StatusReady
	StatusFailed      = client.StatusFailed
	StatusDeleting    = client.StatusDeleting
)

// Phases summarise a resource's state (seeds 003 and 004); the rule is
// lifecycle.PhaseOf in libs/api, shared by the store and the SDK.
const (
	PhaseProgressing = lifecycle.PhaseProgressing
	PhaseReady       = lifecycle.PhaseReady
	PhaseDegraded    = lifecycle.PhaseDegraded
	PhaseTerminating = lifecycle.PhaseTerminating
)

// Statuses lists every lifecycle status, for validating filters.
var Statuses = []string{StatusPending, StatusReconciling, StatusReady, StatusFailed, StatusDeleting}

// The documents are the public API's, defined once in libs/client: the
// gateway renders these very types, and every client decodes them.
type (
	// Type is a registered resource type.
	Type = client.ResourceType
	// OwnerReference points at an owning resource.
	OwnerReference = client.OwnerReference
	// Condition is one observed aspect of a resource: libs/api's record, with
	// the status as a string. lifecycle.Merge stores conditions.
	Condition = client.Condition
	// Resource is the canonical document of a resource.
	Resource = client.Resource
	// Namespace is the canonical document of a namespace.
	Namespace = client.Namespace
)

// ControllerUID is the uid of the controller among refs (the reference
// with controller true; at most one is allowed), empty when there is none.
func ControllerUID(refs []OwnerReference) string {
	for _, o := range refs {
		if o.Controller {
			return o.UID
		}
	}
	return ""
}

// Namespace statuses: active, then terminating from the moment its deletion
// is requested until its last resource is gone.
const (
	NamespaceActive      = client.NamespaceActive
	NamespaceTerminating = client.NamespaceTerminating
)

// PhaseFor maps the lifecycle status, whether the last attempt reported a
// partial failure while still serving, and the conditions onto the phase
// rule's facts and applies it (lifecycle.PhaseOf).
func PhaseFor(status string, degraded bool, conds []Condition) string {
	return lifecycle.PhaseOf(lifecycle.PhaseFacts{
		Deleting: status == StatusDeleting, Degraded: degraded, Succeeded: status == StatusReady, Statuses: lifecycle.Statuses(conds),
	})
}
