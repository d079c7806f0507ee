package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

func testResourceLifecycle(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")

	r := mustCreate(t, s, "one", "example.com/hold")
	if r.Generation != 1 || r.Status != resource.StatusPending || r.ResourceVersion == 0 || r.UID == "" {
		t.Fatalf("unexpected new resource: %+v", r)
	}
	got, err := s.GetResource(ctx, storage.ResourceKey{ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: "one"})
	if err != nil || got.ID != r.ID || string(got.Spec) != `{"size":1}` {
		t.Fatalf("get by name: %+v %v", got, err)
	}

	// Same spec: nothing written, same revision.
	same, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{ "size" : 1 }`)})
	if err != nil || same.ResourceVersion != r.ResourceVersion || same.Generation != 1 {
		t.Fatalf("no-op update changed something: %+v %v", same, err)
	}
	// Labels only: new revision, same generation.
	lab, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Labels: map[string]string{"app": "db"}, SetLabels: true})
	if err != nil || lab.Generation != 1 || lab.ResourceVersion <= r.ResourceVersion {
		t.Fatalf("label update: %+v %v", lab, err)
	}
	// Spec change: generation 2.
	up, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":2}`), ExpectedResourceVersion: lab.ResourceVersion})
	if err != nil || up.Generation != 2 || up.Labels["app"] != "db" {
		t.Fatalf("spec update: %+v %v", up, err)
	}
	// Stale precondition.
	_, err = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":3}`), ExpectedResourceVersion: lab.ResourceVersion})
	wantErr(t, err, storage.ErrConflict)

	// The type cannot go while the resource exists.
	typ, _ := s.GetType(ctx, storage.TypeKey{Name: "Widget", Version: "v1"})
	wantErr(t, s.DeleteType(ctx, typ.ID, false), storage.ErrInUse)

	// Delete: stays deleting while the finalizer remains.
	del, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID})
	if err != nil || del.Purged || del.Resource.Status != resource.StatusDeleting || del.Resource.DeletedAt == nil || del.Resource.Phase != resource.PhaseTerminating {
		t.Fatalf("delete: %+v %v", del, err)
	}
	_, err = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":9}`)})
	wantErr(t, err, storage.ErrDeleting)
	_, err = s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Add: []string{"example.com/other"}})
	wantErr(t, err, storage.ErrFinalizerBlocked)
	// Deleting again changes nothing.
	again, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID})
	if err != nil || again.Resource.ResourceVersion != del.Resource.ResourceVersion {
		t.Fatalf("second delete wrote: %+v %v", again, err)
	}
	fin, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Remove: []string{"example.com/hold"}})
	if err != nil || !fin.Purged {
		t.Fatalf("removing the last finalizer did not purge: %+v %v", fin, err)
	}
	_, err = s.GetResource(ctx, storage.ResourceKey{ID: r.ID})
	wantErr(t, err, storage.ErrNotFound)
	if err := s.DeleteType(ctx, typ.ID, false); err != nil {
		t.Fatalf("delete unused type: %v", err)
	}

	// Events: CREATED, MODIFIED (labels), MODIFIED (spec), DELETED, PURGED.
	types := events(t, el, r.ID)
	want := []string{"CREATED", "MODIFIED", "MODIFIED", "DELETED", "PURGED"}
	if len(types) != len(want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("events %v, want %v", types, want)
		}
	}
}

func testDeleteWithoutFinalizersPurges(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "gone")
	res, err := s.DeleteResource(t.Context(), storage.DeleteResourceRequest{ID: r.ID})
	if err != nil || !res.Purged {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if n := countResources(t, s); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}

