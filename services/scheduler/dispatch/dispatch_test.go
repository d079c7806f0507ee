package dispatch

import (
	"strings"
	"testing"
	"time"

	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// The scheduler's reasons are the contract's, number for number.
func TestReasonsMatchTheContract(t *testing.T) {
	for r := trigger.Generation; r <= trigger.Requeue; r++ {
		if got, want := reconcilev1.Reason(r).String(), "REASON_"+strings.ToUpper(r.String()); got != want {
			t.Errorf("reason %d: contract %s, scheduler %s", r, got, want)
		}
	}
	if n := len(reconcilev1.Reason_name); n != int(trigger.Requeue)+1 {
		t.Errorf("the contract has %d reasons, the scheduler %d", n, trigger.Requeue+1)
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
