package storage

// Resources: the requests, and the rules every backend applies to them
// before and inside its write transaction.

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// CreateResourceRequest creates a resource. Spec must have been admitted
// against the type revision SchemaRevision (0 skips that check).
type CreateResourceRequest struct {
	Resource       resource.Resource
	SchemaRevision int64
	DryRun         bool
}

// ResourceKey names a resource by id, or by type, version, namespace and
// name (an empty Namespace is names.DefaultNamespace).
type ResourceKey struct {
	ID                  int64
	ResourceTypeName    string
	ResourceTypeVersion string
	Namespace           string
	Name                string
}

func (k ResourceKey) String() string {
	if k.ID != 0 {
		return fmt.Sprintf("resource %d", k.ID)
	}
	return fmt.Sprintf("%s/%s %q in namespace %q", k.ResourceTypeName, k.ResourceTypeVersion, k.Name, names.OrDefault(k.Namespace))
}

// UpdateResourceRequest changes a resource's spec, labels or annotations.
// Nil fields are left as they are.
type UpdateResourceRequest struct {
	ID             int64
	Spec           []byte
	Labels         map[string]string
	Annotations    map[string]string
	SetLabels      bool
	SetAnnotations bool
	// OwnerReferences replace the current ones when SetOwnerReferences
	// (empty: every owner reference dropped).
	OwnerReferences         []resource.OwnerReference
	SetOwnerReferences      bool
	ExpectedResourceVersion int64
	SchemaRevision          int64
	DryRun                  bool
}

// DeleteResourceRequest requests a resource's deletion.
type DeleteResourceRequest struct {
	ID int64
	// ExpectedResourceVersion, when non-zero, must equal the current one.
	ExpectedResourceVersion int64
	// Propagation is what becomes of the resource's dependents (zero:
	// Background). Foreground and Orphan add their finalizer in the
	// transaction that marks the resource deleting.
	Propagation lifecycle.Propagation
	DryRun      bool
}

// ValidPropagation checks the request's policy and returns it (zero:
// Background).
func (req DeleteResourceRequest) ValidPropagation() (lifecycle.Propagation, error) {
	p, err := lifecycle.ParsePropagation(string(req.Propagation))
	if err != nil {
		return "", NewError(ErrInvalid, "%s", err.Error()).WithFields(FieldError{Path: "/propagation_policy", Message: "must be Background, Foreground or Orphan"})
	}
	return p, nil
}

// DeleteResult is the state after a delete or finalizer change.
type DeleteResult struct {
	Resource *resource.Resource
	// Purged is true when the row is gone.
	Purged bool
}

// UpdateFinalizersRequest adds and removes finalizers.
type UpdateFinalizersRequest struct {
	ID                      int64
	Add, Remove             []string
	ExpectedResourceVersion int64
	DryRun                  bool
}

// ValidSpec checks the spec of an update and returns it as ValidateSpec
// does (nil: the spec is left as it is).
func (req UpdateResourceRequest) ValidSpec() ([]byte, error) {
	if req.Spec == nil {
		return nil, nil
	}
	return ValidateSpec(req.Spec)
}

// ValidateSpec checks a spec (a JSON object within the size limit, strict
// JSON) and returns its compact form, the form every backend stores.
func ValidateSpec(spec []byte) ([]byte, error) {
	if len(spec) > names.MaxSpecBytes+names.MaxSpecBytes/2 {
		return nil, tooLargeSpec(len(spec))
	}
	c, perr := resource.CompactObject("/spec", spec)
	if perr != nil {
		return nil, invalidOf(perr.Code, perr.Detail, perr.Fields)
	}
	if perr := strictjson.Check(c, "/spec"); perr != nil {
		return nil, invalidOf(perr.Code, perr.Detail, perr.Fields)
	}
	if len(c) > names.MaxSpecBytes {
		return nil, tooLargeSpec(len(c))
	}
	return c, nil
}

