package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// testActorLimitsLeasesAndCompletions: a reconciler identity's limits
// (storage.Actor) are checked on the row the write locks: a lease on a
// type it is not issued for, and a completion of another reconciler's
// lease, are refused with ErrNotPermitted and write nothing (the resource's
// revision and lease unchanged, no history); within its limits it leases
// and completes as any caller.
func testActorLimitsLeasesAndCompletions(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "one")
	other := &storage.Actor{Name: "evil", Types: []string{"Other/v1"}}
	widgets := &storage.Actor{Name: "widgets", Types: []string{"Other/v1", "Widget/v1"}}
	stored := func() *resource.Resource {
		t.Helper()
		got, err := s.GetResource(ctx, storage.ResourceKey{ID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	_, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "evil/1", Actor: other})
	wantErr(t, err, storage.ErrNotPermitted)
	if got := stored(); got.ResourceVersion != r.ResourceVersion || got.Status != r.Status {
		t.Fatalf("a refused lease wrote: version %d → %d, status %s", r.ResourceVersion, got.ResourceVersion, got.Status)
	}

	l, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "widgets/0", Actor: widgets})
	if err != nil {
		t.Fatalf("a lease within the actor's limits: %v", err)
	}
	before := stored()
	for name, actor := range map[string]*storage.Actor{"another reconciler": {Name: "evil", Types: []string{"Widget/v1"}}, "a type not issued": other} {
		_, err = s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess,
			StatusMessage: "PWNED", Actor: actor})
		wantErr(t, err, storage.ErrNotPermitted)
		if got := stored(); got.ResourceVersion != before.ResourceVersion || got.StatusMessage == "PWNED" {
			t.Fatalf("a completion by %s wrote: %+v", name, got)
		}
	}
	if h, err := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: r.ID}); err != nil || len(h) != 0 {
		t.Fatalf("history after refused completions: %+v %v", h, err)
	}
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess, Actor: widgets})
	if got := stored(); got.Status != resource.StatusReady {
		t.Fatalf("after the holder's completion: status %s", got.Status)
	}
}

func testLeaseExclusionAndFencing(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "one")

	a := acquire(t, s, r.ID, "worker-a")
	if a.Epoch != 1 || a.Resource.Status != resource.StatusReconciling || a.Policy.ResyncSeconds != resource.DefaultResyncSeconds {
		t.Fatalf("first lease: epoch %d status %s policy %+v", a.Epoch, a.Resource.Status, a.Policy)
	}
	if !a.ExpiresAt.After(time.Now().Add(20*time.Second)) || a.ExpiresAt.After(time.Now().Add(40*time.Second)) {
		t.Fatalf("default lease should be about 30s, expires %v", a.ExpiresAt)
	}
	// Another holder is refused while the lease runs.
	_, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "worker-b"})
	wantErr(t, err, storage.ErrLeaseHeld)
	// Renewal with the current epoch works; with another it is refused.
	if _, err := s.RenewLease(ctx, r.ID, a.Epoch, 10*time.Second); err != nil {
		t.Fatalf("renew: %v", err)
	}
	_, err = s.RenewLease(ctx, r.ID, a.Epoch+1, 10*time.Second)
	wantErr(t, err, storage.ErrStaleEpoch)

	// a stalls past its lease (renewed to one second); b takes over with a
	// higher epoch.
	short, err := s.RenewLease(ctx, r.ID, a.Epoch, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitPast(t, short)
	b := acquire(t, s, r.ID, "worker-b")
	if b.Epoch != a.Epoch+1 {
		t.Fatalf("takeover epoch %d, want %d", b.Epoch, a.Epoch+1)
	}
	// a's late write and renewal are refused for their stale epoch.
	_, err = s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: a.Epoch, Outcome: lifecycle.OutcomeSuccess})
	wantErr(t, err, storage.ErrStaleEpoch)
	_, err = s.RenewLease(ctx, r.ID, a.Epoch, 10*time.Second)
	wantErr(t, err, storage.ErrStaleEpoch)
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: b.Epoch, Outcome: lifecycle.OutcomeSuccess})
	// A completed lease cannot complete twice.
	_, err = s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: b.Epoch, Outcome: lifecycle.OutcomeSuccess})
	wantErr(t, err, storage.ErrStaleEpoch)

	// Completion after expiry is accepted when nobody took the lease.
	c, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "worker-c", Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitPast(t, c.ExpiresAt)
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: c.Epoch, Outcome: lifecycle.OutcomeSuccess})

	// Exactly one history row per accepted completion, never the stale one.
	h, err := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: r.ID})
	if err != nil || len(h) != 2 || h[0].LeaseEpoch != c.Epoch || h[1].LeaseEpoch != b.Epoch || h[1].Holder != "worker-b" ||
		h[1].StartedAt == nil || h[1].StartedAt.After(h[1].ReconcileTime) {
		t.Fatalf("history: %+v %v", h, err)
	}
	// The epoch never goes down.
	if d := acquire(t, s, r.ID, "worker-a"); d.Epoch != c.Epoch+1 {
		t.Fatalf("epoch %d after %d", d.Epoch, c.Epoch)
	}
	_, err = s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: 999999, Holder: "x"})
	wantErr(t, err, storage.ErrNotFound)
}

