// Package resource defines the canonical document of a no8s resource and
// resource type: the snake_case JSON shape that the REST API returns and that
// every event carries as resource_data, plus the naming rules and size limits
// that every writer enforces.
package resource

import (
	"encoding/json"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
)

// Lifecycle statuses of a resource.
const (
	StatusPending     = "pending"
	StatusReconciling = "reconciling"
	StatusReady       = "ready"
	StatusFailed      = "failed"
	StatusDeleting    = "deleting"
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

// Type is a registered resource type.
type Type struct {
	ID              int64           `json:"id"`
	Name            string          `json:"name"`
	Version         string          `json:"version"`
	Description     string          `json:"description"`
	Schema          json.RawMessage `json:"schema"`
	ResourceVersion int64           `json:"resource_version"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	// ReconcilePolicy tunes scheduling; read with every default filled in.
	ReconcilePolicy ReconcilePolicy `json:"reconcile_policy"`
}

// OwnerReference points at an owning resource.
type OwnerReference struct {
	UID                 string `json:"uid"`
	ResourceTypeName    string `json:"resource_type_name"`
	ResourceTypeVersion string `json:"resource_type_version"`
	Name                string `json:"name"`
	Controller          bool   `json:"controller,omitempty"`
	BlockOwnerDeletion  bool   `json:"block_owner_deletion,omitempty"`
}

// Condition is one observed aspect of a resource: libs/api's record, with
// the status as a string. lifecycle.Merge stores conditions.
type Condition = lifecycle.Condition[string]

// Resource is the canonical document of a resource.
type Resource struct {
	ID  int64  `json:"id"`
	UID string `json:"uid"`
	// Namespace is the resource's namespace (names.DefaultNamespace when a
	// create names none); immutable.
	Namespace           string            `json:"namespace"`
	Name                string            `json:"name"`
	ResourceTypeName    string            `json:"resource_type_name"`
	ResourceTypeVersion string            `json:"resource_type_version"`
	Labels              map[string]string `json:"labels"`
	Annotations         map[string]string `json:"annotations"`
	OwnerReferences     []OwnerReference  `json:"owner_references"`
	Spec                json.RawMessage   `json:"spec"`
	Status              string            `json:"status"`
	StatusMessage       string            `json:"status_message"`
	Generation          int64             `json:"generation"`
	ObservedGeneration  int64             `json:"observed_generation"`
	ResourceVersion     int64             `json:"resource_version"`
	Conditions          []Condition       `json:"conditions"`
	Phase               string            `json:"phase"`
	Outputs             json.RawMessage   `json:"outputs"`
	Finalizers          []string          `json:"finalizers"`
	CreatedAt           time.Time         `json:"created_at"`
	UpdatedAt           time.Time         `json:"updated_at"`
	DeletedAt           *time.Time        `json:"deleted_at"`
	LastReconcileTime   *time.Time        `json:"last_reconcile_time"`
}

// Namespace statuses: active, then terminating from the moment its deletion
// is requested until its last resource is gone.
const (
	NamespaceActive      = "active"
	NamespaceTerminating = "terminating"
)

// Namespace is the canonical document of a namespace: the unit of isolation
// every resource belongs to.
type Namespace struct {
	Name            string     `json:"name"`
	UID             string     `json:"uid"`
	Status          string     `json:"status"`
	ResourceVersion int64      `json:"resource_version"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	DeletedAt       *time.Time `json:"deleted_at"`
}

// Normalize replaces nil collections with empty ones so documents always carry
// {} and [] rather than null.
func (r *Resource) Normalize() {
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	if r.Annotations == nil {
		r.Annotations = map[string]string{}
	}
	if r.OwnerReferences == nil {
		r.OwnerReferences = []OwnerReference{}
	}
	if r.Conditions == nil {
		r.Conditions = []Condition{}
	}
	if r.Finalizers == nil {
		r.Finalizers = []string{}
	}
	if len(r.Spec) == 0 {
		r.Spec = json.RawMessage("{}")
	}
	if len(r.Outputs) == 0 {
		r.Outputs = json.RawMessage("{}")
	}
}

// PhaseFor maps the lifecycle status, whether the last attempt reported a
// partial failure while still serving, and the conditions onto the phase
// rule's facts and applies it (lifecycle.PhaseOf).
func PhaseFor(status string, degraded bool, conds []Condition) string {
	return lifecycle.PhaseOf(lifecycle.PhaseFacts{
		Deleting: status == StatusDeleting, Degraded: degraded, Succeeded: status == StatusReady, Statuses: lifecycle.Statuses(conds),
	})
}
