package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk/registry"
	"github.com/no8s/no8s/services/internal/reconcilers"
)

// TestSeenReconcilers: the description names the registered replicas while
// the reconciler is registered, the remembered ones (newest first, a
// bounded number) once it is gone, and says so when none was ever seen.
func TestSeenReconcilers(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	typ := reconcilers.TypeRef{Name: "Widget", Version: "v1"}
	var s seenReconcilers
	if got := s.describe(typ, now); !strings.Contains(got, "no reconciler has registered Widget/v1") {
		t.Fatalf("never seen: %s", got)
	}
	var reps []registry.Replica
	for i := range maxRememberedReplicas + 4 {
		reps = append(reps, registry.Replica{Name: "widgets", ID: fmt.Sprintf("r%02d", i), LastHeartbeat: now.Add(-time.Duration(100-i) * time.Second)})
		s.update(&reconcilers.Registry{Owners: map[reconcilers.TypeRef]string{typ: "widgets"},
			Live: []registry.Reconciler{{Name: "widgets", Replicas: []registry.Replica{reps[i]}}}})
	}
	got := s.describe(typ, now)
	if !strings.Contains(got, `reconciler "widgets" is registered with 1 replica(s): r19 (last heartbeat 2026-11-27T09:58:39Z, 1m21s ago)`) {
		t.Fatalf("registered: %s", got)
	}
	s.update(&reconcilers.Registry{Owners: map[reconcilers.TypeRef]string{}})
	got = s.describe(typ, now)
	if !strings.HasPrefix(got, fmt.Sprintf(`reconciler "widgets" was last seen with %d replica(s): r19 (`, maxRememberedReplicas)) ||
		!strings.Contains(got, ", r15 (") || strings.Contains(got, "r14") || !strings.HasSuffix(got, fmt.Sprintf(", and %d more", maxRememberedReplicas-maxNamedReplicas)) {
		t.Fatalf("gone: %s", got)
	}
}
