package tenancy

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func res(id string, deps ...string) TResource { return TResource{ID: id, DependIDs: deps} }

func ids(rs []TResource, order []int) []string {
	var out []string
	for _, i := range order {
		out = append(out, rs[i].ID)
	}
	return out
}

// TestOrder: dependencies first, template order otherwise; a chain given
// backwards comes out forwards; a diamond keeps template order among peers.
func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		rs   []TResource
		want []string
	}{
		{[]TResource{res("a"), res("b"), res("c")}, []string{"a", "b", "c"}},
		{[]TResource{res("c", "b"), res("b", "a"), res("a")}, []string{"a", "b", "c"}},
		{[]TResource{res("app", "db", "cache"), res("cache"), res("db"), res("ingress", "app")}, []string{"cache", "db", "app", "ingress"}},
		{[]TResource{res("d", "b", "c"), res("b", "a"), res("c", "a"), res("a")}, []string{"a", "b", "c", "d"}},
		{nil, nil},
	} {
		order, err := Order(tc.rs)
		if err != nil || !slices.Equal(ids(tc.rs, order), tc.want) {
			t.Errorf("Order(%v) = %v, %v; want %v", tc.rs, ids(tc.rs, order), err, tc.want)
		}
	}
}

// TestOrderCycle: a cycle is a *CycleError naming it; a self-dependency
// too; an unknown dependId and a repeated id are errors.
func TestOrderCycle(t *testing.T) {
	for _, tc := range []struct {
		rs   []TResource
		want string
	}{
		{[]TResource{res("x"), res("a", "c"), res("b", "a"), res("c", "b")}, "dependency cycle: a -> c -> b -> a"},
		{[]TResource{res("a"), res("b", "b")}, "dependency cycle: b -> b"},
		{[]TResource{res("a", "b"), res("b", "a"), res("c", "a")}, "dependency cycle: a -> b -> a"},
	} {
		_, err := Order(tc.rs)
		var ce *CycleError
		if !errors.As(err, &ce) || err.Error() != tc.want {
			t.Errorf("Order(%v) = %v; want %s", tc.rs, err, tc.want)
		}
	}
	if _, err := Order([]TResource{res("a", "zz")}); err == nil || !strings.Contains(err.Error(), `"zz"`) {
		t.Errorf("unknown dependency: %v", err)
	}
	if _, err := Order([]TResource{res("a"), res("a")}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("repeated id: %v", err)
	}
}

// TestFromJSONError: a row whose JSON does not parse stops the render with
// an error wrapping ErrFromJSON that names the path and the bad text.
func TestFromJSONError(t *testing.T) {
	r := TResource{ID: "cm", NameTemplate: "x", Spec: json.RawMessage(`{"j":"{{ (fromJson .cfg).a }}"}`)}
	_, err := NewRenderer().Render(t.Context(), r, Values{"cfg": `{"a":`})
	var re *RenderError
	if !errors.Is(err, ErrFromJSON) || !errors.As(err, &re) || re.Path != "/spec/j" || !strings.Contains(err.Error(), `"{\"a\":"`) {
		t.Fatalf("%v", err)
	}
	got, err := NewRenderer().Render(t.Context(), r, Values{"cfg": `{"a":"b"}`})
	if err != nil || string(got.Spec) != `{"j":"b"}` {
		t.Fatalf("%s %v", got.Spec, err)
	}
}

// TestPolicies: empty fields mean the seed's defaults.
func TestPolicies(t *testing.T) {
	var r TResource
	if r.Once() || r.Retain() || r.Force() || r.Patch() != PatchApply || !r.Wait() || r.Timeout().Seconds() != DefaultTimeoutSeconds {
		t.Fatalf("defaults: %+v", r)
	}
	no := false
	r = TResource{CreationPolicy: CreationOnce, DeletionPolicy: DeletionRetain, ConflictPolicy: ConflictForce, PatchStrategy: PatchMerge, WaitForReady: &no, TimeoutSeconds: 3}
	if !r.Once() || !r.Retain() || !r.Force() || r.Patch() != PatchMerge || r.Wait() || r.Timeout().Seconds() != 3 {
		t.Fatalf("set: %+v", r)
	}
}
