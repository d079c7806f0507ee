package storage

// Resource types: the requests, their validation, and the stored form of a
// reconcile policy.

import (
	"encoding/json"
	"fmt"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// MaxDescriptionBytes bounds a resource type description.
const MaxDescriptionBytes = 4096

// CreateTypeRequest registers a resource type. The schema must already have
// been checked by admission.
type CreateTypeRequest struct {
	Name, Version, Description string
	Schema                     []byte
	// ReconcilePolicy holds the fields the type sets; zero fields take the
	// defaults.
	ReconcilePolicy resource.ReconcilePolicy
	DryRun          bool
}

// TypeKey names a type by id, or by name and version.
type TypeKey struct {
	ID            int64
	Name, Version string
}

func (k TypeKey) String() string {
	if k.ID != 0 {
		return fmt.Sprintf("resource type %d", k.ID)
	}
	return fmt.Sprintf("resource type %s/%s", k.Name, k.Version)
}

// UpdateTypeRequest changes a type's description and/or schema. Name and
// version are immutable. Existing resources are re-validated only when next
// written.
type UpdateTypeRequest struct {
	ID          int64
	Description *string
	Schema      []byte
	// ReconcilePolicy, when set, replaces the policy (zero fields: defaults).
	ReconcilePolicy *resource.ReconcilePolicy
	DryRun          bool
}

func validateTypeFields(description string, schema []byte) (compacted []byte, errs []FieldError) {
	if len(description) > MaxDescriptionBytes {
		errs = append(errs, FieldError{Path: "/description", Message: fmt.Sprintf("longer than %d bytes", MaxDescriptionBytes)})
	}
	if fe := strictjson.CheckString("/description", description); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	if len(schema) > names.MaxSchemaBytes {
		errs = append(errs, FieldError{Path: "/schema", Message: fmt.Sprintf("schema is %d bytes, more than the %d allowed", len(schema), names.MaxSchemaBytes)})
		return nil, errs
	}
	c, perr := resource.CompactObject("/schema", schema)
	if perr == nil {
		perr = strictjson.Check(c, "/schema")
	}
	if perr != nil {
		errs = append(errs, fieldsOf(perr.Fields)...)
	}
	return c, errs
}

// ValidateCreateType checks a create request and returns its schema in
// compact form.
func ValidateCreateType(req CreateTypeRequest) (schema []byte, err error) {
	var errs []FieldError
	if fe := names.TypeName("/name", req.Name); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	if fe := names.TypeVersion("/version", req.Version); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	schema, ferrs := validateTypeFields(req.Description, req.Schema)
	errs = append(errs, ferrs...)
	if len(req.Schema) == 0 {
		errs = append(errs, FieldError{Path: "/schema", Message: "schema is required"})
	}
	errs = append(errs, fieldsOf(resource.ValidatePolicy(req.ReconcilePolicy, "/reconcile_policy"))...)
	if len(errs) > 0 {
		return nil, NewError(ErrInvalid, "invalid resource type").WithFields(errs...)
	}
	return schema, nil
}

// TypeExists is the ErrNameTaken of a type that is already registered.
func TypeExists(name, version string) error {
	return NewError(ErrNameTaken, "resource type %s/%s already exists", name, version)
}

// ValidateUpdateType checks an update request and returns its schema in
// compact form (nil: unchanged).
func ValidateUpdateType(req UpdateTypeRequest) (schema []byte, err error) {
	desc := ""
	if req.Description != nil {
		desc = *req.Description
	}
	var errs []FieldError
	if len(req.Schema) > 0 {
		schema, errs = validateTypeFields(desc, req.Schema)
	} else if len(desc) > MaxDescriptionBytes {
		errs = append(errs, FieldError{Path: "/description", Message: fmt.Sprintf("longer than %d bytes", MaxDescriptionBytes)})
	}
	if req.ReconcilePolicy != nil {
		errs = append(errs, fieldsOf(resource.ValidatePolicy(*req.ReconcilePolicy, "/reconcile_policy"))...)
	}
	if len(errs) > 0 {
		return nil, NewError(ErrInvalid, "invalid resource type").WithFields(errs...)
	}
	return schema, nil
}

// TypeUpdate is what an update makes of a type: its description, schema
// and stored policy. Same is set when nothing changes (nothing to write).
type TypeUpdate struct {
	Description string
	Schema      []byte
	// Policy is the stored policy (EncodePolicy).
	Policy []byte
	Same   bool
}

// ApplyTypeUpdate merges req (schema as ValidateUpdateType returned it)
// into the current type cur, whose stored policy is curPolicy.
func ApplyTypeUpdate(cur *resource.Type, curPolicy []byte, req UpdateTypeRequest, schema []byte) TypeUpdate {
	old := DecodePolicy(curPolicy)
	policy := old
	if req.ReconcilePolicy != nil {
		policy = *req.ReconcilePolicy
	}
	u := TypeUpdate{Description: cur.Description, Schema: schema, Policy: EncodePolicy(policy)}
	if req.Description != nil {
		u.Description = *req.Description
	}
	if u.Schema == nil {
		u.Schema = cur.Schema
	}
	u.Same = u.Description == cur.Description && strictjson.Equal(u.Schema, cur.Schema) && policy == old
	return u
}

// InUse is the ErrInUse of a type that still has n resources.
func InUse(name, version string, n int64) error {
	return NewError(ErrInUse, "resource type %s/%s still has %d resources; delete them first", name, version, n)
}

// storedPolicy is a reconcile policy as stored: only the fields a type set.
type storedPolicy struct {
	ResyncSeconds      int32 `json:"resync_seconds,omitempty"`
	BackoffBaseSeconds int32 `json:"backoff_base_seconds,omitempty"`
	BackoffMaxSeconds  int32 `json:"backoff_max_seconds,omitempty"`
	TimeoutSeconds     int32 `json:"timeout_seconds,omitempty"`
}

// EncodePolicy returns the stored form of p, a JSON object: nil (SQL NULL)
// when p sets nothing.
func EncodePolicy(p resource.ReconcilePolicy) []byte {
	if p == (resource.ReconcilePolicy{}) {
		return nil
	}
	b, _ := json.Marshal(storedPolicy(p))
	return b
}

// DecodePolicy reads a stored policy; defaults are not filled in.
func DecodePolicy(b []byte) resource.ReconcilePolicy {
	var sp storedPolicy
	if len(b) > 0 {
		_ = json.Unmarshal(b, &sp)
	}
	return resource.ReconcilePolicy(sp)
}
