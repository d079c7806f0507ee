package storetest

// Events (records attached to a resource), leader leases and fenced client
// writes, and the built-in tenant types.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

func record(t *testing.T, s storage.Store, id int64, typ, reason, msg string) *storage.EventRecord {
	t.Helper()
	e, err := s.RecordEvent(t.Context(), storage.RecordEventRequest{ResourceID: id,
		Event: storage.EventInput{Type: typ, Reason: reason, Message: msg, Source: "test"}})
	if err != nil {
		t.Fatalf("record %s: %v", reason, err)
	}
	return e
}

// testEventsDedupAndRetention: a repeat of (type, reason, message) within
// the window raises the count of one record; another message, or a repeat
// after the window, is a new record; recording takes no revision; records
// are pruned beyond the per-resource bound, and outlive their resource;
// bad events are refused with field paths and write nothing.
func testEventsDedupAndRetention(t *testing.T, open Opener) {
	b := open(t, storage.Options{EventDedup: 300 * time.Millisecond, EventsPerResource: 5})
	s, el := b.Store, b.Log
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "one")
	other := mustCreate(t, s, "two")
	rev := lastRevision(t, el)

	first := record(t, s, r.ID, names.EventWarning, "SyncFailed", "connection refused")
	if first.Count != 1 || first.ResourceUID != r.UID || first.ResourceName != "one" || first.ResourceTypeName != "Widget" ||
		first.Source != "test" || !first.FirstTime.Equal(first.LastTime) {
		t.Fatalf("first record %+v", first)
	}
	var last *storage.EventRecord
	for range 4 {
		last = record(t, s, r.ID, names.EventWarning, "SyncFailed", "connection refused")
	}
	if last.ID != first.ID || last.Count != 5 || !last.FirstTime.Equal(first.FirstTime) || last.LastTime.Before(first.LastTime) {
		t.Fatalf("repeat did not raise the count: %+v after %+v", last, first)
	}
	if got := lastRevision(t, el); got != rev {
		t.Fatalf("recording events moved the revision from %d to %d", rev, got)
	}
	// Another message, or another resource: separate records.
	if e := record(t, s, r.ID, names.EventWarning, "SyncFailed", "timeout"); e.ID == first.ID || e.Count != 1 {
		t.Fatalf("another message shared the record: %+v", e)
	}
	if e := record(t, s, other.ID, names.EventWarning, "SyncFailed", "connection refused"); e.ID == first.ID {
		t.Fatalf("another resource shared the record: %+v", e)
	}
	// After the window a repeat starts a new record.
	waitPast(t, last.LastTime.Add(300*time.Millisecond))
	if e := record(t, s, r.ID, names.EventWarning, "SyncFailed", "connection refused"); e.ID == first.ID || e.Count != 1 {
		t.Fatalf("a repeat after the window raised the old record: %+v", e)
	}
	list, err := s.ListEvents(ctx, storage.ListEventsRequest{ResourceID: r.ID})
	if err != nil || len(list) != 3 || list[0].ID < list[1].ID {
		t.Fatalf("list %+v %v", list, err)
	}
	if l, err := s.ListEvents(ctx, storage.ListEventsRequest{ResourceID: r.ID, Limit: 1, BeforeID: list[0].ID}); err != nil || len(l) != 1 || l[0].ID != list[1].ID {
		t.Fatalf("page back: %+v %v", l, err)
	}
	if l, err := s.ListEvents(ctx, storage.ListEventsRequest{Reason: "Nope"}); err != nil || len(l) != 0 {
		t.Fatalf("reason filter: %+v %v", l, err)
	}
	// At most 5 records per resource: the oldest go.
	for i := range 6 {
		record(t, s, r.ID, names.EventNormal, "Step", fmt.Sprintf("step %d", i))
	}
	list, err = s.ListEvents(ctx, storage.ListEventsRequest{ResourceID: r.ID})
	if err != nil || len(list) != 5 || list[4].Message != "step 1" {
		t.Fatalf("bounded list %+v %v", list, err)
	}
	// Bad events: refused with paths, nothing written.
	for _, bad := range []storage.EventInput{
		{Type: "Error", Reason: "X", Message: "m"},
		{Type: names.EventNormal, Reason: "lower", Message: "m"},
		{Type: names.EventNormal, Reason: "X", Message: ""},
		{Type: names.EventNormal, Reason: "X", Message: strings.Repeat("a", names.MaxEventMessageBytes+1)},
		{Type: names.EventNormal, Reason: "X", Message: "nul\x00"},
	} {
		_, err := s.RecordEvent(ctx, storage.RecordEventRequest{ResourceID: r.ID, Event: bad})
		wantErr(t, err, storage.ErrInvalid)
		if len(storeErr(err).Fields) == 0 {
			t.Fatalf("no field paths for %+v", bad)
		}
	}
	_, err = s.RecordEvent(ctx, storage.RecordEventRequest{ResourceID: 999999, Event: storage.EventInput{Type: names.EventNormal, Reason: "X", Message: "m"}})
	wantErr(t, err, storage.ErrNotFound)
	if l, _ := s.ListEvents(ctx, storage.ListEventsRequest{ResourceID: r.ID}); len(l) != 5 {
		t.Fatalf("bad events changed the list: %d", len(l))
	}
	// Records outlive their resource.
	if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: other.ID}); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ListEvents(ctx, storage.ListEventsRequest{ResourceID: other.ID}); err != nil || len(l) != 1 {
		t.Fatalf("events of a purged resource: %+v %v", l, err)
	}
}