func testBadInputWritesNothing(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	mustCreate(t, s, "taken")
	before := countEvents(t, el)

	cases := []struct {
		name string
		res  resource.Resource
		want error
	}{
		{"duplicate", resource.Resource{Name: "taken", ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}, storage.ErrNameTaken},
		{"bad name", resource.Resource{Name: "Not_DNS", ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}, storage.ErrInvalid},
		{"unknown type", resource.Resource{Name: "x", ResourceTypeName: "Nope", ResourceTypeVersion: "v1"}, storage.ErrUnknownType},
		{"spec not object", resource.Resource{Name: "x", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`[1]`)}, storage.ErrInvalid},
		{"bad label", resource.Resource{Name: "x", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Labels: map[string]string{"a b": "c"}}, storage.ErrInvalid},
		{"bad finalizer", resource.Resource{Name: "x", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Finalizers: []string{"not valid!"}}, storage.ErrInvalid},
		{"spec too large", resource.Resource{Name: "x", ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
			Spec: json.RawMessage(`{"a":"` + string(make([]byte, 0)) + bigString(names.MaxSpecBytes) + `"}`)}, storage.ErrTooLarge},
	}
	for _, c := range cases {
		_, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: c.res})
		if storeErr(err) == nil || !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	_, err := s.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(schemaJSON)})
	wantErr(t, err, storage.ErrNameTaken)
	_, err = s.CreateType(ctx, storage.CreateTypeRequest{Name: "widget", Version: "1", Schema: []byte(schemaJSON)})
	if se := storeErr(err); se == nil || len(se.Fields) != 2 {
		t.Fatalf("bad name and version: %v", err)
	}
	if after := countEvents(t, el); after != before {
		t.Fatalf("bad input wrote %d events", after-before)
	}
	if n := countResources(t, s); n != 1 {
		t.Fatalf("%d resources, want 1", n)
	}
}

func bigString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