func tooLargeSpec(n int) error {
	return NewError(ErrTooLarge, "spec is %d bytes, more than the %d allowed", n, names.MaxSpecBytes).
		WithFields(FieldError{Path: "/spec", Message: fmt.Sprintf("larger than %d bytes", names.MaxSpecBytes)})
}

func validateFinalizers(fs []string) []FieldError {
	var errs []FieldError
	for i, f := range fs {
		if fe := names.Finalizer(fmt.Sprintf("/finalizers/%d", i), f); fe != nil {
			errs = append(errs, fieldOf(fe)...)
		}
	}
	if len(fs) > names.MaxFinalizers {
		errs = append(errs, FieldError{Path: "/finalizers", Message: fmt.Sprintf("more than %d finalizers", names.MaxFinalizers)})
	}
	return errs
}

// NewResource validates a create request's resource and returns the
// resource to store: its namespace (the default one when it names none), a
// new uid, pending, generation 1, its phase, its finalizers without repeats
// and its spec compacted. The backend gives it its id, revision and
// timestamps, after checking that its namespace is active (CheckNamespace)
// and its owners are in it (CheckOwners).
func NewResource(in resource.Resource) (*resource.Resource, error) {
	var errs []FieldError
	ns := names.OrDefault(in.Namespace)
	if fe := names.Namespace("/namespace", ns); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	if fe := names.Name("/name", in.Name); fe != nil {
		errs = append(errs, fieldOf(fe)...)
	}
	errs = append(errs, fieldsOf(resource.ValidateMetadata(in.Labels, in.Annotations, in.OwnerReferences))...)
	fins := dedupe(in.Finalizers)
	errs = append(errs, validateFinalizers(fins)...)
	if len(errs) > 0 {
		return nil, NewError(ErrInvalid, "invalid resource").WithFields(errs...)
	}
	spec, err := ValidateSpec(in.Spec)
	if err != nil {
		return nil, err
	}
	r := &resource.Resource{
		UID:                 uuid.NewString(),
		Namespace:           ns,
		Name:                in.Name,
		ResourceTypeName:    in.ResourceTypeName,
		ResourceTypeVersion: in.ResourceTypeVersion,
		Labels:              in.Labels,
		Annotations:         in.Annotations,
		OwnerReferences:     in.OwnerReferences,
		Spec:                spec,
		Status:              resource.StatusPending,
		Generation:          1,
		Finalizers:          fins,
	}
	r.Phase = resource.PhaseFor(r.Status, false, nil)
	r.Normalize()
	return r, nil
}

// NameTaken is the ErrNameTaken of a create whose resource name exists in
// its namespace.
func NameTaken(r *resource.Resource) error {
	return NewError(ErrNameTaken, "%s/%s %q already exists in namespace %q", r.ResourceTypeName, r.ResourceTypeVersion, r.Name, r.Namespace).
		WithFields(FieldError{Path: "/name", Message: "name already taken in namespace " + r.Namespace})
}

// CheckVersion refuses a write that expected another resource_version than
// r's (expected 0: no precondition).
func CheckVersion(r *resource.Resource, expected int64) error {
	if expected != 0 && expected != r.ResourceVersion {
		return Conflict(fmt.Sprintf("resource %d", r.ID), r.ResourceVersion, expected)
	}
	return nil
}