// testCompletionCarriesEvents: events a worker sends with its completion
// are recorded in the completing transaction (deduplicated like the
// others), their source the lease holder's (reconciler/<holder up to "/">,
// whatever the worker said); a completion refused for a stale epoch records
// none.
func testCompletionCarriesEvents(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "one")
	evs := []storage.EventInput{
		{Type: names.EventWarning, Reason: "Retrying", Message: "backend down", Source: "forged"},
		{Type: names.EventWarning, Reason: "Retrying", Message: "backend down", Source: "forged"},
	}
	l := acquire(t, s, r.ID, "w")
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeError, Events: evs})
	stale := l.Epoch
	l = acquire(t, s, r.ID, "w")
	if _, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: stale, Outcome: lifecycle.OutcomeError, Events: evs}); err == nil {
		t.Fatal("stale completion accepted")
	}
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess, Events: evs[:1]})
	list, err := s.ListEvents(ctx, storage.ListEventsRequest{ResourceID: r.ID})
	if err != nil || len(list) != 1 || list[0].Count != 3 || list[0].Source != "reconciler/w" {
		t.Fatalf("events %+v %v", list, err)
	}
	l = acquire(t, s, r.ID, "w")
	_, err = s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess,
		Events: []storage.EventInput{{Type: "Loud", Reason: "X", Message: "m"}}})
	wantErr(t, err, storage.ErrInvalid)
}