func testDryRunWritesNothing(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r, err := s.CreateResource(ctx, storage.CreateResourceRequest{DryRun: true, Resource: resource.Resource{
		Name: "dry", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"size":1}`)}})
	if err != nil || r.Name != "dry" || r.Status != resource.StatusPending {
		t.Fatalf("dry-run create: %+v %v", r, err)
	}
	real := mustCreate(t, s, "real")
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: real.ID, Spec: []byte(`{"size":5}`), DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: real.ID, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetResource(ctx, storage.ResourceKey{ID: real.ID})
	if err != nil || got.Generation != 1 || got.Status != resource.StatusPending {
		t.Fatalf("dry runs changed the resource: %+v %v", got, err)
	}
	if n := countResources(t, s); n != 1 {
		t.Fatalf("%d resources, want 1", n)
	}
	if n := countEvents(t, el); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
}

func testListPagingAndSelectors(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	for i := 0; i < 25; i++ {
		tier := "front"
		if i%2 == 1 {
			tier = "back"
		}
		_, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
			Name: "w" + string(rune('a'+i)), ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
			Labels: map[string]string{"tier": tier}, Spec: json.RawMessage(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	tok := ""
	for {
		page, err := s.ListResources(ctx, storage.ListResourcesRequest{Limit: 10, Continue: tok, LabelSelector: "tier=front"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Resources {
			if r.Labels["tier"] != "front" {
				t.Fatalf("selector leaked %+v", r)
			}
		}
		seen += len(page.Resources)
		if page.Continue == "" {
			break
		}
		tok = page.Continue
	}
	if seen != 13 {
		t.Fatalf("saw %d front resources, want 13", seen)
	}
	for sel, want := range map[string]int{"tier!=front": 12, "tier in (front,back)": 25, "tier notin (back)": 13, "tier": 25, "!tier": 0} {
		page, err := s.ListResources(ctx, storage.ListResourcesRequest{Limit: 1000, LabelSelector: sel})
		if err != nil || len(page.Resources) != want {
			t.Errorf("selector %q: %d resources (err %v), want %d", sel, len(page.Resources), err, want)
		}
	}
	_, err := s.ListResources(ctx, storage.ListResourcesRequest{Continue: tok})
	if !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("token reused with other filters: %v", err)
	}
	_, err = s.ListResources(ctx, storage.ListResourcesRequest{Limit: 1001})
	if !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("limit 1001: %v", err)
	}
}

// testTypeDeleteRacesCreates deletes a type while creates of its resources
// run: either the delete is refused, or no resource of the type remains.
func testTypeDeleteRacesCreates(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	for round := 0; round < 20; round++ {
		typ := mustType(t, s, "Widget", "v1")
		done := make(chan struct{})
		for w := 0; w < 4; w++ {
			go func() {
				defer func() { done <- struct{}{} }()
				for i := 0; i < 5; i++ {
					_, _ = s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
						Name: fmt.Sprintf("r%d-%d-%d", round, w, i), ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}})
				}
			}()
		}
		delErr := s.DeleteType(ctx, typ.ID, false)
		for w := 0; w < 4; w++ {
			<-done
		}
		// Either the type is gone and none of its resources remain, or it
		// stays and the resources created meanwhile name it.
		left := allResources(t, s)
		_, getErr := s.GetType(ctx, storage.TypeKey{ID: typ.ID})
		switch {
		case delErr == nil && (len(left) != 0 || !errors.Is(getErr, storage.ErrNotFound)):
			t.Fatalf("round %d: the type was deleted, yet %d resources outlived it (get type: %v)", round, len(left), getErr)
		case delErr != nil && !errors.Is(delErr, storage.ErrInUse):
			t.Fatalf("round %d: delete type: %v", round, delErr)
		case delErr != nil && (len(left) == 0 || getErr != nil):
			t.Fatalf("round %d: delete refused as in use, with %d resources (get type: %v)", round, len(left), getErr)
		}
		for _, r := range left {
			if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID}); err != nil {
				t.Fatal(err)
			}
		}
		if delErr != nil {
			if err := s.DeleteType(ctx, typ.ID, false); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// testListDocumentsMatchResources checks that the documents a list returns
// are the canonical documents of the same resources.
func testListDocumentsMatchResources(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	for i, ann := range []string{"plain", "quote \" back\\slash \n tab\t ctl\x01 <html>&", "ünïcødé ✓ \u2028"} {
		_, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
			Name: fmt.Sprintf("doc-%d", i), ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
			Labels: map[string]string{"app": "web", "tier": "a"}, Annotations: map[string]string{"example.com/note": ann},
			Finalizers: []string{"example.com/hold"}, Spec: json.RawMessage(`{"size":12345678901234567890,"nested":{"a":[1,2,{"b":null}]}}`),
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: 1}); err != nil {
		t.Fatal(err)
	}
	typed, err := s.ListResources(ctx, storage.ListResourcesRequest{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := s.ListResources(ctx, storage.ListResourcesRequest{Limit: 2, Documents: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs.Documents) != 2 || docs.Continue == "" || docs.Continue != typed.Continue {
		t.Fatalf("documents page: %d documents, continue %q (typed %q)", len(docs.Documents), docs.Continue, typed.Continue)
	}
	rest, err := s.ListResources(ctx, storage.ListResourcesRequest{Limit: 2, Documents: true, Continue: docs.Continue})
	if err != nil || len(rest.Documents) != 1 || rest.Continue != "" {
		t.Fatalf("second page: %+v %v", rest, err)
	}
	for i, r := range typed.Resources {
		want, err := resource.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(docs.Documents[i]) {
			t.Fatalf("document %d is not valid JSON: %s", i, docs.Documents[i])
		}
		if !SameJSON(want, docs.Documents[i]) {
			t.Fatalf("document %d differs:\n got %s\nwant %s", i, docs.Documents[i], want)
		}
	}
}

// Specs the database cannot hold are refused with their path, an equal spec
// in another notation is no change, and a stored spec with numbers in
// expanded notation is read, updated and compared by value.
func testSpecValues(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	for _, spec := range []string{`{"s":"a\u0000"}`, `{"n":1e400}`, `{"n":1,"n":2}`, `{"s":"\ud800"}`} {
		_, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
			Name: "bad", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(spec),
		}})
		if pe := storeErr(err); pe == nil || !errors.Is(err, storage.ErrInvalid) || len(pe.Fields) == 0 || pe.Fields[0].Path[:6] != "/spec/" {
			t.Errorf("spec %s: error %v", spec, err)
		}
	}
	if n := countResources(t, s); n != 0 {
		t.Fatalf("%d resources written", n)
	}
	r, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
		Name: "big", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"n":1e300,"m":100}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	same, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"m":1e2,"n":10e299}`)})
	if err != nil {
		t.Fatal(err)
	}
	if same.Generation != r.Generation || same.ResourceVersion != r.ResourceVersion {
		t.Fatalf("equal spec in other notation: generation %d→%d", r.Generation, same.Generation)
	}
	_, err = s.CreateType(ctx, storage.CreateTypeRequest{Name: "Gadget", Version: "v1", Description: "a\x00b", Schema: []byte(schemaJSON)})
	wantErr(t, err, storage.ErrInvalid)
	_, err = s.CreateType(ctx, storage.CreateTypeRequest{Name: "Gadget", Version: "v1", Schema: []byte(`{"type":"object","title":"\u0000"}`)})
	wantErr(t, err, storage.ErrInvalid)
}