// ApplyUpdate applies req to r, read under the backend's row lock. spec is
// req.Spec as ValidateSpec returned it (nil: unchanged); typeRevision reads
// the type's current revision, called only when the spec changes. It
// reports whether anything changed and whether the spec did (generation + 1;
// an equal spec in another notation is no change).
func ApplyUpdate(r *resource.Resource, req UpdateResourceRequest, spec []byte, typeRevision func() (int64, error)) (changed, specChanged bool, err error) {
	specChanged = spec != nil && !strictjson.Equal(spec, r.Spec)
	if specChanged {
		if r.DeletedAt != nil {
			return false, false, NewError(ErrDeleting, "resource %d is being deleted; its spec can no longer change", r.ID)
		}
		rev, err := typeRevision()
		if err != nil {
			return false, false, err
		}
		if req.SchemaRevision != 0 && req.SchemaRevision != rev {
			return false, false, SchemaChanged(r.ResourceTypeName, r.ResourceTypeVersion)
		}
		r.Spec = spec
		r.Generation++
		changed = true
	}
	labels, annotations := r.Labels, r.Annotations
	if req.SetLabels {
		labels = orEmpty(req.Labels)
	}
	if req.SetAnnotations {
		annotations = orEmpty(req.Annotations)
	}
	owners := r.OwnerReferences
	if req.SetOwnerReferences {
		owners = req.OwnerReferences
		if owners == nil {
			owners = []resource.OwnerReference{}
		}
	}
	if !maps.Equal(labels, r.Labels) || !maps.Equal(annotations, r.Annotations) || !slices.Equal(owners, r.OwnerReferences) {
		if errs := resource.ValidateMetadata(labels, annotations, owners); len(errs) > 0 {
			return false, false, NewError(ErrInvalid, "invalid resource").WithFields(fieldsOf(errs)...)
		}
		r.Labels, r.Annotations, r.OwnerReferences = labels, annotations, owners
		changed = true
	}
	return changed, specChanged, nil
}

// MarkDeleting turns r deleting at now (the DELETED event's state), adds
// the finalizer of the propagation policy p (Foreground: foregroundDeletion,
// Orphan: orphan; Background none), and reports whether r goes at once:
// with no finalizer, the DELETED event is followed by PURGED in the same
// transaction.
func MarkDeleting(r *resource.Resource, now time.Time, p lifecycle.Propagation) (purge bool) {
	if f := p.Finalizer(); f != "" && !slices.Contains(r.Finalizers, f) {
		r.Finalizers = append(slices.Clone(r.Finalizers), f)
	}
	r.Status, r.DeletedAt = resource.StatusDeleting, &now
	r.Phase = resource.PhaseFor(r.Status, r.Phase == resource.PhaseDegraded, r.Conditions)
	return len(r.Finalizers) == 0
}

// ValidateFinalizerChange checks the finalizers a request adds.
func ValidateFinalizerChange(req UpdateFinalizersRequest) error {
	var errs []FieldError
	for i, f := range req.Add {
		if fe := names.Finalizer(fmt.Sprintf("/add/%d", i), f); fe != nil {
			errs = append(errs, fieldOf(fe)...)
		}
	}
	if len(errs) > 0 {
		return NewError(ErrInvalid, "invalid finalizers").WithFields(errs...)
	}
	return nil
}

// ApplyFinalizers applies req's additions and removals to r, read under the
// backend's row lock. While r is deleting finalizers may be removed but not
// added. It reports whether the list changed and whether r must be purged
// (deleting, and its last finalizer gone: one PURGED event).
func ApplyFinalizers(r *resource.Resource, req UpdateFinalizersRequest) (changed, purge bool, err error) {
	next := make([]string, 0, len(r.Finalizers)+len(req.Add))
	for _, f := range r.Finalizers {
		if !slices.Contains(req.Remove, f) {
			next = append(next, f)
		}
	}
	for _, f := range dedupe(req.Add) {
		if slices.Contains(next, f) {
			continue
		}
		if r.DeletedAt != nil {
			return false, false, NewError(ErrFinalizerBlocked, "resource %d is being deleted; finalizer %q cannot be added", r.ID, f).
				WithFields(FieldError{Path: "/add", Message: "finalizers cannot be added while the resource is deleting"})
		}
		next = append(next, f)
	}
	if len(next) > names.MaxFinalizers {
		return false, false, NewError(ErrInvalid, "more than %d finalizers", names.MaxFinalizers).
			WithFields(FieldError{Path: "/add", Message: fmt.Sprintf("at most %d finalizers", names.MaxFinalizers)})
	}
	if slices.Equal(next, r.Finalizers) {
		return false, false, nil
	}
	r.Finalizers = next
	return true, r.DeletedAt != nil && len(next) == 0, nil
}

func dedupe(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
