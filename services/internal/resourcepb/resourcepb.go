// Package resourcepb converts between the canonical resource documents
// (package resource) and their protobuf form (no8s.store.v1), so that
// protobuf types stay at the services' gRPC edges.
package resourcepb

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/resource"
)

// ToProto converts a resource to protobuf.
func ToProto(r *resource.Resource) *storev1.Resource {
	if r == nil {
		return nil
	}
	out := &storev1.Resource{
		Id:                  r.ID,
		Uid:                 r.UID,
		Namespace:           r.Namespace,
		Name:                r.Name,
		ResourceTypeName:    r.ResourceTypeName,
		ResourceTypeVersion: r.ResourceTypeVersion,
		Labels:              r.Labels,
		Annotations:         r.Annotations,
		Spec:                r.Spec,
		Status:              r.Status,
		StatusMessage:       r.StatusMessage,
		Generation:          r.Generation,
		ObservedGeneration:  r.ObservedGeneration,
		ResourceVersion:     r.ResourceVersion,
		Phase:               r.Phase,
		Outputs:             r.Outputs,
		Finalizers:          r.Finalizers,
		CreatedAt:           ts(r.CreatedAt),
		UpdatedAt:           ts(r.UpdatedAt),
		DeletedAt:           tsPtr(r.DeletedAt),
		LastReconcileTime:   tsPtr(r.LastReconcileTime),
	}
	out.OwnerReferences = OwnerReferencesToProto(r.OwnerReferences)
	for _, c := range r.Conditions {
		out.Conditions = append(out.Conditions, &storev1.Condition{
			Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
			ObservedGeneration: c.ObservedGeneration, LastTransitionTime: ts(c.LastTransitionTime),
		})
	}
	return out
}

// FromProto converts a protobuf resource to its canonical document.
func FromProto(p *storev1.Resource) *resource.Resource {
	if p == nil {
		return nil
	}
	r := &resource.Resource{
		ID:                  p.GetId(),
		UID:                 p.GetUid(),
		Namespace:           p.GetNamespace(),
		Name:                p.GetName(),
		ResourceTypeName:    p.GetResourceTypeName(),
		ResourceTypeVersion: p.GetResourceTypeVersion(),
		Labels:              p.GetLabels(),
		Annotations:         p.GetAnnotations(),
		Spec:                p.GetSpec(),
		Status:              p.GetStatus(),
		StatusMessage:       p.GetStatusMessage(),
		Generation:          p.GetGeneration(),
		ObservedGeneration:  p.GetObservedGeneration(),
		ResourceVersion:     p.GetResourceVersion(),
		Phase:               p.GetPhase(),
		Outputs:             p.GetOutputs(),
		Finalizers:          p.GetFinalizers(),
		CreatedAt:           asTime(p.GetCreatedAt()),
		UpdatedAt:           asTime(p.GetUpdatedAt()),
		DeletedAt:           asTimePtr(p.GetDeletedAt()),
		LastReconcileTime:   asTimePtr(p.GetLastReconcileTime()),
	}
	r.OwnerReferences = OwnerReferencesFromProto(p.GetOwnerReferences())
	for _, c := range p.GetConditions() {
		r.Conditions = append(r.Conditions, resource.Condition{
			Type: c.GetType(), Status: c.GetStatus(), Reason: c.GetReason(), Message: c.GetMessage(),
			ObservedGeneration: c.GetObservedGeneration(), LastTransitionTime: asTime(c.GetLastTransitionTime()),
		})
	}
	r.Normalize()
	return r
}

// TypeToProto converts a resource type to protobuf.
func TypeToProto(t *resource.Type) *storev1.ResourceType {
	if t == nil {
		return nil
	}
	return &storev1.ResourceType{
		Id: t.ID, Name: t.Name, Version: t.Version, Description: t.Description, Schema: t.Schema,
		ResourceVersion: t.ResourceVersion, CreatedAt: ts(t.CreatedAt), UpdatedAt: ts(t.UpdatedAt),
		ReconcilePolicy: PolicyToProto(t.ReconcilePolicy),
	}
}

