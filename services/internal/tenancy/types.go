package tenancy

import (
	"encoding/json"
	"time"

	"github.com/no8s/no8s/libs/platform/secret"
)

// The built-in types (created by the store's migrations).
const (
	RegistryType = "TenantRegistry"
	TemplateType = "TenantTemplate"
	TenantType   = "Tenant"
	// Version is the version of all three.
	Version = "v1"
)

// SyncLease is registry-sync's leader lease and reconciler name: its
// fenced writes carry it, and only they may create or change Tenants.
const SyncLease = "registry-sync"

// KeyPrefix prefixes every label and annotation of tenancy: only
// registry-sync and the tenant reconciler write them (the gateway's
// reserved keys, docs/security.md).
const KeyPrefix = "tenants.no8s.io/"

// Reconciler is the tenant reconciler's registered name (its identity is
// reconciler/tenant).
const Reconciler = "tenant"

// Labels registry-sync puts on every Tenant: they name its registry and
// template, so the Tenants of one are listed by label selector.
const (
	LabelRegistry = KeyPrefix + "registry"
	LabelTemplate = KeyPrefix + "template"
)

// LabelTenant is the label the tenant reconciler puts on every child: the
// name of its Tenant (the owner reference names it too).
const LabelTenant = KeyPrefix + "tenant"

// AnnotationCreatedOnce marks a child of creationPolicy Once that the
// tenant reconciler created: it is never applied again (seed 002's
// kubernetes-tenants.org/created-once).
const AnnotationCreatedOnce = KeyPrefix + "created-once"

// The policies of a TResource (seed 002). Their enums and defaults are the
// TenantTemplate schema's (migrations/builtin); these names are what the
// reconciler compares with, an empty value meaning the default.
const (
	CreationWhenNeeded = "WhenNeeded"
	CreationOnce       = "Once"
	DeletionDelete     = "Delete"
	DeletionRetain     = "Retain"
	ConflictStuck      = "Stuck"
	ConflictForce      = "Force"
	PatchApply         = "apply"
	PatchMerge         = "merge"
	PatchReplace       = "replace"
	// DefaultTimeoutSeconds is timeoutSeconds when the spec has none.
	DefaultTimeoutSeconds = 300
)

// Datasource types.
const (
	SourceMySQL    = "mysql"
	SourcePostgres = "postgres"
)

// RegistrySpec is a TenantRegistry's spec.
type RegistrySpec struct {
	Source             Source            `json:"source"`
	SyncInterval       string            `json:"syncInterval"`
	ValueMappings      ValueMappings     `json:"valueMappings"`
	ExtraValueMappings map[string]string `json:"extraValueMappings"`
}

// Source is a registry's datasource.
type Source struct {
	Type        string     `json:"type"`
	Host        string     `json:"host"`
	Port        int        `json:"port,omitempty"`
	Database    string     `json:"database"`
	Table       string     `json:"table,omitempty"`
	Query       string     `json:"query,omitempty"`
	Username    string     `json:"username,omitempty"`
	UsernameRef secret.Ref `json:"usernameRef,omitzero"`
	PasswordRef secret.Ref `json:"passwordRef,omitzero"`
	// AllowPrivilegedLogin lets registry-sync read with a login that
	// could write or reach outside the database (a PostgreSQL superuser or
	// member of pg_read_server_files, pg_write_server_files,
	// pg_execute_server_program, pg_signal_backend or pg_write_all_data; a
	// MySQL/MariaDB login with any privilege beyond SELECT, SHOW VIEW and
	// USAGE). Without it such a login is refused (PrivilegedLogin).
	AllowPrivilegedLogin bool `json:"allowPrivilegedLogin,omitempty"`
}

// DefaultPort is the port of a source type when the spec names none.
func (s Source) DefaultPort() int {
	if s.Port != 0 {
		return s.Port
	}
	if s.Type == SourcePostgres {
		return 5432
	}
	return 3306
}

// ValueMappings names the columns of the required values.
type ValueMappings struct {
	UID       string `json:"uid"`
	HostOrURL string `json:"hostOrUrl"`
	Activate  string `json:"activate"`
}

// TemplateSpec is a TenantTemplate's spec.
type TemplateSpec struct {
	RegistryID string      `json:"registryId"`
	Resources  []TResource `json:"resources"`
}

// TResource is one resource of a template (the seed's TResource): a no8s
// resource of any registered type, its name, labels, annotations and spec
// rendered per tenant row.
type TResource struct {
	ID                  string            `json:"id"`
	TypeName            string            `json:"typeName"`
	TypeVersion         string            `json:"typeVersion"`
	NameTemplate        string            `json:"nameTemplate"`
	LabelsTemplate      map[string]string `json:"labelsTemplate,omitempty"`
	AnnotationsTemplate map[string]string `json:"annotationsTemplate,omitempty"`
	Spec                json.RawMessage   `json:"spec"`
	DependIDs           []string          `json:"dependIds,omitempty"`
	CreationPolicy      string            `json:"creationPolicy,omitempty"`
	DeletionPolicy      string            `json:"deletionPolicy,omitempty"`
	ConflictPolicy      string            `json:"conflictPolicy,omitempty"`
	PatchStrategy       string            `json:"patchStrategy,omitempty"`
	WaitForReady        *bool             `json:"waitForReady,omitempty"`
	TimeoutSeconds      int32             `json:"timeoutSeconds,omitempty"`
}

// TenantSpec is a Tenant's spec: one active row of a registry with one
// template that references it.
type TenantSpec struct {
	RegistryID  string            `json:"registryId"`
	TemplateRef string            `json:"templateRef"`
	UID         string            `json:"uid"`
	Values      map[string]string `json:"values"`
	Resources   []json.RawMessage `json:"resources"`
}

// Once reports whether r is created once and never applied again.
func (r TResource) Once() bool { return r.CreationPolicy == CreationOnce }

// Retain reports whether r is kept (its owner reference dropped) when its
// Tenant or its template entry goes.
func (r TResource) Retain() bool { return r.DeletionPolicy == DeletionRetain }

// Force reports whether a child that exists with another owner or none is
// taken over (else the Tenant is stuck on it).
func (r TResource) Force() bool { return r.ConflictPolicy == ConflictForce }

// Patch is r's patch strategy: PatchApply, PatchMerge or PatchReplace.
func (r TResource) Patch() string {
	if r.PatchStrategy == "" {
		return PatchApply
	}
	return r.PatchStrategy
}

// Wait reports whether r's dependents wait for its Ready condition.
func (r TResource) Wait() bool { return r.WaitForReady == nil || *r.WaitForReady }

// Timeout is how long r may take to become ready.
func (r TResource) Timeout() time.Duration {
	s := r.TimeoutSeconds
	if s <= 0 {
		s = DefaultTimeoutSeconds
	}
	return time.Duration(s) * time.Second
}
