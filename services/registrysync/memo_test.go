package registrysync

import (
	"testing"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/services/internal/tenancy"
	"github.com/no8s/no8s/services/registrysync/datasource"
)

func strp(s string) *string { return &s }

// Inputs that differ in anything the desired Tenants are computed from
// digest apart; the same inputs digest alike, whatever the order of a
// row's extra columns.
func TestInputsDigest(t *testing.T) {
	reg := &sdk.Resource{ID: 1, UID: "r-1", Name: "customers", Generation: 2}
	tpl := &sdk.Resource{ID: 2, UID: "t-1", Name: "web", Generation: 1}
	rows := func() []datasource.Row {
		return []datasource.Row{
			{UID: strp("acme"), HostOrURL: strp("acme.example.com"), Activate: strp("1"), Extra: map[string]*string{"plan": strp("gold"), "region": nil}},
			{UID: strp("beta"), HostOrURL: nil, Activate: strp("0")},
		}
	}
	base := inputsDigest(reg, []*sdk.Resource{tpl}, rows())
	if again := inputsDigest(reg, []*sdk.Resource{tpl}, rows()); again != base {
		t.Fatal("the same inputs digest apart")
	}
	for name, change := range map[string]func(r *sdk.Resource, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row){
		"registry generation": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			r.Generation = 3
			return []*sdk.Resource{tp}, rs
		},
		"registry recreated": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			r.UID = "r-2"
			return []*sdk.Resource{tp}, rs
		},
		"template generation": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			tp.Generation = 2
			return []*sdk.Resource{tp}, rs
		},
		"no template": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			return nil, rs
		},
		"a host": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			rs[0].HostOrURL = strp("acme.example.org")
			return []*sdk.Resource{tp}, rs
		},
		"NULL for empty": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			rs[1].HostOrURL = strp("")
			return []*sdk.Resource{tp}, rs
		},
		"an extra column": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			rs[0].Extra["region"] = strp("eu")
			return []*sdk.Resource{tp}, rs
		},
		"a row gone": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			return []*sdk.Resource{tp}, rs[:1]
		},
		"rows reordered": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			return []*sdk.Resource{tp}, []datasource.Row{rs[1], rs[0]}
		},
		"a value moved between columns": func(r, tp *sdk.Resource, rs []datasource.Row) ([]*sdk.Resource, []datasource.Row) {
			rs[0].UID, rs[0].HostOrURL = strp("acmeacme.example.com"), strp("")
			return []*sdk.Resource{tp}, rs
		},
	} {
		r, tp := *reg, *tpl
		ts, rs := change(&r, &tp, rows())
		if inputsDigest(&r, ts, rs) == base {
			t.Errorf("%s: the digest did not change", name)
		}
	}
}

// A memo holds for the same inputs and the same Tenants only: one edited
// (generation), relabelled, recreated (id), being deleted, gone or added
// breaks it.
func TestMemoHolds(t *testing.T) {
	tenant := func(name string, id int64) *sdk.Resource {
		return &sdk.Resource{ID: id, Name: name, Generation: 1,
			Labels: map[string]string{tenancy.LabelRegistry: "customers", tenancy.LabelTemplate: "web", "team": "a"}}
	}
	current := func() map[string]currentTenant {
		return map[string]currentTenant{"acme-web": {res: tenant("acme-web", 10)}, "beta-web": {res: tenant("beta-web", 11)}}
	}
	in := [32]byte{1}
	m := newMemo(in, 2, current())
	if !m.holds(in, current()) {
		t.Fatal("the memo does not hold for what it recorded")
	}
	other := current()
	other["acme-web"].res.Labels["team"] = "b"
	if !m.holds(in, other) {
		t.Fatal("a label the comparison does not read broke the memo")
	}
	if m.holds([32]byte{2}, current()) {
		t.Error("the memo holds for other inputs")
	}
	var none *memo
	if none.holds(in, current()) {
		t.Error("no memo holds")
	}
	for name, change := range map[string]func(c map[string]currentTenant){
		"edited":     func(c map[string]currentTenant) { c["acme-web"].res.Generation = 2 },
		"relabelled": func(c map[string]currentTenant) { c["acme-web"].res.Labels[tenancy.LabelTemplate] = "api" },
		"recreated":  func(c map[string]currentTenant) { c["acme-web"].res.ID = 12 },
		"deleting":   func(c map[string]currentTenant) { c["acme-web"].res.Status = "deleting" },
		"gone":       func(c map[string]currentTenant) { delete(c, "beta-web") },
		"added":      func(c map[string]currentTenant) { c["gamma-web"] = currentTenant{res: tenant("gamma-web", 13)} },
	} {
		c := current()
		change(c)
		if m.holds(in, c) {
			t.Errorf("%s: the memo holds", name)
		}
	}
}
