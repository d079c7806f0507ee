// Package trigger decides when a resource needs a reconcile and why: the
// scheduling rules of docs/design/reconcile.md as one pure function of a
// resource's reconcile state and the time, so that a scheduler rebuilding
// its state from the store decides exactly as its predecessor would have.
package trigger

import (
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/scheduler/backoff"
)

// Reason says why a resource is dispatched: libs/api's lifecycle.Reason,
// which maps onto no8s.reconcile.v1.Reason by name.
type Reason = lifecycle.Reason

// Reasons.
const (
	None       = lifecycle.ReasonNone
	Generation = lifecycle.ReasonGeneration
	Deletion   = lifecycle.ReasonDeletion
	Manual     = lifecycle.ReasonManual
	Annotation = lifecycle.ReasonAnnotation
	Resync     = lifecycle.ReasonResync
	Retry      = lifecycle.ReasonRetry
	Pending    = lifecycle.ReasonPending
	Requeue    = lifecycle.ReasonRequeue
	Dependency = lifecycle.ReasonDependency
)

// Policy is a type's scheduling policy.
type Policy struct {
	Resync      time.Duration
	BackoffBase time.Duration
	BackoffMax  time.Duration
}

// State is what the scheduler knows of one resource (from the store).
type State struct {
	ID                 int64
	UID                string
	Name               string
	TypeName           string
	TypeVersion        string
	Generation         int64
	ObservedGeneration int64
	Status             string
	Deleting           bool
	// CleanupDone: deleting, and no reconciler finalizer remains (only
	// other finalizers keep the resource): nothing to dispatch.
	CleanupDone         bool
	Failures            int
	TerminalGeneration  int64
	LastReconcile       time.Time
	RequestedAt         time.Time
	AnnotationReconcile bool
	AnnotationIgnore    bool
	LeaseExpiresAt      time.Time
	LeaseHolder         string
	LeaseEpoch          int64
	RequeueAt           time.Time
	Policy              Policy
	// ReconcilerUnavailable: condition ReconcilerAvailable is not True.
	ReconcilerUnavailable bool
	// ControllerUID is the uid of the resource's controller owner; empty
	// when it has none.
	ControllerUID string
	// DependencyChanged: a resource it owns or depends on was created,
	// changed or went since its last dispatch (the scheduler's own record,
	// not the store's).
	DependencyChanged bool
	// Namespace is the resource's namespace.
	Namespace string
	// Dependencies are the resources its last attempt depends on beyond its
	// children (Watches, WaitFor), and Waiting whether that attempt ended
	// waiting for one of them (WaitFor): terminal, yet reconciled again
	// when one of them changes.
	Dependencies []Ref
	Waiting      bool
	// ResourceVersion is the revision of its last change, and
	// LeaseRevision the relay's published revision when its lease was last
	// acquired (lease epoch LeaseEpoch): the changes published by then were
	// committed before that attempt began.
	ResourceVersion, LeaseRevision int64
}

// Ref names a resource by type, namespace and name; it need not exist.
type Ref struct {
	TypeName, TypeVersion, Namespace, Name string
}

// Ref is the resource's own name as a Ref.
func (s *State) Ref() Ref {
	return Ref{TypeName: s.TypeName, TypeVersion: s.TypeVersion, Namespace: s.Namespace, Name: s.Name}
}

// dependency decides about a changed dependency: after the backoff when
// the last attempt failed (a requeue after earlier failures keeps the
// count, not the wait), except when it failed waiting for one (WaitFor),
// which is answered now; otherwise now.
func (s *State) dependency(now time.Time) Decision {
	if s.Status == resource.StatusFailed && !s.Terminal() {
		return Decision{Reason: Dependency, At: s.RetryAt()}
	}
	return Decision{Reason: Dependency, At: now}
}

// LeaseActive reports whether a worker holds an unexpired lease at now.
func (s *State) LeaseActive(now time.Time) bool {
	return s.LeaseHolder != "" && s.LeaseExpiresAt.After(now)
}

// Terminal reports whether the last attempt failed terminally for the
// current generation: no retry until the spec changes or a manual trigger.
func (s *State) Terminal() bool {
	return s.Failures > 0 && s.TerminalGeneration != 0 && s.TerminalGeneration == s.Generation
}

