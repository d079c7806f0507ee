package tenant

import (
	"encoding/json"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/tenancy"
)

const me = "11111111-1111-1111-1111-111111111111"

func owned(uid string) []resource.OwnerReference {
	return []resource.OwnerReference{{UID: uid, ResourceTypeName: "Tenant", ResourceTypeVersion: "v1", Name: "t"}}
}

// TestDecide is the policy table: creation, conflict and drift.
func TestDecide(t *testing.T) {
	want := &tenancy.Rendered{Name: "c", Labels: map[string]string{tenancy.LabelTenant: "t"}, Annotations: map[string]string{},
		Spec: json.RawMessage(`{"image":"nginx","ports":[80,443]}`)}
	same := func(owners []resource.OwnerReference) *view {
		return &view{labels: map[string]string{tenancy.LabelTenant: "t", "extra": "x"}, owners: owners,
			spec: json.RawMessage(`{"image":"nginx","ports":[80,443.0],"replicas":1}`)}
	}
	edited := same(owned(me))
	edited.spec = json.RawMessage(`{"image":"httpd","ports":[80,443]}`)
	unlabeled := same(owned(me))
	unlabeled.labels = nil
	onceMarked := same(owned(me))
	onceMarked.annotations = map[string]string{tenancy.AnnotationCreatedOnce: "true"}
	onceMarked.spec = edited.spec
	once := tenancy.TResource{CreationPolicy: tenancy.CreationOnce}
	force := tenancy.TResource{ConflictPolicy: tenancy.ConflictForce}
	for _, tc := range []struct {
		name    string
		r       tenancy.TResource
		cur     *view
		created bool
		want    action
	}{
		{"absent", tenancy.TResource{}, nil, false, actCreate},
		{"absent, recreated when WhenNeeded", tenancy.TResource{}, nil, true, actCreate},
		{"absent Once never created", once, nil, false, actCreate},
		{"Once deleted by hand", once, nil, true, actSkipGone},
		{"owned, as rendered (defaults and extra labels are no drift)", tenancy.TResource{}, same(owned(me)), true, actNone},
		{"owned, spec edited", tenancy.TResource{}, edited, true, actUpdate},
		{"owned, label removed", tenancy.TResource{}, unlabeled, true, actUpdate},
		{"Once edited by hand", once, edited, true, actKeep},
		{"Once marked, outputs lost", once, onceMarked, false, actKeep},
		{"another owner, Stuck", tenancy.TResource{}, same(owned("other")), false, actConflict},
		{"no owner, Stuck", tenancy.TResource{}, same(nil), false, actConflict},
		{"another owner, Force", force, same(owned("other")), false, actTakeOver},
		{"no owner, Force", force, same(nil), false, actTakeOver},
		{"Once with another owner, Stuck", once, same(owned("other")), true, actConflict},
	} {
		if got := decide(tc.r, tc.cur, tc.created, want, me); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
