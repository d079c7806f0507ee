package pgstore_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
)

func newStore(t *testing.T) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := migrate.Up(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	return pgstore.New(pool, storage.Options{}), pool
}

const schemaJSON = `{"type":"object","properties":{"size":{"type":"integer"}}}`

func mustType(t *testing.T, s *pgstore.Store, name, version string) *resource.Type {
	t.Helper()
	typ, err := s.CreateType(t.Context(), storage.CreateTypeRequest{Name: name, Version: version, Schema: []byte(schemaJSON)})
	if err != nil {
		t.Fatalf("create type: %v", err)
	}
	return typ
}

func mustCreate(t *testing.T, s *pgstore.Store, name string, finalizers ...string) *resource.Resource {
	t.Helper()
	r, err := s.CreateResource(t.Context(), storage.CreateResourceRequest{Resource: resource.Resource{
		Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"size":1}`),
		Labels: map[string]string{"app": "web"}, Finalizers: finalizers,
	}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return r
}

// wantErr fails unless err is a store error wrapping want.
func wantErr(t *testing.T, err error, want error) {
	t.Helper()
	if se := storeErr(err); se == nil || !errors.Is(err, want) {
		t.Fatalf("got error %v (%#v), want %v", err, se, want)
	}
}

// storeErr returns the *storage.Error in err's chain, or nil.
func storeErr(err error) *storage.Error {
	var se *storage.Error
	if errors.As(err, &se) {
		return se
	}
	return nil
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestResourceLifecycle(t *testing.T) {
	s, pool := newStore(t)
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
	del, err := s.DeleteResource(ctx, r.ID, 0, false)
	if err != nil || del.Purged || del.Resource.Status != resource.StatusDeleting || del.Resource.DeletedAt == nil || del.Resource.Phase != resource.PhaseTerminating {
		t.Fatalf("delete: %+v %v", del, err)
	}
	_, err = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(`{"size":9}`)})
	wantErr(t, err, storage.ErrDeleting)
	_, err = s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Add: []string{"example.com/other"}})
	wantErr(t, err, storage.ErrFinalizerBlocked)
	// Deleting again changes nothing.
	again, err := s.DeleteResource(ctx, r.ID, 0, false)
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
	rows, err := pool.Query(ctx, `SELECT event_type FROM outbox WHERE resource_id = $1 ORDER BY revision`, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for rows.Next() {
		var et string
		_ = rows.Scan(&et)
		types = append(types, et)
	}
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

func TestDeleteWithoutFinalizersPurges(t *testing.T) {
	s, pool := newStore(t)
	mustType(t, s, "Widget", "v1")
	r := mustCreate(t, s, "gone")
	res, err := s.DeleteResource(t.Context(), r.ID, 0, false)
	if err != nil || !res.Purged {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if n := countRows(t, pool, "resources"); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	s, pool := newStore(t)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	mustCreate(t, s, "taken")
	before := countRows(t, pool, "outbox")

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
	if after := countRows(t, pool, "outbox"); after != before {
		t.Fatalf("bad input wrote %d events", after-before)
	}
	if n := countRows(t, pool, "resources"); n != 1 {
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

func TestDryRunWritesNothing(t *testing.T) {
	s, pool := newStore(t)
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
	if _, err := s.DeleteResource(ctx, real.ID, 0, true); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetResource(ctx, storage.ResourceKey{ID: real.ID})
	if err != nil || got.Generation != 1 || got.Status != resource.StatusPending {
		t.Fatalf("dry runs changed the resource: %+v %v", got, err)
	}
	if n := countRows(t, pool, "resources"); n != 1 {
		t.Fatalf("%d resources, want 1", n)
	}
	if n := countRows(t, pool, "outbox"); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
}

func TestListPagingAndSelectors(t *testing.T) {
	s, _ := newStore(t)
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

// TestTypeDeleteRacesCreates deletes a type while creates of its resources
// run: either the delete is refused, or no resource of the type remains.
func TestTypeDeleteRacesCreates(t *testing.T) {
	s, pool := newStore(t)
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
		var orphans int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM resources r WHERE NOT EXISTS (SELECT 1 FROM resource_types t WHERE t.id = r.resource_type_id)`).Scan(&orphans); err != nil {
			t.Fatal(err)
		}
		if orphans != 0 {
			t.Fatalf("round %d: %d resources outlived their type (delete: %v)", round, orphans, delErr)
		}
		if _, err := pool.Exec(ctx, `DELETE FROM resources; DELETE FROM resource_types`); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListDocumentsMatchResources checks that the documents a list returns
// are the canonical documents of the same resources.
func TestListDocumentsMatchResources(t *testing.T) {
	s, _ := newStore(t)
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
	if _, err := s.DeleteResource(ctx, 1, 0, false); err != nil {
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
		var a, b any
		da := json.NewDecoder(bytes.NewReader(want))
		da.UseNumber()
		db := json.NewDecoder(bytes.NewReader(docs.Documents[i]))
		db.UseNumber()
		if da.Decode(&a) != nil || db.Decode(&b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("document %d differs:\n got %s\nwant %s", i, docs.Documents[i], want)
		}
	}
}
