package dispatch

import (
	"testing"
	"time"

	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

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
