package scheduler

// Owns: a reconciler declares the types it owns (the SDK's Engine.Owns,
// in its registration); when a resource of such a type whose controller
// owner reference names a resource of the reconciler's types is created,
// changes or goes, the owner is reconciled (reason dependency). The owner
// is found through the loop's uid index, from the controller uid each
// resource's state carries: no read, no listing. Changes coalesce: an
// owner has at most one dispatch in flight, and the changes made while it
// runs ask for one more (docs/design/relationships.md).

import (
	"math"
	"time"

	"github.com/no8s/no8s/services/internal/reconcilers"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// noteOwns takes what the live reconcilers own from a read of the
// registry. What a type's reconciler owned is kept while none serves it,
// so that the changes made meanwhile reach the owner once one is back.
func (l *loop) noteOwns(r liveRead) {
	if r.reg == nil {
		return
	}
	replicas := map[string]int{}
	for _, rec := range r.reg.Reconcilers {
		replicas[rec.Name] = rec.Replicas
	}
	for t := range r.live {
		if o, ok := r.reg.Owns[t]; ok {
			l.owns[t] = o
		} else if replicas[r.reg.Owners[t]] > 0 {
			// A type whose replicas are all gone (a read between a
			// deregistration's two deletes) says nothing of what it owns.
			delete(l.owns, t)
		}
	}
}

// toWake gathers the owners and referrers to evaluate once a batch of
// changes has been taken, so that a batch asks for one dispatch of each.
type toWake map[int64]*entry

// noteCreated records the creation of a resource, as its CREATED event
// tells it, on its controller owner when the owner's reconciler owns its
// type, unless the owner's own attempt knew of it: one running (a child
// created then is the attempt's own write, which it knows of;
// controller-runtime would reconcile the owner once more for it), or one
// the loop has read as over at a later revision (knew).
func (l *loop) noteCreated(ev event) {
	owner := l.ownerOf(ev.controller, ev.id, ev.resType)
	if owner == nil || owner.flight != nil || owner.st.LeaseActive(time.Now()) || owner.knew(ev.rev) {
		return
	}
	owner.noteDep(math.MaxInt64)
	l.evaluate(owner, time.Now())
}

// knew reports whether e's last attempt knew of a change made at revision
// rv: e's state, as last read, shows that attempt over (its lease given
// back) at a later revision, so the change was committed before it began
// or made while it ran. A read runs ahead of the event stream: the CREATED
// event of a child an attempt created can come after the attempt's end
// was read. Should a later write of e's (a condition) hide a child
// created after the attempt by another hand, the child's first settled
// status still reaches e (noteChild).
func (e *entry) knew(rv int64) bool {
	return rv > 0 && e.st.LeaseEpoch > 0 && e.st.LeaseHolder == "" && rv < e.st.ResourceVersion
}

// noteChild records a change of a resource (old nil: first seen; cur nil:
// gone) on its controller owner when the owner's reconciler owns the
// resource's type, and adds the owner to owners; settled is the resource's
// last status other than reconciling before the change. A change of
// controller is told to the old owner and the new one. A resource seen
// for the first time counts once it has a status past pending and
// reconciling: its creation is noteCreated's.
func (l *loop) noteChild(owners toWake, old *trigger.State, settled string, cur *trigger.State) {
	child := cur
	if child == nil {
		child = old
	}
	if cur != nil && !ownerSees(old, settled, cur) && (old == nil || old.ControllerUID == cur.ControllerUID) {
		return
	}
	t := reconcilers.TypeRef{Name: child.TypeName, Version: child.TypeVersion}
	note := func(uid string) {
		if owner := l.ownerOf(uid, child.ID, t); owner != nil {
			owner.noteDep(changeRevision(cur))
			owners[owner.st.ID] = owner
		}
	}
	note(child.ControllerUID)
	if old != nil && cur != nil && old.ControllerUID != cur.ControllerUID {
		note(old.ControllerUID)
	}
}

// noteDep counts a change of a resource e owns or depends on, made at
// revision rv.
func (e *entry) noteDep(rv int64) {
	e.depSeq++
	e.depRV = max(e.depRV, rv)
}

// changeRevision is the revision of a change whose new state is cur: the
// highest one when it is not known (a resource gone).
func changeRevision(cur *trigger.State) int64 {
	if cur == nil || cur.ResourceVersion == 0 {
		return math.MaxInt64
	}
	return cur.ResourceVersion
}

// answered marks the changes counted since e's dispatch f answered when
// the attempt of f (the lease epoch after the one f was dispatched at)
// began once all of them were published: it read them.
// Changes published later, or of unknown revision, still ask for another
// attempt. A dependency noted while the dispatch waits in the queue then
// costs no attempt of its own, as a key already queued in
// controller-runtime's work queue is not queued twice.
func (e *entry) answered(f *flight) {
	if e.st.LeaseEpoch == f.baseEpoch+1 && e.depRV <= e.st.LeaseRevision {
		e.depDone = e.depSeq
	}
}

// previous returns what the loop knows of resource id before a new read:
// a copy of its state and its settled status; known is false for a
// resource it has not seen.
func (l *loop) previous(id int64) (old *trigger.State, settled string, known bool) {
	e := l.entries[id]
	if e == nil {
		return nil, "", false
	}
	st := e.st
	return &st, e.settled, true
}

// noteChange records a change of a resource (old nil: first seen; cur
// nil: gone) on its controller owner (noteChild) and on the resources that
// depend on it (noteReferenced), adding them to owners.
func (l *loop) noteChange(owners toWake, old *trigger.State, settled string, cur *trigger.State) {
	l.noteChild(owners, old, settled, cur)
	l.noteReferenced(owners, old, settled, cur)
}

// gone forgets resource id, which no longer exists, telling its
// controller owner and the resources that depend on it (added to owners).
func (l *loop) gone(owners toWake, id int64) {
	if e := l.entries[id]; e != nil {
		l.noteChange(owners, &e.st, e.settled, nil)
	}
	l.remove(id)
}

// ownerOf returns the entry of the controller owner uid of resource id,
// of type t, when its reconciler owns t; nil otherwise.
func (l *loop) ownerOf(uid string, id int64, t reconcilers.TypeRef) *entry {
	if uid == "" {
		return nil
	}
	oid, ok := l.byUID[uid]
	if !ok || oid == id {
		return nil
	}
	owner := l.entries[oid]
	if owner == nil || !l.owns[reconcilers.TypeRef{Name: owner.st.TypeName, Version: owner.st.TypeVersion}].Has(t) {
		return nil
	}
	return owner
}

// ownerSees reports whether a change from old (nil: first seen) to cur is
// one an owner reconciles on: a spec change, a deletion, an attempt that
// caught up with a new spec (observed generation), or a lifecycle status
// other than reconciling that differs from the last one the owner saw
// (settled): an attempt starting tells the owner nothing, and a resync or
// a retry that ends as the last attempt did changes nothing for it.
func ownerSees(old *trigger.State, settled string, cur *trigger.State) bool {
	if old == nil {
		return cur.Deleting || (cur.Status != resource.StatusPending && cur.Status != resource.StatusReconciling)
	}
	return cur.Generation != old.Generation || cur.Deleting != old.Deleting || cur.ObservedGeneration != old.ObservedGeneration ||
		(cur.Status != resource.StatusReconciling && cur.Status != settled)
}

// wake evaluates the owners a batch of changes noted (those still
// known: one may have gone in the same batch).
func (l *loop) wake(owners toWake, now time.Time) {
	for id, e := range owners {
		if l.entries[id] == e {
			l.evaluate(e, now)
		}
	}
}

// dropFlight forgets e's dispatch, which never reached a worker (its
// publish failed, or it was not started within the item lease): the
// changes of resources it owns that it was to answer wait again.
func (l *loop) dropFlight(e *entry) {
	if f := e.flight; f != nil {
		e.depDone = min(e.depDone, f.depFrom)
	}
	e.flight = nil
}
