package tenant

import (
	"encoding/json"
	"slices"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// action is what one reconcile does with one child.
type action int

// The actions, as decide returns them.
const (
	// actCreate: the child does not exist; create it.
	actCreate action = iota
	// actSkipGone: a Once child created earlier and deleted by hand since:
	// left alone (not recreated).
	actSkipGone
	// actConflict: the child exists with another owner or none and the
	// policy is Stuck: nothing is changed, the Tenant is Degraded.
	actConflict
	// actTakeOver: the same, with policy Force: written with this Tenant
	// as its only owner.
	actTakeOver
	// actKeep: a Once child already created: never applied again.
	actKeep
	// actUpdate: the child drifted from the rendered one; write it.
	actUpdate
	// actNone: the child is as rendered.
	actNone
)

var actionNames = [...]string{"create", "skip-gone", "conflict", "take-over", "keep", "update", "none"}

func (a action) String() string { return actionNames[a] }

// view is what decide needs of a stored child.
type view struct {
	id              int64
	resourceVersion int64
	generation      int64
	labels          map[string]string
	annotations     map[string]string
	owners          []resource.OwnerReference
	spec            json.RawMessage
	deleting        bool
	// ready: the Ready condition is True for the current generation.
	ready bool
}

// ownedBy reports whether one of v's owner references names uid.
func (v *view) ownedBy(uid string) bool {
	return slices.ContainsFunc(v.owners, func(o resource.OwnerReference) bool { return o.UID == uid })
}

// decide is the policy table for one child: r its template entry, cur the
// stored child (nil: none), created whether this Tenant created or took it
// over before (from its outputs), want the rendered child and owner this
// Tenant's uid.
func decide(r tenancy.TResource, cur *view, created bool, want *tenancy.Rendered, owner string) action {
	switch {
	case cur == nil && r.Once() && created:
		return actSkipGone
	case cur == nil:
		return actCreate
	case !cur.ownedBy(owner) && r.Force():
		return actTakeOver
	case !cur.ownedBy(owner):
		return actConflict
	case r.Once() && (created || cur.annotations[tenancy.AnnotationCreatedOnce] != ""):
		return actKeep
	case !drifted(cur, want):
		return actNone
	}
	return actUpdate
}

// drifted reports whether cur lacks what was rendered: a rendered label or
// annotation missing or different, or a rendered field of the spec missing
// or different. Fields the stored spec has beyond the rendered ones
// (defaults admission applied, or keys another writer added) are not drift.
func drifted(cur *view, want *tenancy.Rendered) bool {
	for k, v := range want.Labels {
		if cur.labels[k] != v {
			return true
		}
	}
	for k, v := range want.Annotations {
		if cur.annotations[k] != v {
			return true
		}
	}
	return !strictjson.Covers(cur.spec, want.Spec)
}
