package client

import (
	"encoding/json"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
)

// Lifecycle statuses of a resource (Resource.Status).
const (
	StatusPending     = "pending"
	StatusReconciling = "reconciling"
	StatusReady       = "ready"
	StatusFailed      = "failed"
	StatusDeleting    = "deleting"
)

// Namespace statuses: active, then terminating from the moment its deletion
// is requested until its last resource is gone.
const (
	NamespaceActive      = "active"
	NamespaceTerminating = "terminating"
)

// Reconcile policy defaults: a zero field of a ReconcilePolicy written by a
// user means these; documents the server answers carry every field.
const (
	DefaultResyncSeconds      = 300
	DefaultBackoffBaseSeconds = 60
	DefaultBackoffMaxSeconds  = 61440
	DefaultTimeoutSeconds     = 300
	// MaxTimeoutSeconds bounds a reconcile's timeout.
	MaxTimeoutSeconds = 3600
)

// ReconcilePolicy tunes scheduling for the resources of a type.
type ReconcilePolicy struct {
	// ResyncSeconds is how often a ready resource is reconciled again (drift
	// detection).
	ResyncSeconds int32 `json:"resync_seconds"`
	// BackoffBaseSeconds is the delay after the first failure; it doubles with
	// each further failure up to BackoffMaxSeconds.
	BackoffBaseSeconds int32 `json:"backoff_base_seconds"`
	BackoffMaxSeconds  int32 `json:"backoff_max_seconds"`
	// TimeoutSeconds bounds one attempt.
	TimeoutSeconds int32 `json:"timeout_seconds"`
}

// WithDefaults returns p with every zero field set to its default.
func (p ReconcilePolicy) WithDefaults() ReconcilePolicy {
	if p.ResyncSeconds == 0 {
		p.ResyncSeconds = DefaultResyncSeconds
	}
	if p.BackoffBaseSeconds == 0 {
		p.BackoffBaseSeconds = DefaultBackoffBaseSeconds
	}
	if p.BackoffMaxSeconds == 0 {
		p.BackoffMaxSeconds = max(DefaultBackoffMaxSeconds, p.BackoffBaseSeconds)
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = DefaultTimeoutSeconds
	}
	return p
}

// ReconcilePolicyWrite is a reconcile policy as written: each field
// optional (zero: absent, the default) and, when given, positive.
type ReconcilePolicyWrite struct {
	ResyncSeconds      int32 `json:"resync_seconds,omitempty"`
	BackoffBaseSeconds int32 `json:"backoff_base_seconds,omitempty"`
	BackoffMaxSeconds  int32 `json:"backoff_max_seconds,omitempty"`
	TimeoutSeconds     int32 `json:"timeout_seconds,omitempty"`
}