func testCompleteWritesEverythingInOneEvent(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "one")
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, SetAnnotations: true,
		Annotations: map[string]string{resource.AnnotationOperation: resource.OperationReconcile, "keep": "me"}}); err != nil {
		t.Fatal(err)
	}
	before := events(t, el, r.ID)

	l := acquire(t, s, r.ID, "w")
	started := time.Now().Add(-1500 * time.Millisecond).UTC()
	res := complete(t, s, storage.CompleteReconcileRequest{
		ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess,
		Conditions: []resource.Condition{
			{Type: "DatabaseExists", Status: "True", Reason: "Created"},
			{Type: "RoleExists", Status: "False", Reason: "Pending"},
		},
		Outputs:           []byte(`{"host": "db", "port": 5432}`),
		AddFinalizers:     []string{"reconciler.no8s.io/widget"},
		RemoveAnnotations: []string{resource.AnnotationOperation},
		History:           storage.HistoryEntry{ResourcesCreated: 2, StartedAt: &started, Reason: "pending"},
	})
	got := res.Resource
	if got.Status != resource.StatusReady || got.ObservedGeneration != 1 || got.Phase != resource.PhaseProgressing ||
		string(got.Outputs) != `{"host":"db","port":5432}` || len(got.Finalizers) != 1 || got.LastReconcileTime == nil ||
		got.Annotations["keep"] != "me" || got.Annotations[resource.AnnotationOperation] != "" || got.StatusMessage == "" {
		t.Fatalf("after success: %+v", got)
	}
	t1 := got.Conditions[0].LastTransitionTime
	if len(got.Conditions) != 2 || t1.IsZero() || got.Conditions[0].ObservedGeneration != 1 {
		t.Fatalf("conditions: %+v", got.Conditions)
	}
	// The stored document equals the answer.
	stored, err := s.GetResource(ctx, storage.ResourceKey{ID: r.ID})
	if err != nil || stored.ResourceVersion != got.ResourceVersion || stored.Phase != got.Phase || len(stored.Conditions) != 2 {
		t.Fatalf("stored %+v %v", stored, err)
	}
	// Acquire (pending → reconciling) is one MODIFIED, the completion one RECONCILED.
	after := events(t, el, r.ID)
	if len(after) != len(before)+2 || after[len(after)-2] != "MODIFIED" || after[len(after)-1] != "RECONCILED" {
		t.Fatalf("events %v after %v", after, before)
	}
	h, err := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: r.ID})
	if err != nil || len(h) != 1 || !h[0].Success || h[0].Generation != 1 || h[0].ResourcesCreated != 2 || h[0].Reason != "pending" ||
		h[0].DurationMS < 1000 || h[0].Phase != "completed" || h[0].StartedAt == nil {
		t.Fatalf("history %+v %v", h, err)
	}

	// Second attempt: same status keeps the transition time; a changed one
	// moves it; a condition not named is kept; all True makes the phase Ready.
	l = acquire(t, s, r.ID, "w")
	got = complete(t, s, storage.CompleteReconcileRequest{
		ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess,
		Conditions: []resource.Condition{{Type: "RoleExists", Status: "True", Reason: "Created"}},
	}).Resource
	if got.Conditions[0].LastTransitionTime != t1 || !got.Conditions[1].LastTransitionTime.After(t1) || got.Phase != resource.PhaseReady {
		t.Fatalf("transition times: %+v phase %s", got.Conditions, got.Phase)
	}
	// Outputs stay when not given.
	if string(got.Outputs) != `{"host":"db","port":5432}` {
		t.Fatalf("outputs %s", got.Outputs)
	}

	// Bad results are refused and write nothing.
	l = acquire(t, s, r.ID, "w")
	for _, bad := range []storage.CompleteReconcileRequest{
		{Outcome: lifecycle.OutcomeUnspecified},
		{Outcome: lifecycle.OutcomeSuccess, Conditions: []resource.Condition{{Type: "A", Status: "Maybe"}}},
		{Outcome: lifecycle.OutcomeSuccess, Conditions: []resource.Condition{{Type: "A", Status: "True"}, {Type: "A", Status: "True"}}},
		{Outcome: lifecycle.OutcomeSuccess, Outputs: []byte(`[1]`)},
	} {
		bad.ResourceID, bad.LeaseEpoch = r.ID, l.Epoch
		_, err := s.CompleteReconcile(ctx, bad)
		wantErr(t, err, storage.ErrInvalid)
	}
}