// RetryAt is when a failed resource is retried: the last attempt plus the
// backoff for its failure count, with a jitter fixed by the resource, its
// failure count and its last attempt.
func (s *State) RetryAt() time.Time {
	d := backoff.Delay(s.Policy.BackoffBase, s.Policy.BackoffMax, s.Failures, backoff.DefaultJitter,
		backoff.Seed(s.ID, int64(s.Failures), s.LastReconcile.UnixNano()))
	return s.LastReconcile.Add(d)
}

// Decision is the outcome of Evaluate.
type Decision struct {
	// Reason is why the resource needs a reconcile; None when it does not.
	Reason Reason
	// At is when: at or before now means dispatch now. With Reason None, a
	// non-zero At is when to look again (a running attempt's lease expiry).
	At time.Time
}

// Due reports whether the decision is to dispatch at now.
func (d Decision) Due(now time.Time) bool { return d.Reason != None && !d.At.After(now) }

// Evaluate decides whether and when s needs a reconcile. In order:
//   - no8s.io/operation: ignore → never;
//   - a running attempt (unexpired lease) → look again when the lease ends;
//   - a manual trigger → now, even when failing or terminal;
//   - deleting → now, or at requeue_at when the cleanup asked to come back
//     later (now when a resource it owns changed since), or after the
//     backoff once cleanup failed (never when terminal);
//   - no8s.io/operation: reconcile → now, or after the backoff when the last
//     attempt failed (so that a reconciler that forgets to remove it cannot
//     spin);
//   - pending → now;
//   - a resource it owns changed → now, or after the backoff when its
//     last attempt failed (status failed; never when terminal);
//   - a requeue → at requeue_at;
//   - generation > observed_generation → now, or after the backoff when the
//     last attempt (of this generation: a spec change resets failures)
//     failed; never when terminal;
//   - reconciling without a lease (a crashed attempt) → now;
//   - failed → after the backoff, base·2^(failures-1) capped, ±10 % jitter;
//     never when terminal;
//   - ready → resync_seconds after the last attempt.
func Evaluate(s State, now time.Time) Decision {
	if s.AnnotationIgnore {
		return Decision{}
	}
	if s.LeaseActive(now) {
		return Decision{At: s.LeaseExpiresAt}
	}
	failed := s.Failures > 0
	retry := func(r Reason) Decision {
		if s.Terminal() {
			return Decision{}
		}
		return Decision{Reason: r, At: s.RetryAt()}
	}
	switch {
	case !s.RequestedAt.IsZero():
		return Decision{Reason: Manual, At: now}
	case s.Deleting && s.CleanupDone:
		return Decision{}
	case s.Deleting:
		if failed {
			return retry(Deletion)
		}
		if !s.RequeueAt.IsZero() && !s.DependencyChanged {
			// The cleanup asked to come back later (an action's teardown
			// still running, a child not gone yet); a deletion request
			// clears the live resource's requeue, so this one is the
			// cleanup's. A change of a resource it owns brings it now.
			return Decision{Reason: Deletion, At: s.RequeueAt}
		}
		return Decision{Reason: Deletion, At: now}
	case s.AnnotationReconcile:
		if failed {
			return Decision{Reason: Annotation, At: s.RetryAt()}
		}
		return Decision{Reason: Annotation, At: now}
	case s.Status == resource.StatusPending:
		return Decision{Reason: Pending, At: now}
	case s.DependencyChanged && (!s.Terminal() || s.Waiting):
		return s.dependency(now)
	case !s.RequeueAt.IsZero():
		return Decision{Reason: Requeue, At: s.RequeueAt}
	case s.Generation > s.ObservedGeneration:
		if failed {
			return retry(Retry)
		}
		return Decision{Reason: Generation, At: now}
	case s.Status == resource.StatusReconciling:
		return Decision{Reason: Retry, At: now}
	case failed:
		return retry(Retry)
	case s.Status == resource.StatusReady:
		return Decision{Reason: Resync, At: s.LastReconcile.Add(s.Policy.Resync)}
	}
	return Decision{}
}
