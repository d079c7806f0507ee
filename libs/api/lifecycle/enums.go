package lifecycle

import "strings"

// Outcome is how an attempt ended. The constants are in the contract's order
// (no8s.reconcile.v1.Outcome), but conversions to and from protobuf go by
// name: ProtoName and OutcomeFromProto, never by number.
type Outcome int

// Outcomes of an attempt.
const (
	OutcomeUnspecified Outcome = iota
	// OutcomeSuccess: every step done; the resource is ready (or, when
	// deleting, its cleanup finished).
	OutcomeSuccess
	// OutcomeRequeue: not done yet, come back after the requeue delay; no
	// failure counted.
	OutcomeRequeue
	// OutcomeError: failed; the scheduler retries with exponential backoff.
	OutcomeError
	// OutcomeTerminal: failed; not retried until the spec changes or a
	// manual trigger.
	OutcomeTerminal
)

var outcomeNames = [...]string{"unspecified", "success", "requeue", "error", "terminal"}

// String is the outcome's lower-case name (success, requeue, ...).
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "unspecified"
	}
	return outcomeNames[o]
}

// ProtoName is the outcome's protobuf enum value name (OUTCOME_SUCCESS, ...).
func (o Outcome) ProtoName() string { return "OUTCOME_" + strings.ToUpper(o.String()) }

// OutcomeFromProto returns the outcome whose ProtoName is name;
// OutcomeUnspecified and false for any other name.
func OutcomeFromProto(name string) (Outcome, bool) {
	for i := range outcomeNames {
		if o := Outcome(i); o != OutcomeUnspecified && o.ProtoName() == name {
			return o, true
		}
	}
	return OutcomeUnspecified, false
}

// Reason says why a resource is dispatched. The constants are in the
// contract's order (no8s.reconcile.v1.Reason), but conversions to and from
// protobuf go by name: ProtoName and ReasonFromProto, never by number.
type Reason int

// Reasons of a dispatch.
const (
	// ReasonNone: no reconcile is needed (REASON_UNSPECIFIED on the wire).
	ReasonNone Reason = iota
	ReasonGeneration
	ReasonDeletion
	ReasonManual
	ReasonAnnotation
	ReasonResync
	ReasonRetry
	ReasonPending
	ReasonRequeue
	// ReasonDependency: a resource it owns or depends on (Watches, WaitFor)
	// was created, changed or went.
	ReasonDependency

	// LastReason is the highest reason: loops over every reason (from
	// ReasonGeneration) end at it.
	LastReason = ReasonDependency
)

var reasonNames = [...]string{"none", "generation", "deletion", "manual", "annotation", "resync", "retry", "pending", "requeue", "dependency"}

// String is the reason's lower-case name (generation, deletion, ...), as
// history records it; "unknown" for a value out of range.
func (r Reason) String() string {
	if r < 0 || int(r) >= len(reasonNames) {
		return "unknown"
	}
	return reasonNames[r]
}

// ProtoName is the reason's protobuf enum value name (REASON_GENERATION,
// ...; REASON_UNSPECIFIED for ReasonNone and values out of range).
func (r Reason) ProtoName() string {
	if r <= ReasonNone || int(r) >= len(reasonNames) {
		return "REASON_UNSPECIFIED"
	}
	return "REASON_" + strings.ToUpper(reasonNames[r])
}

// ReasonFromProto returns the reason whose ProtoName is name; ReasonNone and
// false for REASON_UNSPECIFIED and any other name.
func ReasonFromProto(name string) (Reason, bool) {
	for i := range reasonNames {
		if r := Reason(i); r != ReasonNone && r.ProtoName() == name {
			return r, true
		}
	}
	return ReasonNone, false
}

// ParseReason returns the reason whose String is s; ReasonNone and false
// for any other text.
func ParseReason(s string) (Reason, bool) {
	for i, n := range reasonNames {
		if n == s {
			return Reason(i), true
		}
	}
	return ReasonNone, false
}
