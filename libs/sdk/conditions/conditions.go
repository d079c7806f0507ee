package conditions

import (
	"slices"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
)

// The record, its statuses, the merge rule and the phase rule are
// libs/api/lifecycle's; the names below are the SDK's names for them.

// Status is a condition's status: True, False or Unknown.
type Status = lifecycle.Status

// The three condition statuses.
const (
	True    = lifecycle.True
	False   = lifecycle.False
	Unknown = lifecycle.Unknown
)

// StatusOf returns True for true and False for false.
func StatusOf(ok bool) Status { return lifecycle.StatusOf(ok) }

// Ready is the type of the derived condition: True exactly when every other
// condition is True and the last reconcile succeeded.
const Ready = lifecycle.ConditionReady

// Reasons the SDK's engine writes on Ready.
const (
	// ReasonReconciled: every condition is True and the attempt succeeded.
	ReasonReconciled = "Reconciled"
	// ReasonReconcileError: the attempt failed; it is retried with backoff.
	ReasonReconcileError = "ReconcileError"
	// ReasonTerminalError: the attempt failed for good (sdk.Terminal).
	ReasonTerminalError = "TerminalError"
	// ReasonRequeued: every step that ran was fine but one is not done yet.
	ReasonRequeued = "Requeued"
	// ReasonDeleting: the resource is being deleted.
	ReasonDeleting = "Deleting"
	// ReasonInterrupted: the worker stopped the attempt while shutting down.
	ReasonInterrupted = "Interrupted"
	// ReasonDegraded: a partial failure while still serving (sdk.Degraded).
	ReasonDegraded = "Degraded"
	// ReasonStoreUnavailable: a call to the store failed because it could
	// not reach its database; the attempt comes back at once rather than
	// counting as a failure (no failure backoff for an outage).
	ReasonStoreUnavailable = "StoreUnavailable"
)

// Phases aggregate a resource's state into one word; PhaseOf is the rule.
const (
	PhaseTerminating = lifecycle.PhaseTerminating
	PhaseReady       = lifecycle.PhaseReady
	PhaseDegraded    = lifecycle.PhaseDegraded
	PhaseProgressing = lifecycle.PhaseProgressing
)

// Condition is one observed aspect of a resource's state.
type Condition = lifecycle.Condition[Status]

// Find returns the condition of type typ.
func Find(list []Condition, typ string) (Condition, bool) {
	if i := index(list, typ); i >= 0 {
		return list[i], true
	}
	return Condition{}, false
}

// IsTrue reports whether list has a condition of type typ whose status is
// True.
func IsTrue(list []Condition, typ string) bool {
	c, ok := Find(list, typ)
	return ok && c.IsTrue()
}

func index(list []Condition, typ string) int {
	return slices.IndexFunc(list, func(c Condition) bool { return c.Type == typ })
}

// Set returns list with c stored under its type, replacing any condition of
// the same type, by the merge rule (lifecycle.Merge): LastTransitionTime is
// kept from the existing condition when the status did not change and is
// set to now when it did (or when c is new); a non-zero
// c.LastTransitionTime is ignored. An empty or invalid status is stored as
// Unknown. list itself is not modified.
func Set(list []Condition, c Condition, now time.Time) []Condition {
	out, _ := lifecycle.Merge(list, []Condition{c}, 0, now)
	return out
}

// Initialize returns list with a condition of each given type added as
// Unknown (reason Initializing) when the type is missing; existing
// conditions are left alone.
func Initialize(list []Condition, generation int64, now time.Time, types ...string) []Condition {
	out := slices.Clone(list)
	for _, t := range types {
		if index(out, t) < 0 {
			out = Set(out, Condition{Type: t, Status: Unknown, Reason: "Initializing", ObservedGeneration: generation}, now)
		}
	}
	return out
}

// Remove returns list without the condition of type typ.
func Remove(list []Condition, typ string) []Condition {
	return slices.DeleteFunc(slices.Clone(list), func(c Condition) bool { return c.Type == typ })
}

// Normalize returns list with one condition per type (the last one wins),
// invalid statuses as Unknown, sorted with Ready first and the rest by type,
// so that equal sets compare equal.
func Normalize(list []Condition) []Condition {
	out := make([]Condition, 0, len(list))
	for _, c := range list {
		if !c.Status.Valid() {
			c.Status = Unknown
		}
		if i := index(out, c.Type); i >= 0 {
			out[i] = c
			continue
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b Condition) int {
		switch {
		case a.Type == b.Type:
			return 0
		case a.Type == Ready:
			return -1
		case b.Type == Ready:
			return 1
		}
		return strings.Compare(a.Type, b.Type)
	})
	return out
}

// NotTrue returns the types of the conditions other than Ready whose status
// is not True, in list order.
func NotTrue(list []Condition) []string {
	var out []string
	for _, c := range list {
		if c.Type != Ready && !c.IsTrue() {
			out = append(out, c.Type)
		}
	}
	return out
}

// DeriveReady returns the Ready condition that list implies for generation:
// True (reason Reconciled) when every other condition is True, else False
// with the first offending condition's type as reason and a message naming
// them all. A resource with no other condition is Ready.
func DeriveReady(list []Condition, generation int64) Condition {
	bad := NotTrue(list)
	if len(bad) == 0 {
		return Condition{Type: Ready, Status: True, Reason: ReasonReconciled, Message: "all conditions are True", ObservedGeneration: generation}
	}
	first, _ := Find(list, bad[0])
	msg := "not True: " + strings.Join(bad, ", ")
	if first.Message != "" {
		msg += " (" + first.Type + ": " + first.Message + ")"
	}
	return Condition{Type: Ready, Status: False, Reason: notTrueReason(first), Message: msg, ObservedGeneration: generation}
}

func notTrueReason(c Condition) string {
	if c.Reason != "" && c.Reason != "Initializing" {
		return c.Reason
	}
	return c.Type + string(c.Status)
}

// PhaseFacts are what the phase rule looks at.
type PhaseFacts = lifecycle.PhaseFacts

// PhaseOf is the phase rule (lifecycle.PhaseOf): Terminating while
// deleting, Degraded after a partial failure, Ready when the last attempt
// succeeded and every condition is True, Progressing otherwise.
func PhaseOf(f PhaseFacts) string { return lifecycle.PhaseOf(f) }

// Statuses lists the status of each condition, for PhaseFacts.
func Statuses(list []Condition) []Status { return lifecycle.Statuses(list) }

// Phase is PhaseOf for list after a successful attempt that reported no
// partial failure: Terminating while deleting, Ready when every condition
// (Ready included) is True, else Progressing.
func Phase(deleting bool, list []Condition) string {
	return lifecycle.PhaseOf(lifecycle.PhaseFacts{Deleting: deleting, Succeeded: true, Statuses: lifecycle.Statuses(list)})
}
