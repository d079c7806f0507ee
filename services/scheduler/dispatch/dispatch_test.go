package dispatch

import (
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// The scheduler's reasons and the attempts' outcomes (libs/api/lifecycle)
// are the contract's, name for name.
func TestEnumsMatchTheContract(t *testing.T) {
	for r := trigger.None; r <= trigger.Requeue; r++ {
		if got := ReasonProto(r).String(); got != r.ProtoName() {
			t.Errorf("reason %s: contract %s, lifecycle %s", r, got, r.ProtoName())
		}
	}
	for name := range reconcilev1.Reason_value {
		if _, ok := lifecycle.ReasonFromProto(name); !ok && name != "REASON_UNSPECIFIED" {
			t.Errorf("the contract's %s is not a lifecycle.Reason", name)
		}
	}
	for name := range reconcilev1.Outcome_value {
		if _, ok := lifecycle.OutcomeFromProto(name); !ok && name != "OUTCOME_UNSPECIFIED" {
			t.Errorf("the contract's %s is not a lifecycle.Outcome", name)
		}
	}
	for o := lifecycle.OutcomeSuccess; o <= lifecycle.OutcomeTerminal; o++ {
		if _, ok := reconcilev1.Outcome_value[o.ProtoName()]; !ok {
			t.Errorf("lifecycle's %s is not in the contract", o.ProtoName())
		}
	}
}

func TestItemRoundTrip(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	it := Item{ResourceID: 7, ResourceUID: "u", TypeName: "Widget", TypeVersion: "v1", Reason: trigger.Manual, SchedulerEpoch: 3, DispatchID: "d", DispatchedAt: at}
	data, err := protoMarshal(it)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Decode(data)
	if err != nil || w.GetResourceId() != 7 || w.GetReason() != reconcilev1.Reason_REASON_MANUAL || w.GetSchedulerEpoch() != 3 ||
		w.GetDispatchId() != "d" || !w.GetDispatchedAt().AsTime().Equal(at) {
		t.Fatalf("round trip: %+v %v", w, err)
	}
}
