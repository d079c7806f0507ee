package pgstore_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
	"github.com/no8s/no8s/services/store/storage"
)

// strictjson.Expand writes numbers exactly as PostgreSQL's jsonb reads them
// back, and the store keeps accepting what it returned.
func TestExpandMatchesPostgreSQL(t *testing.T) {
	_, pool := newStore(t)
	for _, lit := range []string{
		"1e2", "1.50e1", "1.5e-3", "-0", "-0.00", "0e5", "1E+2", "12.3400e-1", "0.000e3", "1e-5", "100e-2", "-12.5",
		"1e300", "-1.7976931348623157e308", "5e-324", "2.5e-5", "123456789012345678901234567890.0001", "0e-900",
	} {
		if !strictjson.NumberOK(lit) {
			t.Fatalf("%s refused", lit)
		}
		var got string
		if err := pool.QueryRow(t.Context(), `SELECT ($1::text)::jsonb::text`, lit).Scan(&got); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		if want := strictjson.Expand(lit); got != want {
			t.Errorf("PostgreSQL writes %s as %.60s, Expand as %.60s", lit, got, want)
		}
		if !strictjson.NumberOK(got) {
			t.Errorf("the stored form of %s is refused", lit)
		}
	}
}

// Specs the database cannot hold are refused with their path, an equal spec
// in another notation is no change, and a stored spec with numbers in
// expanded notation is read, updated and compared by value.
func TestSpecValues(t *testing.T) {
	s, pool := newStore(t)
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
	if n := countRows(t, pool, "resources"); n != 0 {
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
