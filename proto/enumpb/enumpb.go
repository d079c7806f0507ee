// Package enumpb puts the lifecycle's enums (libs/api/lifecycle: the outcome
// of an attempt, the reason of a dispatch) on the wire and back. It is the
// one place where they meet their protobuf enums, and it maps them by name
// (OUTCOME_SUCCESS, REASON_GENERATION, ...), never by number, so the two
// can be reordered or extended independently.
package enumpb

import (
	"github.com/no8s/no8s/libs/api/lifecycle"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// Outcome is o on the wire (OUTCOME_UNSPECIFIED for an unknown value).
func Outcome(o lifecycle.Outcome) reconcilev1.Outcome {
	return reconcilev1.Outcome(reconcilev1.Outcome_value[o.ProtoName()])
}

// FromOutcome is o off the wire (OutcomeUnspecified for an unknown value).
func FromOutcome(o reconcilev1.Outcome) lifecycle.Outcome {
	out, _ := lifecycle.OutcomeFromProto(o.String())
	return out
}

// Reason is r on the wire (REASON_UNSPECIFIED for ReasonNone).
func Reason(r lifecycle.Reason) reconcilev1.Reason {
	return reconcilev1.Reason(reconcilev1.Reason_value[r.ProtoName()])
}

// FromReason is r off the wire (ReasonNone for REASON_UNSPECIFIED or an
// unknown value).
func FromReason(r reconcilev1.Reason) lifecycle.Reason {
	out, _ := lifecycle.ReasonFromProto(r.String())
	return out
}

// ReasonName is the name history stores for a reason on the wire:
// "generation", "retry", ...; "" for REASON_UNSPECIFIED.
func ReasonName(r reconcilev1.Reason) string {
	if lr := FromReason(r); lr != lifecycle.ReasonNone {
		return lr.String()
	}
	return ""
}

// ReasonFromName is the wire reason of a stored name (REASON_UNSPECIFIED
// for "" or an unknown name).
func ReasonFromName(s string) reconcilev1.Reason {
	lr, _ := lifecycle.ParseReason(s)
	return Reason(lr)
}
