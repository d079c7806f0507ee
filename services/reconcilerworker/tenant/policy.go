package tenant

import (
	"bytes"
	"encoding/json"
	"math/big"
	"slices"

	"github.com/no8s/no8s/services/internal/resource"
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
	w, err1 := decodeJSON(want.Spec)
	c, err2 := decodeJSON(cur.spec)
	if err1 != nil || err2 != nil {
		return true
	}
	return !covers(c, w)
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// covers reports whether have contains want: every key of an object in
// want is in have with a covering value, arrays have the same length and
// cover element by element, numbers are equal by value, other values equal.
func covers(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !covers(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !covers(h[i], w[i]) {
				return false
			}
		}
		return true
	case json.Number:
		h, ok := have.(json.Number)
		if !ok {
			return false
		}
		a, ok1 := new(big.Float).SetString(string(w))
		b, ok2 := new(big.Float).SetString(string(h))
		return ok1 && ok2 && a.Cmp(b) == 0
	default:
		return have == want
	}
}