func testFailuresTerminalRequeue(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "one")
	state := func() storage.ReconcileState {
		t.Helper()
		res, err := s.ListReconcileState(ctx, storage.ListReconcileStateRequest{IDs: []int64{r.ID}})
		if err != nil || len(res.States) != 1 {
			t.Fatalf("state: %+v %v", res, err)
		}
		return res.States[0]
	}
	attempt := func(o lifecycle.Outcome, msg string, requeue time.Duration) *storage.CompleteResult {
		t.Helper()
		l := acquire(t, s, r.ID, "w")
		return complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: o, StatusMessage: msg, RequeueAfter: requeue})
	}

	res := attempt(lifecycle.OutcomeError, "boom", 0)
	if res.Resource.Status != resource.StatusFailed || res.Resource.StatusMessage != "boom" || res.Resource.ObservedGeneration != 0 {
		t.Fatalf("after error: %+v", res.Resource)
	}
	attempt(lifecycle.OutcomeError, "boom", 0)
	if st := state(); st.Failures != 2 || st.Status != resource.StatusFailed || st.LastReconcileTime == nil || st.LeaseHolder != "" {
		t.Fatalf("two failures: %+v", st)
	}
	h, _ := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: r.ID})
	if len(h) != 2 || h[0].Success || h[0].ErrorMessage != "boom" || h[0].Phase != "failed" {
		t.Fatalf("failure history %+v", h)
	}
	// A spec change resets the count.
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":2}`)}); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Failures != 0 || st.Generation != 2 {
		t.Fatalf("after spec change: %+v", st)
	}
	// Terminal: counted, and remembered for this generation.
	attempt(lifecycle.OutcomeTerminal, "bad spec", 0)
	if st := state(); st.Failures != 1 || st.TerminalGeneration != 2 {
		t.Fatalf("terminal: %+v", st)
	}
	// Requeue: no failure counted, requeue_at set, status reconciling.
	res = attempt(lifecycle.OutcomeRequeue, "", 5*time.Second)
	st := state()
	if st.Failures != 1 || st.RequeueAt == nil || time.Until(*st.RequeueAt) < 3*time.Second || res.Resource.Status != resource.StatusReconciling {
		t.Fatalf("requeue: %+v %s", st, res.Resource.Status)
	}
	// The next acquisition consumes the requeue; success resets everything.
	res = attempt(lifecycle.OutcomeSuccess, "", 0)
	if st := state(); st.Failures != 0 || st.TerminalGeneration != 0 || st.RequeueAt != nil || st.ObservedGeneration != 2 || res.Resource.Status != resource.StatusReady {
		t.Fatalf("success: %+v", st)
	}
	// Success with requeue-after: ready and come back later.
	attempt(lifecycle.OutcomeSuccess, "", time.Minute)
	if st := state(); st.Status != resource.StatusReady || st.RequeueAt == nil {
		t.Fatalf("success with requeue: %+v", st)
	}

	// A manual trigger is recorded (one MODIFIED event) and consumed by the
	// next acquisition.
	before, _ := s.GetResource(ctx, storage.ResourceKey{ID: r.ID})
	trig, err := s.RequestReconcile(ctx, r.ID)
	if err != nil || trig.ResourceVersion <= before.ResourceVersion {
		t.Fatalf("request reconcile: %+v %v", trig, err)
	}
	if st := state(); st.ReconcileRequestedAt == nil {
		t.Fatalf("trigger not recorded: %+v", st)
	}
	acquire(t, s, r.ID, "w")
	if st := state(); st.ReconcileRequestedAt != nil || st.LeaseHolder != "w" || st.LeaseExpiresAt == nil {
		t.Fatalf("trigger not consumed: %+v", st)
	}
	_, err = s.RequestReconcile(ctx, 999999)
	wantErr(t, err, storage.ErrNotFound)

	// A deletion request drops a pending requeue of the live resource (a
	// requeue the cleanup asks for is honoured again).
	r2 := mustCreate(t, s, "two", "example.com/keep")
	l := acquire(t, s, r2.ID, "w")
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r2.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeRequeue, RequeueAfter: time.Hour})
	if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r2.ID}); err != nil {
		t.Fatal(err)
	}
	res2, err := s.ListReconcileState(ctx, storage.ListReconcileStateRequest{IDs: []int64{r2.ID}})
	if err != nil || len(res2.States) != 1 || res2.States[0].RequeueAt != nil || !res2.States[0].Deleting {
		t.Fatalf("deletion after a requeue: %+v %v", res2, err)
	}
}

func testHistoryBoundAndPaging(t *testing.T, open Opener) {
	s := open(t, storage.Options{HistoryLimit: 3}).Store
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "one")
	for range 5 {
		l := acquire(t, s, r.ID, "w")
		complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess})
	}
	h, err := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: r.ID})
	if err != nil || len(h) != 3 || h[0].LeaseEpoch != 5 || h[2].LeaseEpoch != 3 {
		t.Fatalf("bounded history: %+v %v", h, err)
	}
	page, err := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: r.ID, Limit: 1, BeforeID: h[0].ID})
	if err != nil || len(page) != 1 || page[0].ID != h[1].ID {
		t.Fatalf("page: %+v %v", page, err)
	}
	_, err = s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: 999999})
	wantErr(t, err, storage.ErrNotFound)
	_, err = s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: r.ID, Limit: 501})
	wantErr(t, err, storage.ErrInvalid)
}

func testDeletionCleanupPurges(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	own, ext := "reconciler.no8s.io/widget", "example.com/external"

	// Own finalizer only: a successful cleanup that removes it purges.
	r := mustCreate(t, s, "one", own)
	if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID}); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, s, r.ID, "w")
	if l.Resource.Status != resource.StatusDeleting {
		t.Fatalf("acquire changed a deleting status: %s", l.Resource.Status)
	}
	// A failed cleanup keeps it deleting and counts the failure.
	res := complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeError, StatusMessage: "cleanup failed"})
	if res.Purged || res.Resource.Status != resource.StatusDeleting || res.Resource.Phase != resource.PhaseTerminating {
		t.Fatalf("failed cleanup: %+v", res.Resource)
	}
	l = acquire(t, s, r.ID, "w")
	res = complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess,
		RemoveFinalizers: []string{own}, AddFinalizers: []string{"example.com/late"}})
	if !res.Purged {
		t.Fatalf("not purged: %+v", res.Resource)
	}
	if ev := events(t, el, r.ID); ev[len(ev)-1] != "PURGED" || ev[len(ev)-2] != "MODIFIED" {
		t.Fatalf("events %v", ev)
	}
	if _, err := s.GetResource(ctx, storage.ResourceKey{ID: r.ID}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("purged resource still readable: %v", err)
	}
	if h, err := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: r.ID}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("history outlives its resource: %+v %v", h, err)
	}

	// An external finalizer keeps it deleting after cleanup.
	r2 := mustCreate(t, s, "two", own, ext)
	if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r2.ID}); err != nil {
		t.Fatal(err)
	}
	l = acquire(t, s, r2.ID, "w")
	res = complete(t, s, storage.CompleteReconcileRequest{ResourceID: r2.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess, RemoveFinalizers: []string{own}})
	if res.Purged || res.Resource.Status != resource.StatusDeleting || len(res.Resource.Finalizers) != 1 {
		t.Fatalf("external finalizer: %+v", res.Resource)
	}
	if ev := events(t, el, r2.ID); ev[len(ev)-1] != "RECONCILED" {
		t.Fatalf("events %v", ev)
	}
	fin, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r2.ID, Remove: []string{ext}})
	if err != nil || !fin.Purged {
		t.Fatalf("removing the external finalizer: %+v %v", fin, err)
	}
}

