package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// mustNamespace creates a namespace.
func mustNamespace(t *testing.T, s storage.Store, name string) *resource.Namespace {
	t.Helper()
	n, err := s.CreateNamespace(t.Context(), name, false)
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return n
}

// mustCreateIn creates a Widget/v1 resource in namespace ns.
func mustCreateIn(t *testing.T, s storage.Store, ns, name string, labels map[string]string, finalizers ...string) *resource.Resource {
	t.Helper()
	r, err := s.CreateResource(t.Context(), storage.CreateResourceRequest{Resource: resource.Resource{
		Namespace: ns, Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"size":1}`),
		Labels: labels, Finalizers: finalizers,
	}})
	if err != nil {
		t.Fatalf("create %s/%s: %v", ns, name, err)
	}
	return r
}

// namesOf lists the namespace/name of resources.
func namesOf(rs []*resource.Resource) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Namespace+"/"+r.Name)
	}
	return out
}

// testNamespaceObjects: default always exists and cannot be deleted; a
// namespace is created active with a uid and a revision; names are DNS
// labels; a taken name, a missing namespace and dry runs behave.
func testNamespaceObjects(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	def, err := s.GetNamespace(ctx, names.DefaultNamespace)
	if err != nil || def.Status != resource.NamespaceActive || def.UID == "" || def.ResourceVersion == 0 || def.DeletedAt != nil {
		t.Fatalf("default namespace: %+v %v", def, err)
	}
	_, err = s.DeleteNamespace(ctx, names.DefaultNamespace, false)
	wantErr(t, err, storage.ErrNamespaceProtected)
	_, err = s.DeleteNamespace(ctx, names.DefaultNamespace, true)
	wantErr(t, err, storage.ErrNamespaceProtected)

	before := lastRevision(t, el)
	a := mustNamespace(t, s, "team-a")
	if a.Name != "team-a" || a.Status != resource.NamespaceActive || a.UID == "" || a.UID == def.UID ||
		a.ResourceVersion <= before || a.CreatedAt.IsZero() || a.DeletedAt != nil {
		t.Fatalf("created namespace: %+v", a)
	}
	if got, err := s.GetNamespace(ctx, "team-a"); err != nil || *got != *a {
		t.Fatalf("get namespace: %+v %v, want %+v", got, err, a)
	}
	_, err = s.CreateNamespace(ctx, "team-a", false)
	wantErr(t, err, storage.ErrNameTaken)
	for _, bad := range []string{"", "Team-A", "team_a", "-a", string(make([]byte, 64))} {
		_, err := s.CreateNamespace(ctx, bad, false)
		if se := storeErr(err); se == nil || !errors.Is(err, storage.ErrInvalid) || len(se.Fields) != 1 || se.Fields[0].Path != "/name" {
			t.Errorf("create namespace %q: %v", bad, err)
		}
	}
	if dry, err := s.CreateNamespace(ctx, "dry", true); err != nil || dry.Name != "dry" {
		t.Fatalf("dry-run create: %+v %v", dry, err)
	}
	_, err = s.GetNamespace(ctx, "dry")
	wantErr(t, err, storage.ErrNotFound)
	_, err = s.DeleteNamespace(ctx, "nope", false)
	wantErr(t, err, storage.ErrNotFound)
	_, err = s.FinalizeNamespace(ctx, "nope")
	wantErr(t, err, storage.ErrNotFound)
	// Finalizing an active namespace changes nothing.
	if res, err := s.FinalizeNamespace(ctx, "team-a"); err != nil || res.Purged || res.Namespace.Status != resource.NamespaceActive {
		t.Fatalf("finalize an active namespace: %+v %v", res, err)
	}
	mustNamespace(t, s, "team-b")
	list, err := s.ListNamespaces(ctx)
	var got []string
	for _, n := range list {
		got = append(got, n.Name)
	}
	if err != nil || !slices.Equal(got, []string{"default", "team-a", "team-b"}) {
		t.Fatalf("list namespaces: %v %v", got, err)
	}
	// A dry-run delete answers terminating and changes nothing.
	dry, err := s.DeleteNamespace(ctx, "team-b", true)
	if err != nil || dry.Purged || dry.Namespace.Status != resource.NamespaceTerminating {
		t.Fatalf("dry-run delete: %+v %v", dry, err)
	}
	if n, err := s.GetNamespace(ctx, "team-b"); err != nil || n.Status != resource.NamespaceActive {
		t.Fatalf("after a dry-run delete: %+v %v", n, err)
	}
	// An empty namespace goes at once.
	del, err := s.DeleteNamespace(ctx, "team-b", false)
	if err != nil || !del.Purged || del.Namespace.Name != "team-b" {
		t.Fatalf("delete an empty namespace: %+v %v", del, err)
	}
	_, err = s.GetNamespace(ctx, "team-b")
	wantErr(t, err, storage.ErrNotFound)
	if countEvents(t, el) != 0 {
		t.Fatalf("namespace writes recorded %d events: namespaces have none", countEvents(t, el))
	}
}

// testNamesUniquePerNamespace: one name in two namespaces is two resources;
// a name is taken per (type, version, namespace); reads by name name the
// namespace (empty: default); a create in a missing or invalid namespace is
// refused and writes nothing; events and documents carry the namespace.
func testNamesUniquePerNamespace(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	mustType(t, s, "Widget", "v2")
	mustNamespace(t, s, "team-a")
	inDefault := mustCreate(t, s, "same")
	if inDefault.Namespace != names.DefaultNamespace {
		t.Fatalf("a create without a namespace landed in %q", inDefault.Namespace)
	}
	inA := mustCreateIn(t, s, "team-a", "same", nil)
	if inA.ID == inDefault.ID || inA.Namespace != "team-a" || inA.UID == inDefault.UID {
		t.Fatalf("same name in two namespaces: %+v and %+v", inDefault, inA)
	}
	// Another version is another name space too.
	if _, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
		Namespace: "team-a", Name: "same", ResourceTypeName: "Widget", ResourceTypeVersion: "v2"}}); err != nil {
		t.Fatalf("same name, other version: %v", err)
	}
	before := countEvents(t, el)
	_, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
		Namespace: "team-a", Name: "same", ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}})
	wantErr(t, err, storage.ErrNameTaken)
	if se := storeErr(err); se == nil || len(se.Fields) != 1 || se.Fields[0].Path != "/name" {
		t.Fatalf("name taken: %v", err)
	}
	_, err = s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
		Namespace: "nowhere", Name: "x", ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}})
	wantErr(t, err, storage.ErrNamespaceNotFound)
	if se := storeErr(err); se == nil || len(se.Fields) != 1 || se.Fields[0].Path != "/namespace" {
		t.Fatalf("missing namespace: %v", err)
	}
	_, err = s.CreateResource(ctx, storage.CreateResourceRequest{DryRun: true, Resource: resource.Resource{
		Namespace: "nowhere", Name: "x", ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}})
	wantErr(t, err, storage.ErrNamespaceNotFound)
	_, err = s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
		Namespace: "Not_A_Label", Name: "x", ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}})
	if se := storeErr(err); se == nil || !errors.Is(err, storage.ErrInvalid) || se.Fields[0].Path != "/namespace" {
		t.Fatalf("invalid namespace: %v", err)
	}
	if after := countEvents(t, el); after != before {
		t.Fatalf("refused creates wrote %d events", after-before)
	}

	for _, c := range []struct {
		ns   string
		want int64
	}{{"", inDefault.ID}, {names.DefaultNamespace, inDefault.ID}, {"team-a", inA.ID}} {
		got, err := s.GetResource(ctx, storage.ResourceKey{ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Namespace: c.ns, Name: "same"})
		if err != nil || got.ID != c.want {
			t.Errorf("get same in %q: %+v %v, want id %d", c.ns, got, err, c.want)
		}
	}
	_, err = s.GetResource(ctx, storage.ResourceKey{ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Namespace: "nowhere", Name: "same"})
	wantErr(t, err, storage.ErrNotFound)

	// The namespace is in every event and document of the resource.
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: inA.ID, Spec: []byte(`{"size":2}`)}); err != nil {
		t.Fatal(err)
	}
	for _, row := range outboxRows(t, el) {
		ev, err := eventstream.Decode(row.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Namespace string `json:"namespace"`
		}
		if err := json.Unmarshal(ev.ResourceJSON, &doc); err != nil {
			t.Fatal(err)
		}
		want := names.DefaultNamespace
		if row.ResourceID != inDefault.ID {
			want = "team-a"
		}
		if ev.Namespace != want || doc.Namespace != want {
			t.Errorf("event %d of resource %d: namespace %q, document's %q, want %q", row.Revision, row.ResourceID, ev.Namespace, doc.Namespace, want)
		}
	}
}

// testListPerNamespace: a list names one namespace or none (every
// namespace); type, status and label filters combine with it; pages keep it
// (a token of one namespace's list is refused for another's); an invalid
// namespace is refused, a missing one lists nothing.
func testListPerNamespace(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	mustType(t, s, "Gadget", "v1")
	mustNamespace(t, s, "team-a")
	mustNamespace(t, s, "team-b")
	var wantA, wantAWeb []string
	for i := range 7 {
		for _, ns := range []string{"default", "team-a", "team-b"} {
			tier := map[bool]string{true: "web", false: "db"}[i%2 == 0]
			r := mustCreateIn(t, s, ns, fmt.Sprintf("w%d", i), map[string]string{"tier": tier})
			if ns == "team-a" {
				wantA = append(wantA, r.Namespace+"/"+r.Name)
				if tier == "web" {
					wantAWeb = append(wantAWeb, r.Namespace+"/"+r.Name)
				}
			}
		}
	}
	if _, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
		Namespace: "team-a", Name: "g", ResourceTypeName: "Gadget", ResourceTypeVersion: "v1"}}); err != nil {
		t.Fatal(err)
	}
	list := func(req storage.ListResourcesRequest) []string {
		t.Helper()
		var out []*resource.Resource
		for {
			page, err := s.ListResources(ctx, req)
			if err != nil {
				t.Fatalf("list %+v: %v", req, err)
			}
			out = append(out, page.Resources...)
			if req.Continue = page.Continue; req.Continue == "" {
				return namesOf(out)
			}
		}
	}
	if got := list(storage.ListResourcesRequest{Namespace: "team-a", ResourceTypeName: "Widget", Limit: 2}); !slices.Equal(got, wantA) {
		t.Errorf("team-a's widgets by pages of 2: %v, want %v", got, wantA)
	}
	if got := list(storage.ListResourcesRequest{Namespace: "team-a", ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
		LabelSelector: "tier=web", Status: resource.StatusPending, Limit: 1}); !slices.Equal(got, wantAWeb) {
		t.Errorf("team-a's web widgets: %v, want %v", got, wantAWeb)
	}
	if got := list(storage.ListResourcesRequest{Namespace: "team-a", LabelSelector: "tier notin (web)"}); len(got) != 4 {
		t.Errorf("team-a's non-web resources (the gadget has no tier): %v", got)
	}
	if got := list(storage.ListResourcesRequest{Namespace: "team-a"}); len(got) != 8 {
		t.Errorf("everything in team-a: %v", got)
	}
	if got := list(storage.ListResourcesRequest{ResourceTypeName: "Widget", LabelSelector: "tier=db", Limit: 4}); len(got) != 9 {
		t.Errorf("db widgets of every namespace: %v", got)
	}
	if got := list(storage.ListResourcesRequest{Limit: 5}); len(got) != 22 {
		t.Errorf("everything: %d resources, want 22", len(got))
	}
	if got := list(storage.ListResourcesRequest{Namespace: "nowhere"}); len(got) != 0 {
		t.Errorf("a namespace that does not exist lists %v", got)
	}
	first, err := s.ListResources(ctx, storage.ListResourcesRequest{Namespace: "team-a", Limit: 2})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %+v %v", first, err)
	}
	for _, bad := range []storage.ListResourcesRequest{
		{Namespace: "team-b", Limit: 2, Continue: first.Continue},
		{Limit: 2, Continue: first.Continue},
		{Namespace: "Team_A"},
	} {
		if _, err := s.ListResources(ctx, bad); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("list %+v: %v, want invalid", bad, err)
		}
	}
	// A token of a list across every namespace is what it was before
	// namespaces existed: a list without a namespace accepts it.
	all, err := s.ListResources(ctx, storage.ListResourcesRequest{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListResources(ctx, storage.ListResourcesRequest{Namespace: "team-a", Limit: 2, Continue: all.Continue}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("an every-namespace token on a namespace's list: %v, want invalid", err)
	}
}

// testNamespaceDeletionWithFinalizers: deleting a namespace makes it
// terminating at once, refuses creates in it (and its re-creation), deletes
// each of its resources through the normal path (those without finalizers
// are purged at once, the others stay deleting until their finalizers are
// removed, by a client or by a reconciler's completion), leaves the other
// namespaces alone, and removes the namespace once its last resource is
// gone; it can then be created again.
func testNamespaceDeletionWithFinalizers(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	mustNamespace(t, s, "team-a")
	bare := mustCreateIn(t, s, "team-a", "bare", nil)
	held := mustCreateIn(t, s, "team-a", "held", nil, "example.com/hold")
	reconciled := mustCreateIn(t, s, "team-a", "reconciled", nil, "reconciler.no8s.io/noop")
	already := mustCreateIn(t, s, "team-a", "already", nil, "example.com/hold")
	if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: already.ID}); err != nil {
		t.Fatal(err)
	}
	other := mustCreateIn(t, s, names.DefaultNamespace, "held", nil, "example.com/hold")
	alreadyEvents := len(events(t, el, already.ID))

	del, err := s.DeleteNamespace(ctx, "team-a", false)
	if err != nil || del.Purged || del.Namespace.Status != resource.NamespaceTerminating || del.Namespace.DeletedAt == nil {
		t.Fatalf("delete namespace: %+v %v", del, err)
	}
	if got, _ := s.GetNamespace(ctx, "team-a"); got == nil || got.Status != resource.NamespaceTerminating {
		t.Fatalf("namespace after delete: %+v", got)
	}
	if _, err := s.GetResource(ctx, storage.ResourceKey{ID: bare.ID}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a resource without finalizers outlived its namespace's deletion: %v", err)
	}
	if got := events(t, el, bare.ID); !slices.Equal(got, []string{"CREATED", "DELETED", "PURGED"}) {
		t.Errorf("events of the resource without finalizers: %v", got)
	}
	for _, r := range []*resource.Resource{held, reconciled} {
		got, err := s.GetResource(ctx, storage.ResourceKey{ID: r.ID})
		if err != nil || got.Status != resource.StatusDeleting || got.Phase != resource.PhaseTerminating || got.DeletedAt == nil {
			t.Errorf("%s after its namespace's deletion: %+v %v", r.Name, got, err)
		}
		if ev := events(t, el, r.ID); !slices.Equal(ev, []string{"CREATED", "DELETED"}) {
			t.Errorf("events of %s: %v", r.Name, ev)
		}
	}
	if n := len(events(t, el, already.ID)); n != alreadyEvents {
		t.Errorf("a resource already deleting got %d more events", n-alreadyEvents)
	}
	if got, err := s.GetResource(ctx, storage.ResourceKey{ID: other.ID}); err != nil || got.Status != resource.StatusPending {
		t.Errorf("a resource of another namespace: %+v %v", got, err)
	}

	// Nothing new in a terminating namespace, nor the namespace again.
	before := countEvents(t, el)
	_, err = s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
		Namespace: "team-a", Name: "late", ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}})
	wantErr(t, err, storage.ErrNamespaceTerminating)
	if se := storeErr(err); se == nil || se.Fields[0].Path != "/namespace" {
		t.Errorf("create in a terminating namespace: %v", err)
	}
	_, err = s.CreateNamespace(ctx, "team-a", false)
	wantErr(t, err, storage.ErrNamespaceTerminating)
	// Deleting again, and finalizing, changes nothing while finalizers remain.
	if again, err := s.DeleteNamespace(ctx, "team-a", false); err != nil || again.Purged || again.Namespace.Status != resource.NamespaceTerminating {
		t.Fatalf("delete again: %+v %v", again, err)
	}
	if res, err := s.FinalizeNamespace(ctx, "team-a"); err != nil || res.Purged {
		t.Fatalf("finalize with finalizers left: %+v %v", res, err)
	}
	if after := countEvents(t, el); after != before {
		t.Errorf("refused creates and repeated deletes wrote %d events", after-before)
	}

	// A client removes one finalizer; the reconciler's cleanup removes its
	// own through its completion.
	if res, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: held.ID, Remove: []string{"example.com/hold"}}); err != nil || !res.Purged {
		t.Fatalf("remove held's finalizer: %+v %v", res, err)
	}
	if res, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: already.ID, Remove: []string{"example.com/hold"}}); err != nil || !res.Purged {
		t.Fatalf("remove already's finalizer: %+v %v", res, err)
	}
	if res, err := s.FinalizeNamespace(ctx, "team-a"); err != nil || res.Purged {
		t.Fatalf("finalize with the reconciled resource left: %+v %v", res, err)
	}
	l := acquire(t, s, reconciled.ID, "noop/replica-1")
	done := complete(t, s, storage.CompleteReconcileRequest{ResourceID: reconciled.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess,
		RemoveFinalizers: []string{"reconciler.no8s.io/noop"}})
	if !done.Purged {
		t.Fatalf("the reconciler's cleanup did not purge: %+v", done)
	}
	res, err := s.FinalizeNamespace(ctx, "team-a")
	if err != nil || !res.Purged {
		t.Fatalf("finalize an empty terminating namespace: %+v %v", res, err)
	}
	_, err = s.GetNamespace(ctx, "team-a")
	wantErr(t, err, storage.ErrNotFound)
	if list, _ := s.ListNamespaces(ctx); len(list) != 1 || list[0].Name != names.DefaultNamespace {
		t.Errorf("namespaces left: %+v", list)
	}
	if got, err := s.GetResource(ctx, storage.ResourceKey{ID: other.ID}); err != nil || got.DeletedAt != nil {
		t.Errorf("the other namespace's resource: %+v %v", got, err)
	}
	// The name is free again.
	again := mustNamespace(t, s, "team-a")
	if again.UID == del.Namespace.UID || again.Status != resource.NamespaceActive {
		t.Fatalf("namespace created again: %+v (the old one: %+v)", again, del.Namespace)
	}
	if r := mustCreateIn(t, s, "team-a", "bare", nil); r.ID <= other.ID {
		t.Fatalf("id %d handed out again", r.ID)
	}
}

// testNamespaceDeleteRacesCreates: creates in a namespace race its
// deletion; every create either failed (terminating, or not found once it
// is gone) or made a resource that the deletion then deleted: when the
// namespace is gone, no resource of it is left.
func testNamespaceDeleteRacesCreates(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	for round := range 10 {
		mustNamespace(t, s, "race")
		var wg sync.WaitGroup
		var mu sync.Mutex
		var made []int64
		for w := range 4 {
			wg.Go(func() {
				for i := range 5 {
					r, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
						Namespace: "race", Name: fmt.Sprintf("r%d-%d-%d", round, w, i), ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
						Finalizers: []string{"example.com/hold"}}})
					switch {
					case err == nil:
						mu.Lock()
						made = append(made, r.ID)
						mu.Unlock()
					case !errors.Is(err, storage.ErrNamespaceTerminating) && !errors.Is(err, storage.ErrNamespaceNotFound):
						t.Errorf("create during the namespace's deletion: %v", err)
					}
				}
			})
		}
		del, err := s.DeleteNamespace(ctx, "race", false)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: delete namespace: %v", round, err)
		}
		// Every resource made is deleting (none escaped the deletion).
		left, err := s.ListResources(ctx, storage.ListResourcesRequest{Namespace: "race", Limit: storage.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(left.Resources) != len(made) || (len(made) > 0) == del.Purged {
			t.Fatalf("round %d: %d resources made, %d left, namespace purged: %v", round, len(made), len(left.Resources), del.Purged)
		}
		for _, r := range left.Resources {
			if r.DeletedAt == nil {
				t.Fatalf("round %d: %s was created in a terminating namespace and not deleted", round, r.Name)
			}
			if _, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Remove: []string{"example.com/hold"}}); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := s.FinalizeNamespace(ctx, "race"); len(made) > 0 && (err != nil || !res.Purged) {
			t.Fatalf("round %d: finalize: %+v %v", round, res, err)
		}
		if _, err := s.GetNamespace(ctx, "race"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("round %d: namespace still there: %v", round, err)
		}
	}
}

// testOwnerReferencesStayInNamespace: an owner reference may name a
// resource of the same namespace (or one that does not exist), never one
// of another namespace.
func testOwnerReferencesStayInNamespace(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	mustNamespace(t, s, "team-a")
	owner := mustCreateIn(t, s, "team-a", "owner", nil)
	ref := func(uid string) []resource.OwnerReference {
		return []resource.OwnerReference{{UID: uid, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: "owner", Controller: true}}
	}
	create := func(ns, name string, owners []resource.OwnerReference) error {
		_, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
			Namespace: ns, Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", OwnerReferences: owners}})
		return err
	}
	if err := create("team-a", "child", ref(owner.UID)); err != nil {
		t.Fatalf("child in its owner's namespace: %v", err)
	}
	if err := create("team-a", "orphan", ref("00000000-0000-4000-8000-000000000000")); err != nil {
		t.Fatalf("an owner that does not exist: %v", err)
	}
	before := countEvents(t, el)
	err := create(names.DefaultNamespace, "child", ref(owner.UID))
	wantErr(t, err, storage.ErrInvalid)
	if se := storeErr(err); se == nil || len(se.Fields) != 1 || se.Fields[0].Path != "/owner_references/0/uid" {
		t.Fatalf("an owner in another namespace: %v", err)
	}
	if after := countEvents(t, el); after != before {
		t.Fatalf("a refused owner reference wrote %d events", after-before)
	}
}

// testUpdateOwnerReferences: an update may set, replace and drop owner
// references (one MODIFIED event each, resource_version up, generation
// unchanged); an update that does not set them keeps them; setting the
// same list changes nothing; an owner in another namespace is refused and
// nothing is written.
func testUpdateOwnerReferences(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	mustNamespace(t, s, "team-a")
	mustNamespace(t, s, "team-b")
	a := mustCreateIn(t, s, "team-a", "owner-a", nil)
	b := mustCreateIn(t, s, "team-a", "owner-b", nil)
	other := mustCreateIn(t, s, "team-b", "owner-c", nil)
	child := mustCreateIn(t, s, "team-a", "child", nil)
	ref := func(r *resource.Resource) resource.OwnerReference {
		return resource.OwnerReference{UID: r.UID, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: r.Name, Controller: true, BlockOwnerDeletion: true}
	}
	update := func(set bool, owners ...resource.OwnerReference) (*resource.Resource, error) {
		return s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: child.ID, SetOwnerReferences: set, OwnerReferences: owners})
	}
	check := func(what string, got *resource.Resource, want ...resource.OwnerReference) {
		t.Helper()
		read, err := s.GetResource(ctx, storage.ResourceKey{ID: child.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []*resource.Resource{got, read} {
			if len(r.OwnerReferences) != len(want) || (len(want) > 0 && !slices.Equal(r.OwnerReferences, want)) {
				t.Fatalf("%s: owner references %+v, want %+v", what, r.OwnerReferences, want)
			}
			if r.Generation != child.Generation {
				t.Fatalf("%s: generation %d, want %d (owners are metadata)", what, r.Generation, child.Generation)
			}
		}
	}
	before := countEvents(t, el)
	got, err := update(true, ref(a))
	if err != nil {
		t.Fatal(err)
	}
	check("set", got, ref(a))
	if got.ResourceVersion <= child.ResourceVersion {
		t.Fatalf("resource_version %d did not grow from %d", got.ResourceVersion, child.ResourceVersion)
	}
	rv := got.ResourceVersion
	if got, err = update(true, ref(a)); err != nil || got.ResourceVersion != rv {
		t.Fatalf("setting the same owners wrote: %v %v", got, err)
	}
	if got, err = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: child.ID, SetAnnotations: true, Annotations: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	check("an update that does not set them", got, ref(a))
	if got, err = update(true, ref(a), ref(b)); err != nil {
		t.Fatal(err)
	}
	check("replace", got, ref(a), ref(b))
	before2 := countEvents(t, el)
	_, err = update(true, ref(a), ref(other))
	wantErr(t, err, storage.ErrInvalid)
	if se := storeErr(err); se == nil || len(se.Fields) != 1 || se.Fields[0].Path != "/owner_references/1/uid" {
		t.Fatalf("an owner in another namespace: %v", err)
	}
	if n := countEvents(t, el); n != before2 {
		t.Fatalf("a refused owner change wrote %d events", n-before2)
	}
	if got, err = update(true); err != nil {
		t.Fatal(err)
	}
	check("drop", got)
	if n := countEvents(t, el); n != before+4 {
		t.Fatalf("%d events, want 4 (set, annotate, replace, drop)", n-before)
	}
}
