package trigger

import (
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
)

func TestEvaluate(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	last := now.Add(-10 * time.Second)
	policy := Policy{Resync: time.Minute, BackoffBase: 4 * time.Second, BackoffMax: 16 * time.Second}
	base := State{ID: 7, Generation: 2, ObservedGeneration: 2, Status: resource.StatusReady, LastReconcile: last, Policy: policy}
	near := func(d Decision, want time.Time) bool {
		diff := d.At.Sub(want)
		return diff >= -time.Second && diff <= time.Second
	}
	cases := []struct {
		name   string
		mutate func(*State)
		reason Reason
		check  func(Decision) bool
	}{
		{"ready: resync after the policy's interval", func(*State) {}, Resync, func(d Decision) bool { return d.At.Equal(last.Add(time.Minute)) }},
		{"pending: now", func(s *State) {
			s.Status, s.ObservedGeneration, s.LastReconcile = resource.StatusPending, 0, time.Time{}
		}, Pending, nil},
		{"spec change: now", func(s *State) { s.Generation = 3 }, Generation, nil},
		{"spec change after failures of this generation: backoff", func(s *State) { s.Generation, s.Failures, s.Status = 3, 2, resource.StatusFailed }, Retry,
			func(d Decision) bool { return near(d, last.Add(8*time.Second)) }},
		{"failed once: base", func(s *State) { s.Failures, s.Status = 1, resource.StatusFailed }, Retry,
			func(d Decision) bool { return near(d, last.Add(4*time.Second)) }},
		{"failed often: capped", func(s *State) { s.Failures, s.Status = 9, resource.StatusFailed }, Retry,
			func(d Decision) bool {
				return d.At.After(last.Add(14*time.Second)) && !d.At.After(last.Add(18*time.Second))
			}},
		{"terminal: never", func(s *State) { s.Failures, s.Status, s.TerminalGeneration = 1, resource.StatusFailed, 2 }, None, nil},
		{"terminal for an older generation: not terminal", func(s *State) {
			s.Failures, s.Status, s.TerminalGeneration, s.Generation = 1, resource.StatusFailed, 1, 2
		}, Retry, nil},
		{"manual trigger beats terminal", func(s *State) {
			s.Failures, s.Status, s.TerminalGeneration, s.RequestedAt = 1, resource.StatusFailed, 2, now
		}, Manual, nil},
		{"deleting: now", func(s *State) { s.Deleting, s.Status = true, resource.StatusDeleting }, Deletion, nil},
		{"deleting, cleanup done (an external finalizer is left): never", func(s *State) {
			s.Deleting, s.Status, s.CleanupDone = true, resource.StatusDeleting, true
		}, None, nil},
		{"deleting, cleanup done, manual trigger: now", func(s *State) {
			s.Deleting, s.Status, s.CleanupDone, s.RequestedAt = true, resource.StatusDeleting, true, now
		}, Manual, nil},
		{"deleting, the cleanup requeued: at requeue_at", func(s *State) {
			s.Deleting, s.Status, s.RequeueAt = true, resource.StatusDeleting, now.Add(3*time.Second)
		}, Deletion, func(d Decision) bool { return d.At.Equal(now.Add(3 * time.Second)) }},
		{"deleting, the cleanup requeued, an owned resource changed: now", func(s *State) {
			s.Deleting, s.Status, s.RequeueAt, s.DependencyChanged = true, resource.StatusDeleting, now.Add(3*time.Second), true
		}, Deletion, func(d Decision) bool { return d.At.Equal(now) }},
		{"deleting after failed cleanup: backoff", func(s *State) { s.Deleting, s.Status, s.Failures = true, resource.StatusDeleting, 1 }, Deletion,
			func(d Decision) bool { return near(d, last.Add(4*time.Second)) }},
		{"an owned resource changed: now", func(s *State) { s.DependencyChanged = true }, Dependency, nil},
		{"an owned resource changed, before a requeue: now", func(s *State) {
			s.DependencyChanged, s.RequeueAt = true, now.Add(time.Minute)
		}, Dependency, nil},
		{"an owned resource changed, a requeue after earlier failures: now", func(s *State) {
			s.DependencyChanged, s.RequeueAt, s.Failures, s.Status = true, now.Add(time.Minute), 3, resource.StatusReconciling
		}, Dependency, func(d Decision) bool { return d.At.Equal(now) }},
		{"an owned resource changed while failing: backoff", func(s *State) {
			s.DependencyChanged, s.Failures, s.Status = true, 1, resource.StatusFailed
		}, Dependency, func(d Decision) bool { return near(d, last.Add(4*time.Second)) }},
		{"an owned resource changed, terminal: never", func(s *State) {
			s.DependencyChanged, s.Failures, s.Status, s.TerminalGeneration = true, 1, resource.StatusFailed, 2
		}, None, nil},
		{"waiting for a resource (WaitFor), terminal: never", func(s *State) {
			s.Waiting, s.Failures, s.Status, s.TerminalGeneration = true, 1, resource.StatusFailed, 2
		}, None, nil},
		{"waiting for a resource that changed: now, no backoff", func(s *State) {
			s.Waiting, s.DependencyChanged, s.Failures, s.Status, s.TerminalGeneration = true, true, 3, resource.StatusFailed, 2
		}, Dependency, func(d Decision) bool { return d.At.Equal(now) }},
		{"waiting for a resource, for an older generation: the spec change's retry", func(s *State) {
			s.Waiting, s.DependencyChanged, s.Failures, s.Status, s.TerminalGeneration, s.Generation = true, true, 1, resource.StatusFailed, 1, 2
		}, Dependency, func(d Decision) bool { return near(d, last.Add(4*time.Second)) }},
		{"an owned resource changed while deleting: the deletion", func(s *State) {
			s.DependencyChanged, s.Deleting, s.Status = true, true, resource.StatusDeleting
		}, Deletion, nil},
		{"reconcile annotation: now", func(s *State) { s.AnnotationReconcile = true }, Annotation, nil},
		{"reconcile annotation while failing: backoff", func(s *State) { s.AnnotationReconcile, s.Failures = true, 1 }, Annotation,
			func(d Decision) bool { return near(d, last.Add(4*time.Second)) }},
		{"ignore beats everything", func(s *State) { s.AnnotationIgnore, s.Generation, s.RequestedAt, s.Deleting = true, 3, now, true }, None, nil},
		{"running attempt: look again at lease expiry", func(s *State) {
			s.Generation, s.LeaseHolder, s.LeaseExpiresAt = 3, "w", now.Add(5*time.Second)
		}, None, func(d Decision) bool { return d.At.Equal(now.Add(5 * time.Second)) }},
		{"expired lease while reconciling: crashed attempt, now", func(s *State) {
			s.Status, s.LeaseHolder, s.LeaseExpiresAt = resource.StatusReconciling, "w", now.Add(-time.Second)
		}, Retry, nil},
		{"requeue: at requeue_at", func(s *State) { s.Status, s.RequeueAt = resource.StatusReconciling, now.Add(3*time.Second) }, Requeue,
			func(d Decision) bool { return d.At.Equal(now.Add(3 * time.Second)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := base
			c.mutate(&s)
			d := Evaluate(s, now)
			if d.Reason != c.reason {
				t.Fatalf("reason %v, want %v (decision %+v)", d.Reason, c.reason, d)
			}
			if c.check == nil && c.reason != None && !d.Due(now) {
				t.Fatalf("not due now: %+v", d)
			}
			if c.check != nil && !c.check(d) {
				t.Fatalf("decision %+v (now %v, last %v)", d, now, last)
			}
		})
	}
}

func TestRetryAtIsStable(t *testing.T) {
	s := State{ID: 1, Failures: 3, LastReconcile: time.Unix(5000, 0), Policy: Policy{BackoffBase: time.Minute, BackoffMax: time.Hour}}
	a := s.RetryAt()
	if b := s.RetryAt(); !a.Equal(b) {
		t.Fatalf("retry time moved: %v then %v", a, b)
	}
	s.ID = 2
	if s.RetryAt().Equal(a) {
		t.Fatal("two resources share the same jitter")
	}
}