func testSchedulerLeadershipAndFencing(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "one")

	a, err := s.BecomeScheduler(ctx, "sched-a", time.Second, 0)
	if err != nil || !a.Leader || a.Epoch != 1 {
		t.Fatalf("first campaign: %+v %v", a, err)
	}
	b, err := s.BecomeScheduler(ctx, "sched-b", 5*time.Second, 0)
	if err != nil || b.Leader || b.Holder != "sched-a" || b.Epoch != 1 {
		t.Fatalf("standby campaign: %+v %v", b, err)
	}
	renewed, err := s.BecomeScheduler(ctx, "sched-a", time.Second, a.Epoch)
	if err != nil || !renewed.Leader || renewed.Epoch != a.Epoch {
		t.Fatalf("renew: %+v %v", renewed, err)
	}
	if err := storage.RecordDispatch(ctx, s, a.Epoch, r.ID, "d1"); err != nil {
		t.Fatalf("record dispatch: %v", err)
	}
	wantErr(t, storage.RecordDispatch(ctx, s, a.Epoch, 999999, "d1"), storage.ErrNotFound)
	// Several in one call: the missing ones named, the others recorded;
	// a resource named twice or an empty dispatch id is refused whole.
	r2 := mustCreate(t, s, "two")
	missing, err := s.RecordDispatches(ctx, a.Epoch, []storage.Dispatch{{ResourceID: r.ID, DispatchID: "b1"}, {ResourceID: 999999, DispatchID: "b2"}, {ResourceID: r2.ID, DispatchID: "b3"}})
	if err != nil || len(missing) != 1 || missing[0] != 999999 {
		t.Fatalf("batch: missing %v, err %v", missing, err)
	}
	for id, want := range map[int64]string{r.ID: "b1", r2.ID: "b3"} {
		if st := reconcileState(t, s, id); st.DispatchID != want || st.DispatchedAt == nil {
			t.Fatalf("resource %d: dispatch %q at %v, want %q", id, st.DispatchID, st.DispatchedAt, want)
		}
	}
	_, err = s.RecordDispatches(ctx, a.Epoch, []storage.Dispatch{{ResourceID: r.ID, DispatchID: "b4"}, {ResourceID: r.ID, DispatchID: "b5"}})
	wantErr(t, err, storage.ErrInvalid)
	_, err = s.RecordDispatches(ctx, a.Epoch, []storage.Dispatch{{ResourceID: r.ID, DispatchID: ""}})
	wantErr(t, err, storage.ErrInvalid)
	if st := reconcileState(t, s, r.ID); st.DispatchID != "b1" {
		t.Fatalf("a refused batch wrote dispatch %q", st.DispatchID)
	}
	if err := storage.RecordDispatch(ctx, s, a.Epoch, r.ID, "d1"); err != nil {
		t.Fatal(err)
	}

	// a pauses past its lease: b takes over with epoch + 1.
	waitPast(t, renewed.ExpiresAt)
	b, err = s.BecomeScheduler(ctx, "sched-b", 5*time.Second, 0)
	if err != nil || !b.Leader || b.Epoch != a.Epoch+1 {
		t.Fatalf("takeover: %+v %v", b, err)
	}
	// a resumes: its renewal, dispatch records and conditions are refused.
	again, err := s.BecomeScheduler(ctx, "sched-a", 5*time.Second, a.Epoch)
	if err != nil || again.Leader || again.Holder != "sched-b" {
		t.Fatalf("deposed renewal: %+v %v", again, err)
	}
	wantErr(t, storage.RecordDispatch(ctx, s, a.Epoch, r.ID, "d2"), storage.ErrStaleEpoch)
	_, err = s.RecordDispatches(ctx, a.Epoch, []storage.Dispatch{{ResourceID: r.ID, DispatchID: "d2"}, {ResourceID: r2.ID, DispatchID: "d2"}})
	wantErr(t, err, storage.ErrStaleEpoch)
	if st := reconcileState(t, s, r2.ID); st.DispatchID != "b3" {
		t.Fatalf("a stale batch wrote dispatch %q", st.DispatchID)
	}
	_, err = s.SetCondition(ctx, a.Epoch, r.ID, resource.Condition{Type: resource.ConditionReconcilerAvailable, Status: "False"})
	wantErr(t, err, storage.ErrStaleEpoch)
	// An item a dispatched before is refused: a deposed epoch.
	_, err = s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "w", SchedulerEpoch: a.Epoch, DispatchID: "d1"})
	wantErr(t, err, storage.ErrStaleDispatch)

	// b's dispatch supersedes older ones of the current epoch too.
	if err := storage.RecordDispatch(ctx, s, b.Epoch, r.ID, "d3"); err != nil {
		t.Fatal(err)
	}
	_, err = s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "w", SchedulerEpoch: b.Epoch, DispatchID: "d-old"})
	wantErr(t, err, storage.ErrStaleDispatch)
	if _, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "w", SchedulerEpoch: b.Epoch, DispatchID: "d3"}); err != nil {
		t.Fatalf("current dispatch refused: %v", err)
	}

	// A leader whose lease expired cannot dispatch until it renews; it may
	// renew while nobody took over.
	short, err := s.BecomeScheduler(ctx, "sched-b", time.Second, b.Epoch)
	if err != nil || !short.Leader {
		t.Fatalf("renew: %+v %v", short, err)
	}
	waitPast(t, short.ExpiresAt)
	wantErr(t, storage.RecordDispatch(ctx, s, b.Epoch, r.ID, "d4"), storage.ErrStaleEpoch)
	if re, err := s.BecomeScheduler(ctx, "sched-b", 5*time.Second, b.Epoch); err != nil || !re.Leader || re.Epoch != b.Epoch {
		t.Fatalf("renew after expiry: %+v %v", re, err)
	}
	// A restarted process with the same name takes over with a new epoch.
	re, err := s.BecomeScheduler(ctx, "sched-b", 5*time.Second, 0)
	if err != nil || !re.Leader || re.Epoch != b.Epoch+1 {
		t.Fatalf("restart: %+v %v", re, err)
	}
	// A graceful stop releases the lease: a standby takes over at once.
	if err := s.ReleaseScheduler(ctx, "sched-b", re.Epoch-1); err != nil { // a stale epoch: nothing happens
		t.Fatal(err)
	}
	if c, _ := s.BecomeScheduler(ctx, "sched-c", 5*time.Second, 0); c.Leader {
		t.Fatal("released with a stale epoch")
	}
	if err := s.ReleaseScheduler(ctx, "sched-b", re.Epoch); err != nil {
		t.Fatal(err)
	}
	wantErr(t, storage.RecordDispatch(ctx, s, re.Epoch, r.ID, "d5"), storage.ErrStaleEpoch)
	if c, err := s.BecomeScheduler(ctx, "sched-c", 5*time.Second, 0); err != nil || !c.Leader || c.Epoch != re.Epoch+1 {
		t.Fatalf("takeover after release: %+v %v", c, err)
	}
}

