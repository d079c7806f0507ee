package enumpb_test

import (
	"testing"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/proto/enumpb"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// Every protobuf value has its lifecycle enum, by name, both ways.
func TestEveryWireValueMapsBothWays(t *testing.T) {
	for v, name := range reconcilev1.Outcome_name {
		w := reconcilev1.Outcome(v)
		if w == reconcilev1.Outcome_OUTCOME_UNSPECIFIED {
			continue
		}
		o := enumpb.FromOutcome(w)
		if o == lifecycle.OutcomeUnspecified || enumpb.Outcome(o) != w {
			t.Errorf("%s: maps to %v and back to %v", name, o, enumpb.Outcome(o))
		}
	}
	for v, name := range reconcilev1.Reason_name {
		w := reconcilev1.Reason(v)
		if w == reconcilev1.Reason_REASON_UNSPECIFIED {
			if enumpb.ReasonName(w) != "" || enumpb.ReasonFromName("") != w {
				t.Errorf("REASON_UNSPECIFIED must be the empty name")
			}
			continue
		}
		r := enumpb.FromReason(w)
		if r == lifecycle.ReasonNone || enumpb.Reason(r) != w || enumpb.ReasonFromName(enumpb.ReasonName(w)) != w {
			t.Errorf("%s: maps to %v and back to %v", name, r, enumpb.Reason(r))
		}
	}
}
