package storetest

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// testEveryWriteEmitsThroughTheCommitPath runs every write method of the
// store and checks what it left in the outbox: exactly the documented
// events, in revision order, each revision above every earlier write's,
// each event's document carrying its own revision as resource_version, and
// the row (and the answer) carrying the last one.
func testEveryWriteEmitsThroughTheCommitPath(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	typ := mustType(t, s, "Widget", "v1")
	other := mustType(t, s, "Gadget", "v1")
	hookA, err := s.CreateWebhook(ctx, hook("a.example.com"), false)
	if err != nil {
		t.Fatal(err)
	}
	hookB, err := s.CreateWebhook(ctx, hook("b.example.com"), false)
	if err != nil {
		t.Fatal(err)
	}
	leader := func() int64 {
		l, err := s.BecomeScheduler(ctx, "scheduler-a", 0, 0)
		if err != nil || !l.Leader {
			t.Fatalf("become scheduler: %+v %v", l, err)
		}
		return l.Epoch
	}
	n := 0
	fresh := func(finalizers ...string) *resource.Resource {
		n++
		return mustCreate(t, s, "w"+string(rune('a'+n/26))+string(rune('a'+n%26)), finalizers...)
	}
	deleting := func(finalizers ...string) *resource.Resource {
		r := fresh(finalizers...)
		if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	leased := func(finalizers ...string) (*resource.Resource, *storage.Lease) {
		r := fresh(finalizers...)
		return r, acquire(t, s, r.ID, "worker-a")
	}

	// Each case prepares what it needs (not counted) and returns the write
	// to check: its resource (0: none), and the resource_version it answered
	// (0: no resource in the answer).
	type write func() (id, answered int64, err error)
	cases := []struct {
		name  string
		setup func() write
		want  []string
		// unused is how many revisions the write may take beyond one per
		// event: a type's or webhook's resource_version, or a revision taken
		// ahead and not used (sequences do not roll back): by a dry run, or
		// by AcquireLease, which on PostgreSQL takes it in its first round
		// trip and needs it only when the resource's document changes.
		unused int64
	}{
		{"CreateResource", func() write {
			return func() (int64, int64, error) {
				r, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
					Name: "created", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"size":1}`)}})
				if err != nil {
					return 0, 0, err
				}
				return r.ID, r.ResourceVersion, nil
			}
		}, []string{"CREATED"}, 0},
		{"CreateResource dry run", func() write {
			return func() (int64, int64, error) {
				_, err := s.CreateResource(ctx, storage.CreateResourceRequest{DryRun: true, Resource: resource.Resource{
					Name: "dry", ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}})
				return 0, 0, err
			}
		}, nil, 1},
		{"UpdateResource spec", func() write {
			r := fresh()
			return func() (int64, int64, error) {
				out, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":2}`)})
				return r.ID, rvOf(out), err
			}
		}, []string{"MODIFIED"}, 0},
		{"UpdateResource labels", func() write {
			r := fresh()
			return func() (int64, int64, error) {
				out, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Labels: map[string]string{"a": "b"}, SetLabels: true})
				return r.ID, rvOf(out), err
			}
		}, []string{"MODIFIED"}, 0},
		{"UpdateResource no change", func() write {
			r := fresh()
			return func() (int64, int64, error) {
				_, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{ "size": 1.0 }`)})
				return r.ID, 0, err
			}
		}, nil, 0},
		{"DeleteResource with a finalizer", func() write {
			r := fresh("example.com/hold")
			return func() (int64, int64, error) {
				res, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID})
				return r.ID, rvOfDelete(res), err
			}
		}, []string{"DELETED"}, 0},
		{"DeleteResource purges", func() write {
			r := fresh()
			return func() (int64, int64, error) {
				res, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID})
				return r.ID, rvOfDelete(res), err
			}
		}, []string{"DELETED", "PURGED"}, 0},
		{"DeleteResource again", func() write {
			r := deleting("example.com/hold")
			return func() (int64, int64, error) {
				_, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID})
				return r.ID, 0, err
			}
		}, nil, 0},
		{"UpdateFinalizers add", func() write {
			r := fresh()
			return func() (int64, int64, error) {
				res, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Add: []string{"example.com/hold"}})
				return r.ID, rvOfDelete(res), err
			}
		}, []string{"MODIFIED"}, 0},
		{"UpdateFinalizers remove the last while deleting", func() write {
			r := deleting("example.com/hold")
			return func() (int64, int64, error) {
				res, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Remove: []string{"example.com/hold"}})
				return r.ID, rvOfDelete(res), err
			}
		}, []string{"PURGED"}, 0},
		{"AcquireLease", func() write {
			r := fresh()
			return func() (int64, int64, error) {
				l, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "worker-a"})
				if err != nil {
					return 0, 0, err
				}
				return r.ID, l.Resource.ResourceVersion, nil
			}
		}, []string{"MODIFIED"}, 0},
		{"AcquireLease already reconciling", func() write {
			r, _ := leased()
			return func() (int64, int64, error) {
				_, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "worker-a"})
				return r.ID, 0, err
			}
		}, nil, 1},
		{"RenewLease", func() write {
			r, l := leased()
			return func() (int64, int64, error) {
				_, err := s.RenewLease(ctx, r.ID, l.Epoch, 0)
				return r.ID, 0, err
			}
		}, nil, 0},
		{"CompleteReconcile success", func() write {
			r, l := leased()
			return func() (int64, int64, error) {
				res, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess,
					Conditions: []resource.Condition{{Type: "Ready", Status: resource.ConditionTrue}}, Outputs: []byte(`{"a":1}`)})
				return r.ID, rvOfComplete(res), err
			}
		}, []string{"RECONCILED"}, 0},
		{"CompleteReconcile error", func() write {
			r, l := leased()
			return func() (int64, int64, error) {
				res, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeError, StatusMessage: "boom"})
				return r.ID, rvOfComplete(res), err
			}
		}, []string{"MODIFIED"}, 0},
		{"CompleteReconcile cleanup purges", func() write {
			r := deleting("reconciler.no8s.io/test")
			l := acquire(t, s, r.ID, "worker-a")
			return func() (int64, int64, error) {
				res, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess,
					RemoveFinalizers: []string{"reconciler.no8s.io/test"}})
				return r.ID, rvOfComplete(res), err
			}
		}, []string{"PURGED"}, 0},
		{"SetCondition", func() write {
			r := fresh()
			epoch := leader()
			return func() (int64, int64, error) {
				out, err := s.SetCondition(ctx, epoch, r.ID, resource.Condition{Type: resource.ConditionReconcilerAvailable, Status: resource.ConditionFalse, Reason: "NoReconciler"})
				return r.ID, rvOf(out), err
			}
		}, []string{"MODIFIED"}, 0},
		{"SetCondition unchanged", func() write {
			r := fresh()
			epoch := leader()
			c := resource.Condition{Type: resource.ConditionReconcilerAvailable, Status: resource.ConditionFalse, Reason: "NoReconciler"}
			if _, err := s.SetCondition(ctx, epoch, r.ID, c); err != nil {
				t.Fatal(err)
			}
			return func() (int64, int64, error) {
				_, err := s.SetCondition(ctx, epoch, r.ID, c)
				return r.ID, 0, err
			}
		}, nil, 0},
		{"RequestReconcile", func() write {
			r := fresh()
			return func() (int64, int64, error) {
				out, err := s.RequestReconcile(ctx, r.ID)
				return r.ID, rvOf(out), err
			}
		}, []string{"MODIFIED"}, 0},
		{"RecordDispatches", func() write {
			r := fresh()
			epoch := leader()
			return func() (int64, int64, error) {
				return r.ID, 0, storage.RecordDispatch(ctx, s, epoch, r.ID, "d-1")
			}
		}, nil, 0},
		{"BecomeScheduler and ReleaseScheduler", func() write {
			return func() (int64, int64, error) {
				l, err := s.BecomeScheduler(ctx, "scheduler-a", 0, 0)
				if err != nil {
					return 0, 0, err
				}
				return 0, 0, s.ReleaseScheduler(ctx, "scheduler-a", l.Epoch)
			}
		}, nil, 0},
		{"CreateType", func() write {
			return func() (int64, int64, error) {
				_, err := s.CreateType(ctx, storage.CreateTypeRequest{Name: "Thing", Version: "v1", Schema: []byte(schemaJSON)})
				return 0, 0, err
			}
		}, nil, 1},
		{"UpdateType", func() write {
			return func() (int64, int64, error) {
				desc := "changed"
				_, err := s.UpdateType(ctx, storage.UpdateTypeRequest{ID: typ.ID, Description: &desc})
				return 0, 0, err
			}
		}, nil, 1},
		{"DeleteType", func() write {
			return func() (int64, int64, error) {
				return 0, 0, s.DeleteType(ctx, other.ID, false)
			}
		}, nil, 0},
		{"CreateWebhook", func() write {
			return func() (int64, int64, error) {
				_, err := s.CreateWebhook(ctx, hook("c.example.com"), false)
				return 0, 0, err
			}
		}, nil, 1},
		{"UpdateWebhook", func() write {
			return func() (int64, int64, error) {
				w := *hookA
				w.TimeoutSeconds = 5
				_, err := s.UpdateWebhook(ctx, w, 0, false)
				return 0, 0, err
			}
		}, nil, 1},
		{"DeleteWebhook", func() write {
			return func() (int64, int64, error) {
				return 0, 0, s.DeleteWebhook(ctx, hookB.ID, false)
			}
		}, nil, 0},
		{"CreateNamespace", func() write {
			return func() (int64, int64, error) {
				_, err := s.CreateNamespace(ctx, "created", false)
				return 0, 0, err
			}
		}, nil, 1},
		{"DeleteNamespace empty", func() write {
			mustNamespace(t, s, "empty")
			return func() (int64, int64, error) {
				_, err := s.DeleteNamespace(ctx, "empty", false)
				return 0, 0, err
			}
		}, nil, 1},
		{"DeleteNamespace with a resource", func() write {
			mustNamespace(t, s, "held")
			r := mustCreateIn(t, s, "held", "held", nil, "example.com/hold")
			return func() (int64, int64, error) {
				_, err := s.DeleteNamespace(ctx, "held", false)
				return r.ID, 0, err
			}
		}, []string{"DELETED"}, 1},
		{"FinalizeNamespace", func() write {
			mustNamespace(t, s, "emptied")
			r := mustCreateIn(t, s, "emptied", "held", nil, "example.com/hold")
			if _, err := s.DeleteNamespace(ctx, "emptied", false); err != nil {
				t.Fatal(err)
			}
			if _, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Remove: []string{"example.com/hold"}}); err != nil {
				t.Fatal(err)
			}
			return func() (int64, int64, error) {
				res, err := s.FinalizeNamespace(ctx, "emptied")
				if err == nil && !res.Purged {
					t.Error("FinalizeNamespace: an empty terminating namespace was not removed")
				}
				return 0, 0, err
			}
		}, nil, 0},
		// Events in the Kubernetes sense and leader leases are not part of
		// the change stream: no revision, no event.
		{"RecordEvent and ListEvents", func() write {
			r := fresh()
			return func() (int64, int64, error) {
				_, err := s.RecordEvent(ctx, storage.RecordEventRequest{ResourceID: r.ID,
					Event: storage.EventInput{Type: "Normal", Reason: "Tested", Message: "m"}})
				if err == nil {
					_, err = s.ListEvents(ctx, storage.ListEventsRequest{ResourceID: r.ID})
				}
				return r.ID, 0, err
			}
		}, nil, 0},
		// API tokens are not resources either.
		{"CreateToken and RevokeToken", func() write {
			return func() (int64, int64, error) {
				tok, err := s.CreateToken(ctx, apiToken("commit", "alice", "commit"))
				if err == nil {
					_, err = s.RevokeToken(ctx, tok.ID, "")
				}
				return 0, 0, err
			}
		}, nil, 0},
		{"CampaignLeader and ReleaseLeader", func() write {
			return func() (int64, int64, error) {
				l, err := s.CampaignLeader(ctx, "tested", "a", 0, 0)
				if err == nil {
					err = s.ReleaseLeader(ctx, "tested", "a", l.Epoch)
				}
				return 0, 0, err
			}
		}, nil, 0},
	}
	// Every exported method of the store is a read or has a case here.
	covered := map[string]bool{"GetResource": true, "ListResources": true, "GetType": true, "ListTypes": true,
		"GetWebhook": true, "ListWebhooks": true, "ListHistory": true, "ListReconcileState": true, "Ping": true,
		"GetNamespace": true, "ListNamespaces": true, "ListTokens": true, "LookupToken": true,
		"ListDependents": true, "ListDangling": true, "ListPropagating": true}
	for _, c := range cases {
		for _, part := range strings.Split(c.name, " and ") {
			covered[strings.Fields(part)[0]] = true
		}
	}
	st := reflect.TypeFor[storage.Store]()
	for i := range st.NumMethod() {
		if m := st.Method(i).Name; !covered[m] {
			t.Errorf("write method %s has no case in this test", m)
		}
	}

	for _, c := range cases {
		w := c.setup()
		before := lastRevision(t, el)
		id, answered, err := w()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		after := lastRevision(t, el)
		rows, err := el.ReadOutbox(ctx, before, math.MaxInt64, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		var last int64
		for _, row := range rows {
			rev, rid, et, subject, payload := row.Revision, row.ResourceID, row.EventType, row.Subject, row.Payload
			got = append(got, et)
			if rev <= last || rev > after {
				t.Errorf("%s: revision %d out of order (previous %d, newest taken %d)", c.name, rev, last, after)
			}
			last = rev
			if rid != id {
				t.Errorf("%s: event %d is about resource %d, want %d", c.name, rev, rid, id)
			}
			ev, err := eventstream.Decode(payload)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var doc struct {
				ResourceVersion int64 `json:"resource_version"`
			}
			if err := json.Unmarshal(ev.ResourceJSON, &doc); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if ev.Revision != rev || ev.Type != et || doc.ResourceVersion != rev || ev.ResourceID != rid ||
				subject != eventstream.Subject(ev.ResourceTypeName, ev.ResourceTypeVersion) {
				t.Errorf("%s: outbox row %d (%s, %s) holds event %d %s of resource %d at resource_version %d",
					c.name, rev, et, subject, ev.Revision, ev.Type, ev.ResourceID, doc.ResourceVersion)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: events %v, want %v", c.name, got, c.want)
			continue
		}
		// Revisions may be taken and left unused (a backend's choice, up to
		// c.unused), never fewer than the events.
		if taken := after - before; taken < int64(len(c.want)) || taken > int64(len(c.want))+c.unused {
			t.Errorf("%s: took %d revisions for %d events, want %d to %d", c.name, taken, len(c.want), len(c.want), int64(len(c.want))+c.unused)
		}
		if len(c.want) == 0 {
			continue
		}
		if answered != 0 && answered != last {
			t.Errorf("%s: answered resource_version %d, want %d", c.name, answered, last)
		}
		cur, err := s.GetResource(ctx, storage.ResourceKey{ID: id})
		var stored int64
		if err == nil {
			stored = cur.ResourceVersion
		}
		purged := c.want[len(c.want)-1] == "PURGED"
		switch {
		case purged && err == nil:
			t.Errorf("%s: purged, but the row is still there", c.name)
		case !purged && err != nil:
			t.Errorf("%s: read the row: %v", c.name, err)
		case !purged && stored != last:
			t.Errorf("%s: row at resource_version %d, want %d", c.name, stored, last)
		case !purged:
			// What a list serves is the row's document as this write
			// left it (a backend may keep the one its event rendered).
			want, err := resource.Marshal(cur)
			if err != nil {
				t.Fatal(err)
			}
			if got := listedDocument(t, s, id); !SameJSON(got, want) {
				t.Errorf("%s: a list shows\n%s\nwant the row's document\n%s", c.name, got, want)
			}
		}
	}
}

// listedDocument is the document a list of documents shows for resource id
// (nil when none does).
func listedDocument(t *testing.T, s storage.Store, id int64) []byte {
	t.Helper()
	for _, d := range ListAll(t, s, storage.ListResourcesRequest{Limit: storage.MaxListLimit, Documents: true}) {
		var head struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal(d, &head); err != nil {
			t.Fatalf("a listed document does not decode: %v: %s", err, d)
		}
		if head.ID == id {
			return d
		}
	}
	return nil
}

// ListAll reads every page of req: its documents when req asks for them,
// else its resources as their documents (resource.Marshal), so that the
// two can be compared.
func ListAll(t *testing.T, s storage.Store, req storage.ListResourcesRequest) (out []json.RawMessage) {
	t.Helper()
	for {
		page, err := s.ListResources(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Documents {
			out = append(out, d)
		}
		for _, r := range page.Resources {
			b, err := resource.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		if page.Continue == "" {
			return out
		}
		req.Continue = page.Continue
	}
}

// SameJSON reports whether a and b are the same JSON value (numbers
// compared as written, not as floats).
func SameJSON(a, b []byte) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	return da.Decode(&x) == nil && db.Decode(&y) == nil && reflect.DeepEqual(x, y)
}

func rvOf(r *resource.Resource) int64 {
	if r == nil {
		return 0
	}
	return r.ResourceVersion
}

func rvOfDelete(res *storage.DeleteResult) int64 {
	if res == nil {
		return 0
	}
	return rvOf(res.Resource)
}

func rvOfComplete(res *storage.CompleteResult) int64 {
	if res == nil {
		return 0
	}
	return rvOf(res.Resource)
}
