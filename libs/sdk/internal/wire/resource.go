package wire

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk/conditions"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// OwnerReference points at the resource that owns another.
type OwnerReference struct {
	UID                string
	Type               client.TypeRef
	Name               string
	Controller         bool
	BlockOwnerDeletion bool
}

// Resource is a declared object as the store holds it. Spec and Outputs
// are JSON objects.
type Resource struct {
	ID  int64
	UID string
	// Namespace is the resource's namespace ("default" unless its creator
	// named another); it never changes.
	Namespace       string
	Name            string
	Type            client.TypeRef
	Labels          map[string]string
	Annotations     map[string]string
	OwnerReferences []OwnerReference
	Spec            json.RawMessage
	// Status is the lifecycle status the store sets: pending →
	// reconciling → ready | failed, and deleting (client.StatusPending
	// and its siblings in libs/client).
	Status             string
	StatusMessage      string
	Generation         int64
	ObservedGeneration int64
	ResourceVersion    int64
	Conditions         []conditions.Condition
	// Phase is Terminating, Ready, Degraded or Progressing (the rule is
	// lifecycle.PhaseOf in libs/api; conditions.Phase* name them).
	Phase      string
	Outputs    json.RawMessage
	Finalizers []string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// DeletedAt is set (non-zero) once deletion was requested.
	DeletedAt         time.Time
	LastReconcileTime time.Time
}

// Deleting reports whether deletion was requested.
func (r *Resource) Deleting() bool { return !r.DeletedAt.IsZero() || r.Status == client.StatusDeleting }

// HasFinalizer reports whether r carries finalizer f.
func (r *Resource) HasFinalizer(f string) bool { return slices.Contains(r.Finalizers, f) }

// Operation returns the value of the no8s.io/operation annotation
// (names.OperationAnnotation).
func (r *Resource) Operation() string { return r.Annotations[names.OperationAnnotation] }

// Condition returns the condition of type typ.
func (r *Resource) Condition(typ string) (conditions.Condition, bool) {
	return conditions.Find(r.Conditions, typ)
}

// DecodeSpec unmarshals the spec into v.
func (r *Resource) DecodeSpec(v any) error {
	spec := r.Spec
	if len(spec) == 0 {
		spec = json.RawMessage("{}")
	}
	if err := json.Unmarshal(spec, v); err != nil {
		return fmt.Errorf("decode spec of %s %q: %w", r.Type, r.Name, err)
	}
	return nil
}

// String identifies the resource in logs: "Type/version namespace/name
// (id N)".
func (r *Resource) String() string {
	return fmt.Sprintf("%s %s/%s (id %d)", r.Type, r.Namespace, r.Name, r.ID)
}

// Clone returns a deep copy.
func (r *Resource) Clone() *Resource {
	if r == nil {
		return nil
	}
	c := *r
	c.Labels = maps.Clone(r.Labels)
	c.Annotations = maps.Clone(r.Annotations)
	c.OwnerReferences = slices.Clone(r.OwnerReferences)
	c.Spec = slices.Clone(r.Spec)
	c.Conditions = slices.Clone(r.Conditions)
	c.Outputs = slices.Clone(r.Outputs)
	c.Finalizers = slices.Clone(r.Finalizers)
	return &c
}

// ResourceFromProto converts the store's protobuf form.
func ResourceFromProto(p *storev1.Resource) *Resource {
	if p == nil {
		return nil
	}
	r := &Resource{
		ID:                 p.GetId(),
		UID:                p.GetUid(),
		Namespace:          names.OrDefault(p.GetNamespace()),
		Name:               p.GetName(),
		Type:               client.TypeRef{Name: p.GetResourceTypeName(), Version: p.GetResourceTypeVersion()},
		Labels:             maps.Clone(p.GetLabels()),
		Annotations:        maps.Clone(p.GetAnnotations()),
		Spec:               slices.Clone(p.GetSpec()),
		Status:             p.GetStatus(),
		StatusMessage:      p.GetStatusMessage(),
		Generation:         p.GetGeneration(),
		ObservedGeneration: p.GetObservedGeneration(),
		ResourceVersion:    p.GetResourceVersion(),
		Phase:              p.GetPhase(),
		Outputs:            slices.Clone(p.GetOutputs()),
		Finalizers:         slices.Clone(p.GetFinalizers()),
		CreatedAt:          asTime(p.GetCreatedAt()),
		UpdatedAt:          asTime(p.GetUpdatedAt()),
		DeletedAt:          asTime(p.GetDeletedAt()),
		LastReconcileTime:  asTime(p.GetLastReconcileTime()),
	}
	for _, o := range p.GetOwnerReferences() {
		r.OwnerReferences = append(r.OwnerReferences, OwnerReference{
			UID: o.GetUid(), Type: client.TypeRef{Name: o.GetResourceTypeName(), Version: o.GetResourceTypeVersion()},
			Name: o.GetName(), Controller: o.GetController(), BlockOwnerDeletion: o.GetBlockOwnerDeletion(),
		})
	}
	r.Conditions = ConditionsFromProto(p.GetConditions())
	return r
}

// ConditionsFromProto converts protobuf conditions.
func ConditionsFromProto(list []*storev1.Condition) []conditions.Condition {
	if len(list) == 0 {
		return nil
	}
	out := make([]conditions.Condition, 0, len(list))
	for _, c := range list {
		out = append(out, conditions.Condition{
			Type: c.GetType(), Status: conditions.Status(c.GetStatus()), Reason: c.GetReason(), Message: c.GetMessage(),
			ObservedGeneration: c.GetObservedGeneration(), LastTransitionTime: asTime(c.GetLastTransitionTime()),
		})
	}
	return out
}

// ConditionsToProto converts conditions to protobuf.
func ConditionsToProto(list []conditions.Condition) []*storev1.Condition {
	out := make([]*storev1.Condition, 0, len(list))
	for _, c := range list {
		pc := &storev1.Condition{
			Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			ObservedGeneration: c.ObservedGeneration,
		}
		if !c.LastTransitionTime.IsZero() {
			pc.LastTransitionTime = timestamppb.New(c.LastTransitionTime)
		}
		out = append(out, pc)
	}
	return out
}

func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