// testGenerationRules: generation moves on a spec change only; labels,
// annotations, finalizers and status (a reconcile) keep it, and so does an
// equal spec in another notation. Every change still takes a new
// resource_version.
func testGenerationRules(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "gen")
	if r.Generation != 1 || r.ObservedGeneration != 0 {
		t.Fatalf("new resource: generation %d observed %d", r.Generation, r.ObservedGeneration)
	}
	rv := r.ResourceVersion
	step := func(what string, wantGen int64, changes bool, do func() (*resource.Resource, error)) {
		t.Helper()
		got, err := do()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.Generation != wantGen {
			t.Errorf("%s: generation %d, want %d", what, got.Generation, wantGen)
		}
		if changes && got.ResourceVersion <= rv || !changes && got.ResourceVersion != rv {
			t.Errorf("%s: resource_version %d after %d (a change: %v)", what, got.ResourceVersion, rv, changes)
		}
		rv = got.ResourceVersion
	}
	step("labels", 1, true, func() (*resource.Resource, error) {
		return s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, SetLabels: true, Labels: map[string]string{"app": "db"}})
	})
	step("annotations", 1, true, func() (*resource.Resource, error) {
		return s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, SetAnnotations: true, Annotations: map[string]string{"note": "x"}})
	})
	step("finalizer", 1, true, func() (*resource.Resource, error) {
		res, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Add: []string{"example.com/keep"}})
		if err != nil {
			return nil, err
		}
		return res.Resource, nil
	})
	step("equal spec, other notation", 1, false, func() (*resource.Resource, error) {
		return s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(` { "size" : 1e0 } `)})
	})
	step("status (a reconcile)", 1, true, func() (*resource.Resource, error) {
		l, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: r.ID, Holder: "w"})
		if err != nil {
			return nil, err
		}
		res, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: r.ID, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess})
		if err != nil {
			return nil, err
		}
		if res.Resource.ObservedGeneration != 1 || res.Resource.Status != resource.StatusReady {
			t.Errorf("reconciled: observed %d status %s", res.Resource.ObservedGeneration, res.Resource.Status)
		}
		return res.Resource, nil
	})
	step("spec", 2, true, func() (*resource.Resource, error) {
		return s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":2}`)})
	})
	step("spec and labels", 3, true, func() (*resource.Resource, error) {
		return s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":3}`), SetLabels: true, Labels: map[string]string{"app": "web"}})
	})
	got, err := s.GetResource(ctx, storage.ResourceKey{ID: r.ID})
	if err != nil || got.Generation != 3 || got.ObservedGeneration != 1 || got.ResourceVersion != rv || string(got.Spec) != `{"size":3}` {
		t.Fatalf("stored: %+v %v", got, err)
	}
}

// testOptimisticConcurrency: every write that names a resource_version is
// refused with the typed conflict error once the resource changed, and
// writes nothing; the current one goes through.
func testOptimisticConcurrency(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "occ", "example.com/hold")
	cur, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":2}`), ExpectedResourceVersion: r.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	before := countEvents(t, el)
	stale := r.ResourceVersion
	conflict := func(what string, err error) {
		t.Helper()
		se := storeErr(err)
		if se == nil || !errors.Is(err, storage.ErrConflict) || se.Detail == "" {
			t.Errorf("%s with a stale resource_version: %v, want a *storage.Error wrapping ErrConflict", what, err)
		}
	}
	_, err = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":3}`), ExpectedResourceVersion: stale})
	conflict("spec update", err)
	_, err = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, SetLabels: true, Labels: map[string]string{"x": "y"}, ExpectedResourceVersion: stale})
	conflict("label update", err)
	_, err = s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Add: []string{"example.com/x"}, ExpectedResourceVersion: stale})
	conflict("finalizer update", err)
	_, err = s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID, ExpectedResourceVersion: stale})
	conflict("delete", err)
	if n := countEvents(t, el); n != before {
		t.Fatalf("refused writes left %d events", n-before)
	}
	got, err := s.GetResource(ctx, storage.ResourceKey{ID: r.ID})
	if err != nil || got.ResourceVersion != cur.ResourceVersion || got.Generation != 2 || got.DeletedAt != nil || len(got.Finalizers) != 1 {
		t.Fatalf("refused writes changed the resource: %+v %v", got, err)
	}
	del, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID, ExpectedResourceVersion: cur.ResourceVersion})
	if err != nil || del.Resource.DeletedAt == nil {
		t.Fatalf("delete at the current resource_version: %+v %v", del, err)
	}
	// Concurrent writers at the same resource_version: exactly one wins.
	r2 := mustCreate(t, s, "race")
	wins := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r2.ID, Spec: fmt.Appendf(nil, `{"size":%d}`, 10+i), ExpectedResourceVersion: r2.ResourceVersion})
			wins <- err
		}()
	}
	won := 0
	for range 8 {
		if err := <-wins; err == nil {
			won++
		} else {
			conflict("racing update", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d racing updates at one resource_version won, want 1", won)
	}
}