// ResourceType is a registered resource type: a name, a version and the
// OpenAPI v3 schema its resources' specs must match.
type ResourceType struct {
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

// ResourceTypeWrite is the body that registers a type (every field but
// reconcile_policy required) or replaces one's description, schema and
// policy (name and version, when sent, must be the stored ones).
type ResourceTypeWrite struct {
	Name            string                `json:"name,omitempty"`
	Version         string                `json:"version,omitempty"`
	Description     string                `json:"description,omitempty"`
	Schema          json.RawMessage       `json:"schema,omitempty"`
	ReconcilePolicy *ReconcilePolicyWrite `json:"reconcile_policy,omitempty"`
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

// Condition is one observed aspect of a resource, with its status as a
// string ("True", "False" or "Unknown").
type Condition = lifecycle.Condition[string]

// FieldError is one offending field of a refused request: a JSON pointer
// into the request body and a message.
type FieldError = names.FieldError

// Resource is the document of a resource.
type Resource struct {
	ID  int64  `json:"id"`
	UID string `json:"uid"`
	// Namespace is the namespace the resource lives in ("default" unless
	// given).
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

// Normalize replaces nil collections with empty ones so documents always
// carry {} and [] rather than null.
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

// Condition returns the condition of type t, or nil.
func (r *Resource) Condition(t string) *Condition {
	for i := range r.Conditions {
		if r.Conditions[i].Type == t {
			return &r.Conditions[i]
		}
	}
	return nil
}

// CreateRequest is the body of a create (POST /api/v1/resources).
type CreateRequest struct {
	Namespace           string            `json:"namespace,omitempty"`
	Name                string            `json:"name"`
	ResourceTypeName    string            `json:"resource_type_name"`
	ResourceTypeVersion string            `json:"resource_type_version"`
	Spec                json.RawMessage   `json:"spec"`
	Labels              map[string]string `json:"labels,omitempty"`
	Annotations         map[string]string `json:"annotations,omitempty"`
	OwnerReferences     []OwnerReference  `json:"owner_references,omitempty"`
	// Finalizers are extra finalizers set at creation.
	Finalizers []string `json:"finalizers,omitempty"`
}

// ApplyRequest is the body of server-side apply (POST
// /api/v1/resources/apply): the resource is created when missing, else its
// spec replaced, and labels, annotations and owner references replaced when
// not nil.
type ApplyRequest struct {
	Namespace           string             `json:"namespace,omitempty"`
	Name                string             `json:"name"`
	ResourceTypeName    string             `json:"resource_type_name"`
	ResourceTypeVersion string             `json:"resource_type_version"`
	Spec                json.RawMessage    `json:"spec"`
	Labels              *map[string]string `json:"labels,omitempty"`
	Annotations         *map[string]string `json:"annotations,omitempty"`
	OwnerReferences     *[]OwnerReference  `json:"owner_references,omitempty"`
}

// UpdateRequest is the body of PUT /api/v1/resources/{id}: the spec is
// replaced, labels, annotations and owner references when not nil.
type UpdateRequest struct {
	// Namespace, when set, must be the resource's (a resource never moves).
	Namespace       string             `json:"namespace,omitempty"`
	Spec            json.RawMessage    `json:"spec"`
	Labels          *map[string]string `json:"labels,omitempty"`
	Annotations     *map[string]string `json:"annotations,omitempty"`
	OwnerReferences *[]OwnerReference  `json:"owner_references,omitempty"`
	// ResourceVersion, when not zero, must be the stored one (else 409).
	ResourceVersion int64 `json:"resource_version,omitempty"`
}

// ResourcePatch is a JSON merge patch (RFC 7386) over a resource's spec,
// labels, annotations and owner references, as PatchResource sends it
// (encoded): objects merge recursively, a nil label or annotation value
// removes the key. ResourceVersion is a precondition, not patched.
type ResourcePatch struct {
	Spec            json.RawMessage    `json:"spec,omitempty"`
	Labels          map[string]*string `json:"labels,omitempty"`
	Annotations     map[string]*string `json:"annotations,omitempty"`
	OwnerReferences *[]OwnerReference  `json:"owner_references,omitempty"`
	ResourceVersion *int64             `json:"resource_version,omitempty"`
	// Namespace, when set, must be the resource's.
	Namespace string `json:"namespace,omitempty"`
}

// JSONPatchOperation is one operation of a JSON patch (RFC 6902) over a
// resource's {spec, labels, annotations, owner_references}: Op is add,
// remove, replace, move, copy or test; Path (and From) point inside those
// members.
type JSONPatchOperation struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// FinalizersUpdate is the body of PUT /api/v1/resources/{id}/finalizers.
type FinalizersUpdate struct {
	Add    []string `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
	// ResourceVersion, when not zero, must be the stored one (else 409).
	ResourceVersion int64 `json:"resource_version,omitempty"`
}

// Namespace is the document of a namespace: the unit of isolation every
// resource belongs to.
type Namespace struct {
	Name            string     `json:"name"`
	UID             string     `json:"uid"`
	Status          string     `json:"status"`
	ResourceVersion int64      `json:"resource_version"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	DeletedAt       *time.Time `json:"deleted_at"`
}

// NamespaceCreate is the body that creates a namespace.
type NamespaceCreate struct {
	Name string `json:"name"`
}

// Webhook is an admission webhook registration. A nil ResourceTypeName or
// ResourceTypeVersion matches every type or version, empty Namespaces every
// namespace, a nil CABundle the system's roots.
type Webhook struct {
	ID                  int64     `json:"id"`
	Name                string    `json:"name"`
	ResourceTypeName    *string   `json:"resource_type_name"`
	ResourceTypeVersion *string   `json:"resource_type_version"`
	Namespaces          []string  `json:"namespaces"`
	WebhookURL          string    `json:"webhook_url"`
	WebhookType         string    `json:"webhook_type"`
	Operations          []string  `json:"operations"`
	TimeoutSeconds      int       `json:"timeout_seconds"`
	FailurePolicy       string    `json:"failure_policy"`
	Ordering            int       `json:"ordering"`
	CABundle            *string   `json:"ca_bundle"`
	ResourceVersion     int64     `json:"resource_version"`
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
}

// WebhookWrite is the body that registers a webhook (name, webhook_url,
// webhook_type and operations required) or changes the fields it carries.
type WebhookWrite struct {
	Name                string   `json:"name,omitempty"`
	ResourceTypeName    *string  `json:"resource_type_name,omitempty"`
	ResourceTypeVersion *string  `json:"resource_type_version,omitempty"`
	Namespaces          []string `json:"namespaces,omitempty"`
	WebhookURL          string   `json:"webhook_url,omitempty"`
	WebhookType         string   `json:"webhook_type,omitempty"`
	Operations          []string `json:"operations,omitempty"`
	TimeoutSeconds      int      `json:"timeout_seconds,omitempty"`
	FailurePolicy       string   `json:"failure_policy,omitempty"`
	Ordering            int      `json:"ordering,omitempty"`
	CABundle            *string  `json:"ca_bundle,omitempty"`
}

// WebhookUpdate is the body that changes a registration: the fields of
// WebhookWrite it carries, with an optional id (the path's) and
// resource_version precondition. The body of a GET may be sent back as is.
type WebhookUpdate struct {
	WebhookWrite
	ID int64 `json:"id,omitempty"`
	// ResourceVersion, when not zero, must be the stored one (else 409).
	ResourceVersion int64 `json:"resource_version,omitempty"`
}

// HistoryEntry is one reconcile attempt of a resource.
type HistoryEntry struct {
	ID               int64      `json:"id"`
	ResourceID       int64      `json:"resource_id"`
	Generation       int64      `json:"generation"`
	Success          bool       `json:"success"`
	Phase            string     `json:"phase"`
	ErrorMessage     *string    `json:"error_message"`
	ResourcesCreated int32      `json:"resources_created"`
	ResourcesUpdated int32      `json:"resources_updated"`
	ResourcesDeleted int32      `json:"resources_deleted"`
	ReconcileTime    time.Time  `json:"reconcile_time"`
	StartedAt        *time.Time `json:"started_at"`
	DurationMS       int64      `json:"duration_ms"`
	LeaseEpoch       int64      `json:"lease_epoch"`
	Holder           string     `json:"holder"`
	Reason           string     `json:"reason"`
}

// EventRecord is an Event in the Kubernetes sense: a record attached to a
// resource saying what happened to it (not a change of the event stream).
type EventRecord struct {
	ID                  int64  `json:"id"`
	ResourceID          int64  `json:"resource_id"`
	ResourceUID         string `json:"resource_uid"`
	ResourceName        string `json:"resource_name"`
	ResourceTypeName    string `json:"resource_type_name"`
	ResourceTypeVersion string `json:"resource_type_version"`
	// Type is Normal or Warning.
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Source  string `json:"source"`
	// Count is how many times it happened within the dedup window, from
	// FirstTime to LastTime.
	Count     int32     `json:"count"`
	FirstTime time.Time `json:"first_time"`
	LastTime  time.Time `json:"last_time"`
}

// EventRecordCreate is the body that records an Event on a resource.
type EventRecordCreate struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Source  string `json:"source,omitempty"`
}

// Outputs is the answer of GET /api/v1/resources/{id}/outputs.
type Outputs struct {
	Outputs json.RawMessage `json:"outputs"`
}

// TypeRef names a resource type and version.
type TypeRef struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// String is "Name/Version".
func (t TypeRef) String() string { return t.Name + "/" + t.Version }

// Reconciler is a registered reconciler as GET /api/v1/reconcilers lists
// it.
type Reconciler struct {
	Name string `json:"name"`
	// Types are the types it serves.
	Types []TypeRef `json:"types"`
	// Replicas counts its live replicas.
	Replicas int `json:"replicas"`
	// Live is true while a replica heartbeats or it holds a type.
	Live bool `json:"live"`
}

// Health is the answer of the health endpoints.
type Health struct {
	Status string `json:"status"`
	// Failed names the failing checks (readiness only).
	Failed []string `json:"failed,omitempty"`
	// Errors maps a failing check to its error.
	Errors map[string]string `json:"errors,omitempty"`
	Detail string            `json:"detail,omitempty"`
}

// Watch event types: what happened to a resource (WatchEvent.EventType and
// the SSE event name), plus the stream's own BOOKMARK and ERROR.
const (
	EventCreated    = "CREATED"
	EventModified   = "MODIFIED"
	EventDeleted    = "DELETED"
	EventReconciled = "RECONCILED"
	EventPurged     = "PURGED"
	EventBookmark   = "BOOKMARK"
	EventError      = "ERROR"
)

// WatchEvent is the data of one change in a watch stream; the SSE id is
// its revision.
type WatchEvent struct {
	EventType           string    `json:"event_type"`
	ResourceID          int64     `json:"resource_id"`
	Namespace           string    `json:"namespace"`
	ResourceName        string    `json:"resource_name"`
	ResourceTypeName    string    `json:"resource_type_name"`
	ResourceTypeVersion string    `json:"resource_type_version"`
	ResourceData        *Resource `json:"resource_data"`
	Timestamp           time.Time `json:"timestamp"`
}

// WatchBookmark is the data of a BOOKMARK frame: every change up to
// Revision has been sent.
type WatchBookmark struct {
	EventType string    `json:"event_type"`
	Revision  int64     `json:"revision"`
	Timestamp time.Time `json:"timestamp"`
}

// WatchError is the data of an ERROR frame, after which the server ends
// the stream; code gone means the resume point is older than the retained
// history.
type WatchError struct {
	EventType string `json:"event_type"`
	Code      string `json:"code"`
	Detail    string `json:"detail"`
}
