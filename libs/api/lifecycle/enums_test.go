package lifecycle

import "testing"

func TestOutcomeNames(t *testing.T) {
	if OutcomeSuccess.String() != "success" || OutcomeTerminal.ProtoName() != "OUTCOME_TERMINAL" || Outcome(9).String() != "unspecified" {
		t.Error("outcome names")
	}
	for o := OutcomeSuccess; o <= OutcomeTerminal; o++ {
		if got, ok := OutcomeFromProto(o.ProtoName()); !ok || got != o {
			t.Errorf("OutcomeFromProto(%s) = %v %v", o.ProtoName(), got, ok)
		}
	}
	if _, ok := OutcomeFromProto("OUTCOME_UNSPECIFIED"); ok {
		t.Error("unspecified accepted")
	}
}

func TestReasonNames(t *testing.T) {
	if ReasonNone.ProtoName() != "REASON_UNSPECIFIED" || ReasonRequeue.ProtoName() != "REASON_REQUEUE" || Reason(42).String() != "unknown" {
		t.Error("reason names")
	}
	for r := ReasonGeneration; r <= LastReason; r++ {
		if got, ok := ReasonFromProto(r.ProtoName()); !ok || got != r {
			t.Errorf("ReasonFromProto(%s) = %v %v", r.ProtoName(), got, ok)
		}
		if got, ok := ParseReason(r.String()); !ok || got != r {
			t.Errorf("ParseReason(%s) = %v %v", r, got, ok)
		}
	}
}

func TestParsePropagation(t *testing.T) {
	for in, want := range map[string]Propagation{
		"": PropagationBackground, "background": PropagationBackground, "Background": PropagationBackground,
		"FOREGROUND": PropagationForeground, "orphan": PropagationOrphan, "Orphan": PropagationOrphan,
	} {
		if got, err := ParsePropagation(in); err != nil || got != want {
			t.Errorf("ParsePropagation(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"none", "cascade", " Orphan", "Delete"} {
		if _, err := ParsePropagation(bad); err == nil {
			t.Errorf("ParsePropagation(%q) accepted", bad)
		}
	}
	if PropagationBackground.Finalizer() != "" || PropagationForeground.Finalizer() != FinalizerForeground || PropagationOrphan.Finalizer() != FinalizerOrphan {
		t.Error("a policy's finalizer is not its own")
	}
}