func testSetConditionAndReconcilerAvailable(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "one")
	lead, err := s.BecomeScheduler(ctx, "sched", 5*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	cond := resource.Condition{Type: resource.ConditionReconcilerAvailable, Status: "False", Reason: "NoLiveReconciler", Message: "none"}
	got, err := s.SetCondition(ctx, lead.Epoch, r.ID, cond)
	if err != nil || len(got.Conditions) != 1 || got.Conditions[0].ObservedGeneration != 1 || got.Phase != resource.PhaseProgressing {
		t.Fatalf("set condition: %+v %v", got, err)
	}
	n := len(events(t, el, r.ID))
	// The same condition again writes nothing.
	if _, err := s.SetCondition(ctx, lead.Epoch, r.ID, cond); err != nil {
		t.Fatal(err)
	}
	if len(events(t, el, r.ID)) != n {
		t.Fatal("an unchanged condition wrote an event")
	}
	// A changed condition records its Events with it; an unchanged one
	// records none.
	warn := storage.EventInput{Type: "Warning", Reason: "ReconcilerNotResponding", Message: "nobody leased the work", Source: "scheduler"}
	cond2 := resource.Condition{Type: resource.ConditionReconcilerAvailable, Status: "False", Reason: "ReconcilerNotResponding", Message: "nobody leased the work"}
	for range 2 {
		if _, err := s.SetCondition(ctx, lead.Epoch, r.ID, cond2, warn); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.ListEvents(ctx, storage.ListEventsRequest{ResourceID: r.ID})
	if err != nil || len(recs) != 1 || recs[0].Reason != warn.Reason || recs[0].Type != warn.Type || recs[0].Count != 1 || recs[0].Source != "scheduler" {
		t.Fatalf("events recorded with the condition: %+v %v", recs, err)
	}
	if _, err := s.SetCondition(ctx, lead.Epoch, r.ID, cond2, storage.EventInput{Type: "Bogus", Reason: "x"}); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("an invalid event with a condition: %v", err)
	}
	res, err := s.ListReconcileState(ctx, storage.ListReconcileStateRequest{})
	if err != nil || len(res.States) != 1 || !res.States[0].ReconcilerUnavailable {
		t.Fatalf("state: %+v %v", res, err)
	}
	// A worker acquiring shows that a reconciler is live again.
	l := acquire(t, s, r.ID, "w")
	if c := l.Resource.Conditions[0]; c.Status != "True" {
		t.Fatalf("ReconcilerAvailable after acquire: %+v", c)
	}
	res, _ = s.ListReconcileState(ctx, storage.ListReconcileStateRequest{})
	if res.States[0].ReconcilerUnavailable {
		t.Fatal("still unavailable after acquire")
	}
}

