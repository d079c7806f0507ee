package storetest

// The in-place upgrade to namespaces. Each backend's test builds a database
// with the migrations of the previous release (PostgreSQL up to 00004,
// SQLite up to 00001), writes into it, with that release's SQL, the state
// described here (OldState), migrates it up, and hands the result to
// CheckUpgraded, which checks through the store's interfaces only that
// every resource landed in the default namespace and still works.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/webhookconf"
	"github.com/no8s/no8s/services/store/storage"
)

// OldSchema is the schema of the previous release's Widget/v1 type.
const OldSchema = schemaJSON

// OldResource is one resource as the previous release stored it.
type OldResource struct {
	Name        string
	Labels      map[string]string
	Spec        string
	Status      string
	Phase       string
	Generation  int64
	Observed    int64
	Finalizers  []string
	Conditions  []resource.Condition
	Deleting    bool
	LeaseEpoch  int64
	LeaseHolder string
	// History is the number of history rows it has (generation 1, success,
	// epochs 1..History).
	History int
}

// OldResources are the resources of the previous release's database, in
// the order of their ids. A fourth resource was created and purged: its id
// was taken and must never be handed out again.
var OldResources = []OldResource{
	{Name: "alpha", Labels: map[string]string{"app": "web"}, Spec: `{"size":1}`, Status: resource.StatusPending,
		Phase: resource.PhaseProgressing, Generation: 1, Finalizers: []string{"reconciler.no8s.io/noop"}},
	{Name: "beta", Labels: map[string]string{"app": "db"}, Spec: `{"size":2}`, Status: resource.StatusReady,
		Phase: resource.PhaseReady, Generation: 1, Observed: 1, Finalizers: []string{"reconciler.no8s.io/noop"},
		Conditions: []resource.Condition{{Type: "Ready", Status: "True", Reason: "Reconciled", ObservedGeneration: 1, LastTransitionTime: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}},
		LeaseEpoch: 2, LeaseHolder: "",
		History: 2},
	{Name: "gamma", Labels: map[string]string{"app": "web"}, Spec: `{"size":3}`, Status: resource.StatusDeleting,
		Phase: resource.PhaseTerminating, Generation: 1, Finalizers: []string{"example.com/hold"}, Deleting: true},
}

// OldPurgedName is the resource the previous release created and purged.
const OldPurgedName = "purged"

// OldWebhookName is the webhook the previous release registered.
const OldWebhookName = "old.example.com"

// OldWebhook is the previous release's webhook registration.
func OldWebhook() webhookconf.Webhook {
	return hook(OldWebhookName)
}

// OldDocument renders r as the previous release's store did: the document
// without a namespace.
func OldDocument(r *resource.Resource) ([]byte, error) {
	doc, err := resource.Marshal(r)
	if err != nil {
		return nil, err
	}
	out := bytes.Replace(doc, []byte(`"namespace":"",`), nil, 1)
	if bytes.Equal(out, doc) {
		return nil, fmt.Errorf("no empty namespace in %s", doc)
	}
	return out, nil
}

// OldEvent encodes an event as the previous release did: no namespace in
// the envelope nor in the document.
func OldEvent(eventType string, r *resource.Resource, rev int64, now time.Time) ([]byte, error) {
	old := *r
	old.Namespace, old.ResourceVersion, old.UpdatedAt = "", rev, now
	doc, err := OldDocument(&old)
	if err != nil {
		return nil, err
	}
	return envelope.Encode(envelope.Event{Revision: rev, Type: eventType, Resource: &old, ResourceJSON: doc, Timestamp: now})
}

