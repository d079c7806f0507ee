package tenancy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/api/names"
)

func TestTruthy(t *testing.T) {
	for _, s := range []string{"1", "true", "TRUE", "t", "T", "yes", "Yes", "y", "on", "ON", " on "} {
		if !Truthy(&s) {
			t.Errorf("%q is not truthy", s)
		}
	}
	for _, s := range []string{"0", "false", "no", "off", "", "2", "tru", "yess", "null"} {
		if Truthy(&s) {
			t.Errorf("%q is truthy", s)
		}
	}
	if Truthy(nil) {
		t.Error("NULL is truthy")
	}
}

func TestTenantName(t *testing.T) {
	cases := map[[2]string]string{
		{"a", "web-app"}:   "a-web-app",
		{"acme42", "wrk"}:  "acme42-wrk",
		{"a-b", "web-app"}: "a-b-web-app",
	}
	for in, want := range cases {
		if got := TenantName(in[0], in[1]); got != want {
			t.Errorf("TenantName(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
	// Mapping changed something: a hash, and distinct from the unmapped twin.
	ab := TenantName("A_B", "web-app")
	if !strings.HasPrefix(ab, "a-b-web-app-") || ab == TenantName("a-b", "web-app") || !names.IsDNSLabel(ab) {
		t.Errorf("A_B: %q", ab)
	}
	if TenantName("A_B", "web-app") != ab {
		t.Error("not stable")
	}
	long := strings.Repeat("x", 80)
	n1, n2 := TenantName(long+"1", "t"), TenantName(long+"2", "t")
	if n1 == n2 || len(n1) > 63 || !names.IsDNSLabel(n1) || !names.IsDNSLabel(n2) {
		t.Errorf("long names %q %q", n1, n2)
	}
	for _, uid := range []string{"", "___", "Ünïcode", "-a-", "a..b"} {
		if n := TenantName(uid, "t"); !names.IsDNSLabel(n) {
			t.Errorf("TenantName(%q) = %q is not a DNS label", uid, n)
		}
	}
}

func TestFuncs(t *testing.T) {
	r := TResource{ID: "cm", NameTemplate: `{{ .uid | trunc63 }}-{{ .host | replace "." "-" }}`, Spec: json.RawMessage(
		`{"h":"{{ toHost .hostOrUrl }}","s":"{{ sha1sum .uid }}","j":"{{ (fromJson .cfg).a }}","d":"{{ default \"nginx\" .img }}","n":3}`)}
	got, err := NewRenderer().Render(t.Context(), r, RowValues("reg", "tpl", "acme", "https://acme.example.com:8443/x", "1", map[string]string{"cfg": `{"a":"b"}`, "img": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "acme-acme-example-com" {
		t.Errorf("name %q", got.Name)
	}
	want := `{"d":"nginx","h":"acme.example.com","j":"b","n":3,"s":"` + SHA1Sum("acme") + `"}`
	if string(got.Spec) != want {
		t.Errorf("spec %s\nwant %s", got.Spec, want)
	}
	if _, err := NewRenderer().Render(t.Context(), TResource{NameTemplate: "{{ .nope }}"}, Values{}); err == nil || !strings.Contains(err.Error(), "/nameTemplate") {
		t.Errorf("missing key: %v", err)
	}
}

func TestCheckTemplate(t *testing.T) {
	tpl := TemplateSpec{RegistryID: "r", Resources: []TResource{
		{ID: "a", NameTemplate: "x", DependIDs: []string{"c"}},
		{ID: "b", NameTemplate: "{{ .uid", DependIDs: []string{"a", "zz"}},
		{ID: "c", NameTemplate: "y", DependIDs: []string{"b"}},
		{ID: "a", NameTemplate: "z"},
	}}
	errs := CheckTemplate(tpl)
	var got []string
	for _, e := range errs {
		got = append(got, e.Path+": "+e.Message)
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		`/spec/resources/3/id: id "a" is already used`,
		`/spec/resources/1/dependIds/1: no resource has id "zz"`,
		`/spec/resources/1/nameTemplate: template does not parse`,
		`dependency cycle: a -> c -> b -> a`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in\n%s", want, all)
		}
	}
	if errs := CheckTemplate(TemplateSpec{Resources: []TResource{{ID: "a", NameTemplate: "{{ .uid }}"}, {ID: "b", DependIDs: []string{"a"}}}}); len(errs) != 0 {
		t.Errorf("a valid template: %v", errs)
	}
}

// No template reads the process environment or renders differently twice.
func TestFuncMapIsHermetic(t *testing.T) {
	m := FuncMap()
	for _, name := range []string{"env", "expandenv", "now", "randAlpha", "uuidv4", "genPrivateKey"} {
		if _, ok := m[name]; ok {
			t.Errorf("%s is in the function map", name)
		}
	}
	for _, name := range []string{"default", "b64enc", "sha256sum", "toJson", "lower", "trunc", "toHost", "trunc63", "sha1sum", "fromJson"} {
		if _, ok := m[name]; !ok {
			t.Errorf("%s is missing", name)
		}
	}
}