func testReconcilePolicy(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	typ, err := s.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(schemaJSON),
		ReconcilePolicy: resource.ReconcilePolicy{ResyncSeconds: 5}})
	if err != nil {
		t.Fatal(err)
	}
	want := resource.ReconcilePolicy{ResyncSeconds: 5, BackoffBaseSeconds: 60, BackoffMaxSeconds: 61440, TimeoutSeconds: 300}
	if typ.ReconcilePolicy != want {
		t.Fatalf("policy %+v, want %+v", typ.ReconcilePolicy, want)
	}
	b, _ := json.Marshal(typ)
	if !json.Valid(b) || !strings.Contains(string(b), `"reconcile_policy":{"resync_seconds":5,"backoff_base_seconds":60`) {
		t.Fatalf("type document %s", b)
	}
	// An update without a policy keeps it; with one replaces it.
	desc := "d"
	up, err := s.UpdateType(ctx, storage.UpdateTypeRequest{ID: typ.ID, Description: &desc})
	if err != nil || up.ReconcilePolicy != want {
		t.Fatalf("update keeps policy: %+v %v", up, err)
	}
	up, err = s.UpdateType(ctx, storage.UpdateTypeRequest{ID: typ.ID, ReconcilePolicy: &resource.ReconcilePolicy{BackoffBaseSeconds: 1, BackoffMaxSeconds: 4}})
	if err != nil || up.ReconcilePolicy.BackoffBaseSeconds != 1 || up.ReconcilePolicy.ResyncSeconds != 300 || up.ResourceVersion <= typ.ResourceVersion {
		t.Fatalf("update policy: %+v %v", up, err)
	}
	for _, bad := range []resource.ReconcilePolicy{
		{ResyncSeconds: -1},
		{BackoffBaseSeconds: 10, BackoffMaxSeconds: 5},
		{TimeoutSeconds: 3601},
	} {
		_, err := s.UpdateType(ctx, storage.UpdateTypeRequest{ID: typ.ID, ReconcilePolicy: &bad})
		wantErr(t, err, storage.ErrInvalid)
	}
}

// A failure observes its generation when the reconciler says so (seed 004);
// a partial failure while serving is phase Degraded (seed 003), stays
// Degraded through a new attempt, and a delete request makes it Terminating.
func testCompletionObservedAndDegraded(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "partial", "keep.example.com/x")

	a := acquire(t, s, r.ID, "worker-a")
	got := complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: a.Epoch, Outcome: lifecycle.OutcomeError, StatusMessage: "boom"}).Resource
	if got.ObservedGeneration != 0 || got.Phase != resource.PhaseProgressing {
		t.Fatalf("an error without observed: observed_generation %d phase %s", got.ObservedGeneration, got.Phase)
	}
	b := acquire(t, s, r.ID, "worker-a")
	got = complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: b.Epoch, Outcome: lifecycle.OutcomeError,
		StatusMessage: "1 of 2 relays", Observed: true, Degraded: true}).Resource
	if got.ObservedGeneration != r.Generation || got.Phase != resource.PhaseDegraded || got.Status != resource.StatusFailed {
		t.Fatalf("degraded: observed_generation %d phase %s status %s", got.ObservedGeneration, got.Phase, got.Status)
	}
	c := acquire(t, s, r.ID, "worker-a")
	if c.Resource.Phase != resource.PhaseDegraded {
		t.Fatalf("phase while the next attempt runs: %s", c.Resource.Phase)
	}
	got = complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: c.Epoch, Outcome: lifecycle.OutcomeSuccess,
		Conditions: []resource.Condition{{Type: "Ready", Status: resource.ConditionTrue}}}).Resource
	if got.Phase != resource.PhaseReady {
		t.Fatalf("after a success: phase %s", got.Phase)
	}
	d := acquire(t, s, r.ID, "worker-a")
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: d.Epoch, Outcome: lifecycle.OutcomeError, Degraded: true})
	del, err := s.DeleteResource(t.Context(), storage.DeleteResourceRequest{ID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	if del.Resource.Phase != resource.PhaseTerminating {
		t.Fatalf("deleting: phase %s", del.Resource.Phase)
	}
}

// A reconciler's result that PostgreSQL cannot hold is refused with its
// path, not a database error: nothing is written and the lease stays.
func testCompletionTextRefused(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "texts")
	a := acquire(t, s, r.ID, "worker-a")
	for _, req := range []storage.CompleteReconcileRequest{
		{StatusMessage: "a\x00b"},
		{Conditions: []resource.Condition{{Type: "Ready", Status: resource.ConditionFalse, Message: "\x00"}}},
		{Conditions: []resource.Condition{{Type: "Ready", Status: resource.ConditionFalse, Reason: "bad\xff"}}},
		{Outputs: []byte(`{"url":"x\u0000"}`)},
		{Outputs: []byte(`{"n":1e400}`)},
	} {
		req.ResourceID, req.LeaseEpoch, req.Outcome = r.ID, a.Epoch, lifecycle.OutcomeError
		_, err := s.CompleteReconcile(t.Context(), req)
		if pe := storeErr(err); pe == nil || !errors.Is(err, storage.ErrInvalid) || len(pe.Fields) == 0 {
			t.Errorf("%+v: error %v", req, err)
		}
	}
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: a.Epoch, Outcome: lifecycle.OutcomeSuccess})
}

