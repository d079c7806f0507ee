package scheduler

import (
	"testing"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// The trace rules of a dispatch: a change's dispatch continues the newest
// event; a resync, retry, requeue or manual trigger links to the spec
// change that set the generation the store last showed, not to the status
// writes (RECONCILED) that came after it.
func TestDispatchTraceRules(t *testing.T) {
	l := &loop{traces: map[int64]traced{}}
	check := func(what string, r trigger.Reason, wantParent, wantLink string) {
		t.Helper()
		if p, k := l.traceOf(1, r); p != wantParent || k != wantLink {
			t.Fatalf("%s: %s dispatch parent %q link %q, want %q %q", what, r, p, k, wantParent, wantLink)
		}
	}
	check("nothing seen", trigger.Resync, "", "")

	l.noteEvent(event{id: 1, typ: eventstream.Created, trace: "create"})
	l.noteGeneration(1, 1)
	check("created", trigger.Pending, "create", "")

	l.noteEvent(event{id: 1, typ: eventstream.Reconciled, trace: "attempt"})
	l.noteGeneration(1, 1)
	check("reconciled", trigger.Resync, "", "create")
	check("reconciled", trigger.Manual, "", "create")

	l.noteEvent(event{id: 1, typ: eventstream.Modified, trace: "update"})
	l.noteGeneration(1, 2)
	check("updated", trigger.Generation, "update", "")
	check("updated", trigger.Retry, "", "update")

	l.noteEvent(event{id: 1, typ: eventstream.Deleted, trace: "delete"})
	check("deleted", trigger.Deletion, "delete", "")
	check("deleted", trigger.Requeue, "", "update")

	l.noteEvent(event{id: 1, typ: eventstream.Modified}) // untraced: changes nothing
	check("untraced", trigger.Requeue, "", "update")
}