// PolicyToProto converts a reconcile policy to protobuf.
func PolicyToProto(p resource.ReconcilePolicy) *storev1.ReconcilePolicy {
	return &storev1.ReconcilePolicy{
		ResyncSeconds: p.ResyncSeconds, BackoffBaseSeconds: p.BackoffBaseSeconds,
		BackoffMaxSeconds: p.BackoffMaxSeconds, TimeoutSeconds: p.TimeoutSeconds,
	}
}

// PolicyFromProto converts a protobuf reconcile policy (nil: all defaults
// unset).
func PolicyFromProto(p *storev1.ReconcilePolicy) resource.ReconcilePolicy {
	return resource.ReconcilePolicy{
		ResyncSeconds: p.GetResyncSeconds(), BackoffBaseSeconds: p.GetBackoffBaseSeconds(),
		BackoffMaxSeconds: p.GetBackoffMaxSeconds(), TimeoutSeconds: p.GetTimeoutSeconds(),
	}
}

// TypeFromProto converts a protobuf resource type.
func TypeFromProto(p *storev1.ResourceType) *resource.Type {
	if p == nil {
		return nil
	}
	return &resource.Type{
		ID: p.GetId(), Name: p.GetName(), Version: p.GetVersion(), Description: p.GetDescription(), Schema: p.GetSchema(),
		ResourceVersion: p.GetResourceVersion(), CreatedAt: asTime(p.GetCreatedAt()), UpdatedAt: asTime(p.GetUpdatedAt()),
		ReconcilePolicy: PolicyFromProto(p.GetReconcilePolicy()).WithDefaults(),
	}
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tsPtr(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func asTime(p *timestamppb.Timestamp) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.AsTime().UTC()
}

func asTimePtr(p *timestamppb.Timestamp) *time.Time {
	if p == nil {
		return nil
	}
	t := p.AsTime().UTC()
	return &t
}

// NamespaceToProto converts a namespace to protobuf.
func NamespaceToProto(n *resource.Namespace) *storev1.Namespace {
	if n == nil {
		return nil
	}
	return &storev1.Namespace{
		Name: n.Name, Uid: n.UID, Status: n.Status, ResourceVersion: n.ResourceVersion,
		CreatedAt: ts(n.CreatedAt), UpdatedAt: ts(n.UpdatedAt), DeletedAt: tsPtr(n.DeletedAt),
	}
}

// NamespaceFromProto converts a protobuf namespace to its canonical
// document.
func NamespaceFromProto(p *storev1.Namespace) *resource.Namespace {
	if p == nil {
		return nil
	}
	n := &resource.Namespace{Name: p.GetName(), UID: p.GetUid(), Status: p.GetStatus(), ResourceVersion: p.GetResourceVersion()}
	if t := p.GetCreatedAt(); t != nil {
		n.CreatedAt = t.AsTime().UTC()
	}
	if t := p.GetUpdatedAt(); t != nil {
		n.UpdatedAt = t.AsTime().UTC()
	}
	if t := p.GetDeletedAt(); t != nil {
		d := t.AsTime().UTC()
		n.DeletedAt = &d
	}
	return n
}

// OwnerReferencesToProto converts owner references to protobuf (nil for
// none).
func OwnerReferencesToProto(l []resource.OwnerReference) []*storev1.OwnerReference {
	var out []*storev1.OwnerReference
	for _, o := range l {
		out = append(out, &storev1.OwnerReference{
			Uid: o.UID, ResourceTypeName: o.ResourceTypeName, ResourceTypeVersion: o.ResourceTypeVersion,
			Name: o.Name, Controller: o.Controller, BlockOwnerDeletion: o.BlockOwnerDeletion,
		})
	}
	return out
}

// OwnerReferencesFromProto converts protobuf owner references (nil for
// none).
func OwnerReferencesFromProto(l []*storev1.OwnerReference) []resource.OwnerReference {
	var out []resource.OwnerReference
	for _, o := range l {
		out = append(out, resource.OwnerReference{
			UID: o.GetUid(), ResourceTypeName: o.GetResourceTypeName(), ResourceTypeVersion: o.GetResourceTypeVersion(),
			Name: o.GetName(), Controller: o.GetController(), BlockOwnerDeletion: o.GetBlockOwnerDeletion(),
		})
	}
	return out
}
