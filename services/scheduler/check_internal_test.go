package scheduler

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/leader"
	"github.com/no8s/no8s/services/internal/reconcilers"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/scheduler/dispatch"
)

// A work item found gone from the queue is dispatched again only once a
// read of the resource begun after that shows no attempt took it: a worker
// acks an item after its completion commits, so the item can be gone
// before the loop has heard of the attempt.
func TestItemFoundGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		// epoch is the lease epoch the read after the check finds (the
		// flight was dispatched at 3).
		epoch int64
		// observed is its observed generation (the spec is at 2).
		observed   int64
		redispatch bool
	}{
		{"taken and completed: its event not yet heard", 4, 2, false},
		{"lost or refused: no attempt took it", 3, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := testLoop(t)
			state := func(epoch, observed int64) *reconcilev1.ReconcileState {
				status := resource.StatusReady
				if observed < 2 {
					status = resource.StatusPending
				}
				return &reconcilev1.ReconcileState{ResourceId: 1, ResourceUid: "u1", Name: "w", ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
					Generation: 2, ObservedGeneration: observed, Status: status, LeaseEpoch: epoch, LastReconcileTime: timestamppb.Now()}
			}
			e := l.upsert(state(3, 1))
			e.flight = &flight{id: "d1", sent: true, checking: true, baseEpoch: 3, seq: 5}
			// A read of its state is in flight, begun before the check.
			l.fetching, l.reads, l.fetchRead = true, 1, 1

			if err := l.onResult(result{job: job{kind: jobCheck, id: 1, seq: 5, item: dispatch.Item{DispatchID: "d1"}}}); err != nil {
				t.Fatal(err)
			}
			if e.flight == nil || !e.flight.absent || len(l.pending) != 0 {
				t.Fatalf("the item found gone was dispatched again at once (flight %+v, %d jobs)", e.flight, len(l.pending))
			}
			if _, ok := l.fetch[1]; !ok {
				t.Fatal("no read of its state was asked for")
			}
			// The read begun before the check decides nothing.
			l.onFetched(fetchResult{ids: []int64{1}, states: []*reconcilev1.ReconcileState{state(3, 1)}})
			if e.flight == nil || len(l.pending) != 0 {
				t.Fatalf("a read begun before the check ended the flight (flight %+v, %d jobs)", e.flight, len(l.pending))
			}
			// The one begun after it does.
			delete(l.fetch, 1)
			l.fetching, l.reads, l.fetchRead = true, 2, 2
			l.onFetched(fetchResult{ids: []int64{1}, states: []*reconcilev1.ReconcileState{state(tc.epoch, tc.observed)}})
			if e.flight != nil && e.flight.id == "d1" {
				t.Fatalf("the read after the check left the flight waiting")
			}
			if !tc.redispatch {
				if len(l.pending) != 0 {
					t.Fatalf("an item its attempt took was dispatched again: %+v", l.pending)
				}
				return
			}
			if len(l.pending) != 1 || l.pending[0].kind != jobDispatch || l.pending[0].item.DispatchID == "d1" {
				t.Fatalf("a lost item was not dispatched again: %+v", l.pending)
			}
		})
	}
}

// An item still queued past the item lease is reported (condition
// ReconcilerNotResponding) only when no item of its type was taken within
// the item lease either: workers behind a backlog are not reported.
func TestItemStillQueued(t *testing.T) {
	for _, tc := range []struct {
		name string
		// taken is how long ago an item of the type was last taken; 0:
		// never in this term.
		taken time.Duration
		warn  bool
	}{
		{"workers behind a backlog", time.Second, false},
		{"nothing taken within the item lease", 31 * time.Second, true},
		{"nothing taken in this term", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := testLoop(t)
			e := l.upsert(&reconcilev1.ReconcileState{ResourceId: 1, ResourceUid: "u1", Name: "w", ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
				Generation: 2, ObservedGeneration: 1, Status: resource.StatusPending, LeaseEpoch: 3})
			e.flight = &flight{id: "d1", sent: true, checking: true, baseEpoch: 3, seq: 5}
			if tc.taken > 0 {
				l.started[reconcilers.TypeRef{Name: "Widget", Version: "v1"}] = time.Now().Add(-tc.taken)
			}
			if err := l.onResult(result{job: job{kind: jobCheck, id: 1, seq: 5, item: dispatch.Item{DispatchID: "d1"}}, present: true}); err != nil {
				t.Fatal(err)
			}
			warned := len(l.pending) == 1 && l.pending[0].kind == jobCondition &&
				l.pending[0].cond.GetReason() == resource.ReasonReconcilerNotResponding
			if warned != tc.warn || e.warned != tc.warn || (!tc.warn && len(l.pending) != 0) {
				t.Fatalf("warned %v (entry %v, jobs %+v), want %v", warned, e.warned, l.pending, tc.warn)
			}
			if e.flight == nil || e.flight.id != "d1" || e.flight.checking {
				t.Fatalf("the flight of a queued item changed: %+v", e.flight)
			}
		})
	}

	// An item found taken marks its type.
	l := testLoop(t)
	e := l.upsert(&reconcilev1.ReconcileState{ResourceId: 1, ResourceUid: "u1", Name: "w", ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
		Generation: 2, ObservedGeneration: 1, Status: resource.StatusReconciling, LeaseEpoch: 4, LeaseHolder: "w/1",
		LeaseExpiresAt: timestamppb.New(time.Now().Add(time.Minute))})
	e.flight = &flight{id: "d1", sent: true, baseEpoch: 3, seq: 5}
	l.evaluate(e, time.Now())
	if l.started[reconcilers.TypeRef{Name: "Widget", Version: "v1"}].IsZero() {
		t.Fatal("an item a worker took did not mark its type as making progress")
	}
}

// testLoop is a leader's loop of epoch 7 with the default configuration
// (an item lease of 30 s), its dispatchers not running: the jobs it asks
// for stay in its pending list.
func testLoop(t *testing.T) *loop {
	t.Helper()
	svc, err := New(Config{Holder: "test"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newLoop(svc, &leader.Term{Epoch: 7}, nil)
}