// testLeaderLeaseFencesClientWrites: named leader leases follow the
// scheduler lease's rules, and a write carrying a fence commits only while
// its epoch is current and unexpired: a deposed leader's create, update,
// delete and event are refused and change nothing.
func testLeaderLeaseFencesClientWrites(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	a, err := s.CampaignLeader(ctx, "registry-sync", "a", time.Second, 0)
	if err != nil || !a.Leader || a.Epoch != 1 {
		t.Fatalf("first campaign %+v %v", a, err)
	}
	if b, err := s.CampaignLeader(ctx, "registry-sync", "b", time.Second, 0); err != nil || b.Leader || b.Holder != "a" {
		t.Fatalf("second holder got %+v %v", b, err)
	}
	if o, err := s.CampaignLeader(ctx, "other", "b", time.Second, 0); err != nil || !o.Leader || o.Epoch != 1 {
		t.Fatalf("another lease: %+v %v", o, err)
	}
	fa := storage.WithFence(ctx, storage.Fence{Lease: "registry-sync", Epoch: a.Epoch})
	r, err := s.CreateResource(fa, storage.CreateResourceRequest{Resource: resource.Resource{Name: "fenced", ResourceTypeName: "Widget",
		ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"size":1}`)}})
	if err != nil {
		t.Fatalf("fenced create by the leader: %v", err)
	}
	// a pauses past its lease; b takes over.
	waitPast(t, a.ExpiresAt)
	b, err := s.CampaignLeader(ctx, "registry-sync", "b", 5*time.Second, 0)
	if err != nil || !b.Leader || b.Epoch != 2 {
		t.Fatalf("takeover %+v %v", b, err)
	}
	before := events(t, el, r.ID)
	_, err = s.CreateResource(fa, storage.CreateResourceRequest{Resource: resource.Resource{Name: "late", ResourceTypeName: "Widget",
		ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"size":1}`)}})
	wantErr(t, err, storage.ErrStaleEpoch)
	_, err = s.UpdateResource(fa, storage.UpdateResourceRequest{ID: r.ID, Spec: json.RawMessage(`{"size":2}`)})
	wantErr(t, err, storage.ErrStaleEpoch)
	_, err = s.DeleteResource(fa, storage.DeleteResourceRequest{ID: r.ID})
	wantErr(t, err, storage.ErrStaleEpoch)
	_, err = s.RecordEvent(fa, storage.RecordEventRequest{ResourceID: r.ID, Event: storage.EventInput{Type: names.EventNormal, Reason: "X", Message: "m"}})
	wantErr(t, err, storage.ErrStaleEpoch)
	if after := events(t, el, r.ID); len(after) != len(before) {
		t.Fatalf("refused writes emitted events: %v after %v", after, before)
	}
	if n := countResources(t, s); n != 1 {
		t.Fatalf("%d resources after refused writes", n)
	}
	// The new leader's fence holds; an unknown lease, or a bad fence, does not.
	fb := storage.WithFence(ctx, storage.Fence{Lease: "registry-sync", Epoch: b.Epoch})
	if _, err := s.UpdateResource(fb, storage.UpdateResourceRequest{ID: r.ID, Spec: json.RawMessage(`{"size":2}`)}); err != nil {
		t.Fatalf("new leader's update: %v", err)
	}
	_, err = s.DeleteResource(storage.WithFence(ctx, storage.Fence{Lease: "nobody", Epoch: 1}), storage.DeleteResourceRequest{ID: r.ID})
	wantErr(t, err, storage.ErrStaleEpoch)
	_, err = s.DeleteResource(storage.WithFence(ctx, storage.Fence{Lease: "Bad Name", Epoch: 1}), storage.DeleteResourceRequest{ID: r.ID})
	wantErr(t, err, storage.ErrInvalid)
	// Release expires the lease at once: the released epoch fences nothing.
	if err := s.ReleaseLeader(ctx, "registry-sync", "b", b.Epoch); err != nil {
		t.Fatal(err)
	}
	_, err = s.DeleteResource(fb, storage.DeleteResourceRequest{ID: r.ID})
	wantErr(t, err, storage.ErrStaleEpoch)
	if c, err := s.CampaignLeader(ctx, "registry-sync", "c", time.Second, 0); err != nil || !c.Leader || c.Epoch != 3 {
		t.Fatalf("after release %+v %v", c, err)
	}
}

// testBuiltinTenantTypes: TenantRegistry, TenantTemplate, Tenant and
// HttpSource v1 exist from the first start, with their schemas.
func testBuiltinTenantTypes(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	for _, name := range []string{"TenantRegistry", "TenantTemplate", "Tenant", "HttpSource"} {
		typ, err := s.GetType(t.Context(), storage.TypeKey{Name: name, Version: "v1"})
		if err != nil {
			t.Fatalf("%s/v1: %v", name, err)
		}
		var sch struct {
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(typ.Schema, &sch); err != nil || len(sch.Required) == 0 || typ.ResourceVersion == 0 || typ.ID >= 0 {
			t.Fatalf("%s/v1 (id %d) schema %s: %v", name, typ.ID, typ.Schema, err)
		}
	}
	// Users' types still start at id 1.
	if typ := mustType(t, s, "Widget", "v1"); typ.ID != 1 {
		t.Fatalf("the first user type has id %d, want 1", typ.ID)
	}
}
