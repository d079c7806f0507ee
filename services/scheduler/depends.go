package scheduler

// Watches and WaitFor: each attempt reports the resources it depends on
// beyond its children (the SDK's Engine.Watches, Request.WaitFor), by type,
// namespace and name; the store keeps them with the resource's reconcile
// state. The loop indexes them the other way round, from the resource
// named to the resources depending on it, and reconciles those (reason
// dependency) when it is created, changes or goes, coalescing with Owns:
// no read, no listing on an event (docs/design/relationships.md).

import (
	"math"
	"slices"

	"github.com/no8s/no8s/services/scheduler/trigger"
)

// reindex moves e's entries in the dependents index from what it
// depended on to what its new state cur depends on. A resource newly
// depended on that changed after e's attempt in flight was dispatched may
// have changed after the attempt read it, and before the index knew of
// the attempt's interest: e is reconciled once more.
func (l *loop) reindex(e *entry, cur *trigger.State) {
	old := e.st.Dependencies
	if slices.Equal(old, cur.Dependencies) {
		return
	}
	for _, r := range old {
		if ids := l.dependents[r]; ids != nil {
			delete(ids, cur.ID)
			if len(ids) == 0 {
				delete(l.dependents, r)
			}
		}
	}
	for _, r := range cur.Dependencies {
		ids := l.dependents[r]
		if ids == nil {
			ids = map[int64]struct{}{}
			l.dependents[r] = ids
		}
		ids[cur.ID] = struct{}{}
		if f := e.flight; f != nil && !slices.Contains(old, r) {
			if d := l.entries[l.byRef[r]]; d != nil && d.changed > f.changes {
				e.noteDep(math.MaxInt64)
			}
		}
	}
}

// noteReferenced records a change of a resource (old nil: first seen,
// which is its creation once the term's first listing is done; cur nil:
// gone) on the resources depending on it, and adds them to owners. The
// changes that count are those an owner reconciles on (ownerSees), and
// creation and going whatever the status; the resource's entry keeps the
// count of the loop's changes when it last changed (reindex).
func (l *loop) noteReferenced(owners toWake, old *trigger.State, settled string, cur *trigger.State) {
	if old != nil && cur != nil && !ownerSees(old, settled, cur) {
		return
	}
	r := cur
	if r == nil {
		r = old
	} else if e := l.entries[cur.ID]; e != nil {
		l.changes++
		e.changed = l.changes
	}
	for id := range l.dependents[r.Ref()] {
		if e := l.entries[id]; e != nil && id != r.ID {
			e.noteDep(changeRevision(cur))
			owners[id] = e
		}
	}
}
