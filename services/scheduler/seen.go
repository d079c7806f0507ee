package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/sdk/registry"
	"github.com/no8s/no8s/services/internal/reconcilers"
)

// maxNamedReplicas bounds the replicas a ReconcilerNotResponding message
// names.
const maxNamedReplicas = 5

// maxRememberedReplicas bounds the replicas remembered per reconciler (the
// newest heartbeats are kept): replicas restarted under new ids must not
// grow the memory for the whole term.
const maxRememberedReplicas = 16

// seenReconcilers is what the scheduler has seen of the registry in its
// term: the reconciler that served each type, and each reconciler's
// replicas with their last heartbeat. It forgets nothing when a reconciler
// disappears, so that the condition of a resource left behind can name it.
type seenReconcilers struct {
	owner    map[reconcilers.TypeRef]string
	replicas map[string]map[string]registry.Replica // reconciler → replica id → replica
	// current are the replicas of each reconciler in the last read.
	current map[string][]registry.Replica
}

// update takes one read of the registry (nil: nothing read).
func (s *seenReconcilers) update(reg *reconcilers.Registry) {
	if reg == nil {
		return
	}
	if s.owner == nil {
		s.owner, s.replicas = map[reconcilers.TypeRef]string{}, map[string]map[string]registry.Replica{}
	}
	s.current = map[string][]registry.Replica{}
	for t, name := range reg.Owners {
		s.owner[t] = name
	}
	for _, r := range reg.Live {
		s.current[r.Name] = r.Replicas
		if s.replicas[r.Name] == nil {
			s.replicas[r.Name] = map[string]registry.Replica{}
		}
		for _, rep := range r.Replicas {
			s.replicas[r.Name][rep.ID] = rep
		}
		if seen := s.replicas[r.Name]; len(seen) > maxRememberedReplicas {
			oldest := slices.SortedFunc(maps.Values(seen), func(a, b registry.Replica) int { return a.LastHeartbeat.Compare(b.LastHeartbeat) })
			for _, rep := range oldest[:len(oldest)-maxRememberedReplicas] {
				delete(seen, rep.ID)
			}
		}
	}
}

// describe names the reconciler of t, whether it is registered now, and
// its replicas with their last heartbeat, newest first.
func (s *seenReconcilers) describe(t reconcilers.TypeRef, now time.Time) string {
	name := s.owner[t]
	if name == "" {
		return fmt.Sprintf("no reconciler has registered %s since this scheduler took the lead", t)
	}
	var b strings.Builder
	reps := slices.Clone(s.current[name])
	if len(reps) > 0 {
		fmt.Fprintf(&b, "reconciler %q is registered", name)
	} else {
		fmt.Fprintf(&b, "reconciler %q was last seen", name)
		for _, r := range s.replicas[name] {
			reps = append(reps, r)
		}
	}
	if len(reps) == 0 {
		b.WriteString(" with no replica")
		return b.String()
	}
	slices.SortFunc(reps, func(a, b registry.Replica) int { return b.LastHeartbeat.Compare(a.LastHeartbeat) }) // newest first
	fmt.Fprintf(&b, " with %d replica(s): ", len(reps))
	for i, r := range reps {
		if i == maxNamedReplicas {
			fmt.Fprintf(&b, ", and %d more", len(reps)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (last heartbeat %s, %s ago)", r.ID, r.LastHeartbeat.UTC().Format(time.RFC3339), now.Sub(r.LastHeartbeat).Round(time.Second))
	}
	return b.String()
}