// testCompletionDependencies: the dependencies a completion reports come
// back with the resource's reconcile state (with its namespace), the next
// completion replaces them, and invalid ones are refused with their path,
// writing nothing.
func testCompletionDependencies(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "referrer")
	if st := reconcileState(t, s, r.ID); st.Namespace != r.Namespace || len(st.Dependencies) != 0 {
		t.Fatalf("before any completion: namespace %q dependencies %+v", st.Namespace, st.Dependencies)
	}
	deps := []storage.Dependency{
		{TypeName: "Secret", TypeVersion: "v1", Namespace: r.Namespace, Name: "db-password", Wait: true},
		{TypeName: "Widget", TypeVersion: "v1", Namespace: "other", Name: "peer"},
	}
	a := acquire(t, s, r.ID, "worker-a")
	bad := storage.MaxDependencies + 1
	for _, d := range [][]storage.Dependency{
		{{TypeName: "", TypeVersion: "v1", Namespace: "default", Name: "x"}},
		{{TypeName: "Secret", TypeVersion: "one", Namespace: "default", Name: "x"}},
		{{TypeName: "Secret", TypeVersion: "v1", Namespace: "Not_A_Label", Name: "x"}},
		{{TypeName: "Secret", TypeVersion: "v1", Namespace: "default", Name: "a\x00b"}},
		make([]storage.Dependency, bad),
	} {
		for i := range d {
			if d[i].TypeName == "" && len(d) == bad {
				d[i] = storage.Dependency{TypeName: "Secret", TypeVersion: "v1", Namespace: "default", Name: fmt.Sprintf("s-%d", i)}
			}
		}
		_, err := s.CompleteReconcile(t.Context(), storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: a.Epoch,
			Outcome: lifecycle.OutcomeSuccess, Dependencies: d})
		if pe := storeErr(err); pe == nil || !errors.Is(err, storage.ErrInvalid) || len(pe.Fields) == 0 {
			t.Errorf("%d dependencies, the first %+v: error %v", len(d), d[0], err)
		}
	}
	if st := reconcileState(t, s, r.ID); len(st.Dependencies) != 0 || st.LeaseHolder != "worker-a" {
		t.Fatalf("a refused completion wrote: dependencies %+v, lease holder %q", st.Dependencies, st.LeaseHolder)
	}
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: a.Epoch, Outcome: lifecycle.OutcomeTerminal, Dependencies: deps})
	if st := reconcileState(t, s, r.ID); !slices.Equal(st.Dependencies, deps) || st.Namespace != r.Namespace {
		t.Fatalf("dependencies %+v in %q, want %+v", st.Dependencies, st.Namespace, deps)
	}
	b := acquire(t, s, r.ID, "worker-a")
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: b.Epoch, Outcome: lifecycle.OutcomeSuccess, Dependencies: deps[1:]})
	if st := reconcileState(t, s, r.ID); !slices.Equal(st.Dependencies, deps[1:]) {
		t.Fatalf("replaced: %+v, want %+v", st.Dependencies, deps[1:])
	}
	c := acquire(t, s, r.ID, "worker-a")
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: c.Epoch, Outcome: lifecycle.OutcomeSuccess})
	if st := reconcileState(t, s, r.ID); len(st.Dependencies) != 0 {
		t.Fatalf("an attempt that names none: %+v", st.Dependencies)
	}
}

// testLeaseRevision: acquiring a lease records the relay's published
// revision then, which the reconcile state returns until the next
// acquisition.
func testLeaseRevision(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "leased")
	a := acquire(t, s, r.ID, "worker-a")
	if st := reconcileState(t, s, r.ID); st.LeaseRevision != 0 || st.LeaseEpoch != a.Epoch {
		t.Fatalf("nothing published yet: lease revision %d (epoch %d)", st.LeaseRevision, st.LeaseEpoch)
	}
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: a.Epoch, Outcome: lifecycle.OutcomeSuccess})
	other := mustCreate(t, s, "other")
	lock, epoch, _ := leadRelay(t, el)
	defer lock.Release()
	if err := el.AdvanceCursor(t.Context(), epoch, other.ResourceVersion, other.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	b := acquire(t, s, r.ID, "worker-a")
	if st := reconcileState(t, s, r.ID); st.LeaseRevision != other.ResourceVersion || st.LeaseEpoch != b.Epoch {
		t.Fatalf("lease revision %d at epoch %d, want %d (published when acquired)", st.LeaseRevision, st.LeaseEpoch, other.ResourceVersion)
	}
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: b.Epoch, Outcome: lifecycle.OutcomeSuccess})
	if st := reconcileState(t, s, r.ID); st.LeaseRevision != other.ResourceVersion {
		t.Fatalf("after the completion: lease revision %d, want %d kept", st.LeaseRevision, other.ResourceVersion)
	}
}