// CheckUpgraded checks a database the previous release filled with
// OldResources (ids ascending, the purged one's id after them), Widget/v1
// and OldWebhook, once migrated: the default namespace exists; every
// resource is in it, keeps its state, lease, history and events, reads by
// id, by name with or without the namespace, and in lists (resources and
// documents); writes go on (an update, a finalizer's removal that purges,
// a taken name refused in default and free in another namespace, ids
// never handed out again); old events decode into default; the webhook
// matches every namespace.
func CheckUpgraded(t *testing.T, b storage.Backend) {
	t.Helper()
	s, el := b.Store, b.Log
	ctx := t.Context()
	def, err := s.GetNamespace(ctx, names.DefaultNamespace)
	if err != nil || def.Status != resource.NamespaceActive {
		t.Fatalf("default namespace after the upgrade: %+v %v", def, err)
	}
	if list, err := s.ListNamespaces(ctx); err != nil || len(list) != 1 {
		t.Fatalf("namespaces after the upgrade: %+v %v", list, err)
	}
	before := lastRevision(t, el)

	all := allResources(t, s)
	if got := namesOf(all); !slices.Equal(got, []string{"default/alpha", "default/beta", "default/gamma"}) {
		t.Fatalf("resources after the upgrade: %v", got)
	}
	byName := map[string]*resource.Resource{}
	for i, r := range all {
		old := OldResources[i]
		byName[r.Name] = r
		if r.Status != old.Status || r.Phase != old.Phase || r.Generation != old.Generation || r.ObservedGeneration != old.Observed ||
			string(r.Spec) != old.Spec || !slices.Equal(r.Finalizers, old.Finalizers) || (r.DeletedAt != nil) != old.Deleting ||
			len(r.Conditions) != len(old.Conditions) || r.Labels["app"] != old.Labels["app"] {
			t.Errorf("%s after the upgrade: %+v, want %+v", r.Name, r, old)
		}
		for _, ns := range []string{"", names.DefaultNamespace} {
			got, err := s.GetResource(ctx, storage.ResourceKey{ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Namespace: ns, Name: r.Name})
			if err != nil || got.ID != r.ID {
				t.Errorf("get %s by name in %q: %+v %v", r.Name, ns, got, err)
			}
		}
	}
	page, err := s.ListResources(ctx, storage.ListResourcesRequest{Namespace: names.DefaultNamespace, LabelSelector: "app=web", Documents: true})
	if err != nil || len(page.Documents) != 2 {
		t.Fatalf("documents of default with app=web: %v %v", page, err)
	}
	for _, d := range page.Documents {
		if !bytes.Contains(d, []byte(`"namespace":"default"`)) {
			t.Errorf("document without its namespace: %s", d)
		}
	}
	beta := byName["beta"]
	hist, err := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: beta.ID})
	if err != nil || len(hist) != OldResources[1].History {
		t.Fatalf("beta's history after the upgrade: %+v %v", hist, err)
	}
	st, err := s.ListReconcileState(ctx, storage.ListReconcileStateRequest{IDs: []int64{beta.ID}})
	if err != nil || len(st.States) != 1 || st.States[0].LeaseEpoch != OldResources[1].LeaseEpoch {
		t.Fatalf("beta's reconcile state after the upgrade: %+v %v", st, err)
	}
	// The previous release's events decode into the default namespace.
	rows, err := el.ReadOutbox(ctx, 0, math.MaxInt64, math.MaxInt32)
	if err != nil || len(rows) == 0 {
		t.Fatalf("outbox after the upgrade: %d rows %v", len(rows), err)
	}
	for _, row := range rows {
		ev, err := eventstream.Decode(row.Payload)
		if err != nil || ev.Namespace != names.DefaultNamespace {
			t.Errorf("old event %d: namespace %q (%v)", row.Revision, ev.Namespace, err)
		}
	}
	oldRows := len(rows)

	// Writes go on: an update (generation, revision, its event in default).
	up, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: byName["alpha"].ID, Spec: []byte(`{"size":10}`)})
	if err != nil || up.Generation != 2 || up.ResourceVersion <= before || up.Namespace != names.DefaultNamespace {
		t.Fatalf("update alpha: %+v %v", up, err)
	}
	// A reconcile of beta: the lease's epoch goes on from the old one.
	l := acquire(t, s, beta.ID, "noop/replica")
	if l.Epoch != OldResources[1].LeaseEpoch+1 {
		t.Errorf("beta's lease epoch %d, want %d", l.Epoch, OldResources[1].LeaseEpoch+1)
	}
	complete(t, s, storage.CompleteReconcileRequest{ResourceID: beta.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess})
	if hist, _ := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: beta.ID}); len(hist) != OldResources[1].History+1 {
		t.Errorf("beta's history after a new attempt: %d rows", len(hist))
	}
	// The deleting resource goes when its finalizer does.
	res, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: byName["gamma"].ID, Remove: []string{"example.com/hold"}})
	if err != nil || !res.Purged {
		t.Fatalf("remove gamma's finalizer: %+v %v", res, err)
	}
	// Names are unique per namespace: taken in default, free elsewhere.
	_, err = s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
		Name: "alpha", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{}`)}})
	wantErr(t, err, storage.ErrNameTaken)
	mustNamespace(t, s, "team-a")
	again := mustCreateIn(t, s, "team-a", "alpha", nil)
	purgedID := all[len(all)-1].ID + 1
	if again.ID <= purgedID {
		t.Errorf("new resource got id %d: ids up to %d (a purged resource's) were taken before the upgrade", again.ID, purgedID)
	}
	if fresh := mustCreateIn(t, s, names.DefaultNamespace, "delta", nil); fresh.Namespace != names.DefaultNamespace || fresh.ID <= again.ID {
		t.Errorf("a new resource in default: %+v", fresh)
	}
	// New events carry their namespace; the old ones are still there.
	rows, err = el.ReadOutbox(ctx, 0, math.MaxInt64, math.MaxInt32)
	if err != nil || len(rows) <= oldRows {
		t.Fatalf("outbox after new writes: %d rows (%d before) %v", len(rows), oldRows, err)
	}
	for _, row := range rows[oldRows:] {
		ev, err := eventstream.Decode(row.Payload)
		want := names.DefaultNamespace
		if row.ResourceID == again.ID {
			want = "team-a"
		}
		if err != nil || ev.Namespace != want || row.Revision <= before {
			t.Errorf("new event %d of resource %d: namespace %q, want %q (%v)", row.Revision, row.ResourceID, ev.Namespace, want, err)
		}
	}

	// The webhook matches every namespace and can be changed.
	hooks, err := s.ListWebhooks(ctx, "")
	if err != nil || len(hooks.Webhooks) != 1 || hooks.Webhooks[0].Name != OldWebhookName || hooks.Webhooks[0].Namespaces != nil {
		t.Fatalf("webhooks after the upgrade: %+v %v", hooks, err)
	}
	w := *hooks.Webhooks[0]
	w.Namespaces = []string{"team-a"}
	if got, err := s.UpdateWebhook(ctx, w, 0, false); err != nil || !slices.Equal(got.Namespaces, []string{"team-a"}) {
		t.Fatalf("scope the old webhook: %+v %v", got, err)
	}
	if _, err := s.DeleteNamespace(ctx, names.DefaultNamespace, false); !errors.Is(err, storage.ErrNamespaceProtected) {
		t.Errorf("delete default after the upgrade: %v", err)
	}
}