// testReconcileStateFields: the scheduler's view of each resource carries
// its generations, deletion, lease, dispatch, manual trigger, operation
// annotation, ReconcilerAvailable condition, cleanup state and type
// policy; pages go by id, or by the ids asked for, at the relay's
// published revision.
func testReconcileStateFields(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	if _, err := s.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(schemaJSON),
		ReconcilePolicy: resource.ReconcilePolicy{ResyncSeconds: 42}}); err != nil {
		t.Fatal(err)
	}
	own := "reconciler.no8s.io/widget"
	plain := mustCreate(t, s, "plain")
	ann := mustCreate(t, s, "annotated")
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: ann.ID, SetAnnotations: true,
		Annotations: map[string]string{resource.AnnotationOperation: resource.OperationReconcile}}); err != nil {
		t.Fatal(err)
	}
	// annotated is controlled by plain (its second reference); cleaning has
	// an owner that is not its controller.
	refTo := func(o *resource.Resource, controller bool) resource.OwnerReference {
		return resource.OwnerReference{UID: o.UID, ResourceTypeName: o.ResourceTypeName, ResourceTypeVersion: o.ResourceTypeVersion, Name: o.Name, Controller: controller}
	}
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: ann.ID, SetOwnerReferences: true,
		OwnerReferences: []resource.OwnerReference{refTo(ann, false), refTo(plain, true)}}); err != nil {
		t.Fatal(err)
	}
	ignored := mustCreate(t, s, "ignored")
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: ignored.ID, SetAnnotations: true,
		Annotations: map[string]string{resource.AnnotationOperation: resource.OperationIgnore}}); err != nil {
		t.Fatal(err)
	}
	cleaning := mustCreate(t, s, "cleaning", own, "example.com/ext")
	cleaned := mustCreate(t, s, "cleaned", "example.com/ext")
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: cleaning.ID, SetOwnerReferences: true,
		OwnerReferences: []resource.OwnerReference{refTo(plain, false)}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*resource.Resource{cleaning, cleaned} {
		if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID}); err != nil {
			t.Fatal(err)
		}
	}
	lead, err := s.BecomeScheduler(ctx, "sched", 0, 0)
	if err != nil || !lead.Leader {
		t.Fatalf("lead: %+v %v", lead, err)
	}
	if err := storage.RecordDispatch(ctx, s, lead.Epoch, plain.ID, "d-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetCondition(ctx, lead.Epoch, plain.ID, resource.Condition{Type: resource.ConditionReconcilerAvailable,
		Status: resource.ConditionFalse, Reason: "NoReconciler"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestReconcile(ctx, ann.ID); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, s, ignored.ID, "worker-a")
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: ignored.ID, Spec: []byte(`{"size":5}`)}); err != nil {
		t.Fatal(err)
	}

	res, err := s.ListReconcileState(ctx, storage.ListReconcileStateRequest{})
	if err != nil || len(res.States) != 5 || res.ResourceVersion != 0 {
		t.Fatalf("states: %d at %d (%v), want 5 at 0 (nothing published)", len(res.States), res.ResourceVersion, err)
	}
	by := map[string]storage.ReconcileState{}
	var prev int64
	for _, st := range res.States {
		if st.ResourceID <= prev {
			t.Fatalf("state of %d after %d: not by id", st.ResourceID, prev)
		}
		prev = st.ResourceID
		if st.Policy.ResyncSeconds != 42 || st.UID == "" || st.ResourceTypeName != "Widget" || st.ResourceTypeVersion != "v1" {
			t.Errorf("%s: identity or policy %+v", st.Name, st)
		}
		by[st.Name] = st
	}
	p := by["plain"]
	if p.DispatchID != "d-1" || p.DispatchedAt == nil || !p.ReconcilerUnavailable || p.Deleting || p.CleanupDone ||
		p.Generation != 1 || p.ObservedGeneration != 0 || p.Status != resource.StatusPending || p.AnnotationReconcile || p.AnnotationIgnore {
		t.Errorf("plain: %+v", p)
	}
	if a := by["annotated"]; !a.AnnotationReconcile || a.AnnotationIgnore || a.ReconcileRequestedAt == nil || a.ReconcilerUnavailable {
		t.Errorf("annotated: %+v", a)
	}
	if i := by["ignored"]; !i.AnnotationIgnore || i.LeaseHolder != "worker-a" || i.LeaseEpoch != l.Epoch || i.LeaseExpiresAt == nil ||
		!i.LeaseExpiresAt.Equal(l.ExpiresAt) || i.Generation != 2 || i.Status != resource.StatusReconciling {
		t.Errorf("ignored: %+v", i)
	}
	if c := by["cleaning"]; !c.Deleting || c.CleanupDone || c.Status != resource.StatusDeleting {
		t.Errorf("cleaning: %+v", c)
	}
	if c := by["cleaned"]; !c.Deleting || !c.CleanupDone {
		t.Errorf("cleaned: %+v", c)
	}
	for name, want := range map[string]string{"annotated": plain.UID, "plain": "", "cleaning": "", "cleaned": ""} {
		if got := by[name].ControllerUID; got != want {
			t.Errorf("%s: controller uid %q, want %q", name, got, want)
		}
	}

	page, err := s.ListReconcileState(ctx, storage.ListReconcileStateRequest{AfterID: plain.ID, Limit: 2})
	if err != nil || len(page.States) != 2 || page.States[0].ResourceID != ann.ID || page.States[1].ResourceID != ignored.ID {
		t.Fatalf("page after %d: %+v %v", plain.ID, page, err)
	}
	some, err := s.ListReconcileState(ctx, storage.ListReconcileStateRequest{IDs: []int64{cleaned.ID, plain.ID, 999999}})
	if err != nil || len(some.States) != 2 || some.States[0].ResourceID != plain.ID || some.States[1].ResourceID != cleaned.ID {
		t.Fatalf("by ids: %+v %v", some, err)
	}
	// The revision comes from the relay's cursor.
	lock, epoch, _ := leadRelay(t, el)
	defer lock.Release()
	if err := el.AdvanceCursor(ctx, epoch, plain.ResourceVersion, plain.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	if res, err := s.ListReconcileState(ctx, storage.ListReconcileStateRequest{Limit: 1}); err != nil || res.ResourceVersion != plain.ResourceVersion {
		t.Fatalf("published revision: %+v %v, want %d", res, err, plain.ResourceVersion)
	}
	if _, err := s.ListReconcileState(ctx, storage.ListReconcileStateRequest{Limit: storage.MaxStatePage + 1}); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("oversized page: %v", err)
	}
}

// reconcileState reads one resource's reconcile state.
func reconcileState(t *testing.T, s storage.Store, id int64) storage.ReconcileState {
	t.Helper()
	res, err := s.ListReconcileState(t.Context(), storage.ListReconcileStateRequest{IDs: []int64{id}})
	if err != nil || len(res.States) != 1 {
		t.Fatalf("reconcile state of %d: %+v %v", id, res, err)
	}
	return res.States[0]
}
