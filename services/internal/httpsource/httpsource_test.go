package httpsource

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/tenancy"
)

func ptr(s string) *string { return &s }

func TestResolvePointer(t *testing.T) {
	doc := map[string]any{"a/b": map[string]any{"m~n": []any{"x", "y"}}, "": "empty", "list": []any{map[string]any{"id": "1"}}}
	for _, c := range []struct {
		p    string
		want any
		err  string
	}{
		{"", doc, ""},
		{"/a~1b/m~0n/1", "y", ""},
		{"/", "empty", ""},
		{"/list/0/id", "1", ""},
		{"/list/00", nil, "not an array index"},
		{"/list/-", nil, "not an array index"},
		{"/list/1", nil, "out of range"},
		{"/list/99999999999999999999999", nil, "not an array index"},
		{"/nope", nil, `no member "nope"`},
		{"/list/0/id/x", nil, `cannot look up "x" in a string`},
		{"a", nil, "does not start with /"},
		{"/a~2", nil, "~ must be followed by 0 or 1"},
		{"/a~", nil, "~ must be followed by 0 or 1"},
	} {
		got, err := Resolve(doc, c.p)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Resolve(%q) error %v, want %q", c.p, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", c.p, err)
			continue
		}
		if a, _ := json.Marshal(got); string(a) != mustJSON(t, c.want) {
			t.Errorf("Resolve(%q) = %s", c.p, a)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestItems(t *testing.T) {
	items, err := Items([]byte(`{"data":{"items":[{"n":1.50},{"n":2}]}}`), "/data/items", 10)
	if err != nil || len(items) != 2 {
		t.Fatalf("%v %v", items, err)
	}
	// Numbers are kept as written.
	if n := items[0].(map[string]any)["n"].(json.Number); n.String() != "1.50" {
		t.Fatalf("number %s", n)
	}
	for _, c := range []struct {
		body, p string
		limit   int
		is      error
		msg     string
	}{
		{`not json`, "", 0, ErrBody, "not JSON"},
		{`[1] [2]`, "", 0, ErrBody, "more than one JSON value"},
		{`{"a":1}`, "", 0, ErrBody, "is an object, not an array"},
		{`{"a":1}`, "/b", 0, ErrBody, `no member "b"`},
		{`{"a":"x"}`, "/a", 0, ErrBody, "is a string, not an array"},
		{`[1,2,3]`, "", 2, ErrTooManyItems, "3 items, the limit is 2"},
		{``, "", 0, ErrBody, "not JSON"},
		{strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "", 0, ErrBody, "not JSON"},
	} {
		_, err := Items([]byte(c.body), c.p, c.limit)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Items(%.30q, %q): %v, want %v %q", c.body, c.p, err, c.is, c.msg)
		}
	}
}

func TestMap(t *testing.T) {
	item := map[string]any{"id": "web-1", "num": json.Number("7"), "image": "nginx:1.27", "meta": map[string]any{"team": "a"},
		"cfg": map[string]any{"image": "x", "replicas": json.Number("3")}, "arr": []any{"a"}}
	tpl := Spec{NameTemplate: `{{ .id | lower }}-app`, Spec: json.RawMessage(`{"image":"{{ .image }}","host":"{{ .meta.team }}.example.com","fixed":2}`),
		Labels: map[string]string{"team": "{{ .meta.team }}"}}
	it, err := tpl.Map(t.Context(), tenancy.NewRenderer(), item)
	if err != nil {
		t.Fatal(err)
	}
	if it.Name != "web-1-app" || string(it.Spec) != `{"fixed":2,"host":"a.example.com","image":"nginx:1.27"}` || it.Labels["team"] != "a" {
		t.Fatalf("%+v %s", it, it.Spec)
	}
	ptrs := Spec{NamePointer: ptr("/id"), SpecPointer: ptr("/cfg")}
	it2, err := ptrs.Map(t.Context(), tenancy.NewRenderer(), item)
	if err != nil || it2.Name != "web-1" || string(it2.Spec) != `{"image":"x","replicas":3}` {
		t.Fatalf("%+v %s %v", it2, it2.Spec, err)
	}
	if it.Applied() == it2.Applied() || it.Applied() != (Item{Spec: it.Spec, Labels: map[string]string{"team": "a"}}).Applied() {
		t.Fatal("Applied is not a digest of spec and labels")
	}
	for _, c := range []struct {
		s    Spec
		item any
		msg  string
	}{
		{Spec{NamePointer: ptr("/missing"), SpecPointer: ptr("")}, item, `namePointer: /missing: no member "missing"`},
		{Spec{NamePointer: ptr("/meta"), SpecPointer: ptr("")}, item, "the name is an object, not a string"},
		{Spec{NamePointer: ptr("/image"), SpecPointer: ptr("")}, item, "is not a DNS-1123 label"},
		{Spec{NamePointer: ptr("/num"), SpecPointer: ptr("/arr")}, item, "the spec is an array, not an object"},
		{Spec{NamePointer: ptr("/id"), SpecPointer: ptr("/nope")}, item, "specPointer"},
		{Spec{NameTemplate: "{{ .nope }}", Spec: json.RawMessage(`{}`)}, item, `nameTemplate: template: /nameTemplate:1:3: executing "/nameTemplate" at <.nope>: map has no entry for key "nope"`},
		{Spec{NameTemplate: "{{ .id }}", Spec: json.RawMessage(`{"a":"{{ .nope }}"}`)}, item, "spec: /spec/a:"},
		{Spec{NameTemplate: "{{ .id }}", Spec: json.RawMessage(`{}`), Labels: map[string]string{"x": "{{ .image }}"}}, item, "labels: /labels/x"},
		{Spec{NameTemplate: "{{ .id }}", Spec: json.RawMessage(`{}`), Labels: map[string]string{"bad key!": "v"}}, item, "labels: /labels/bad key!"},
		{Spec{NameTemplate: "{{ .id }}", Spec: json.RawMessage(`{}`)}, "a string item", "nameTemplate:"},
		{Spec{NamePointer: ptr(""), SpecPointer: ptr("")}, nil, "the name is null"},
		{Spec{NamePointer: ptr(""), SpecPointer: ptr("")}, strings.Repeat("a", 64), "not a DNS-1123 label"},
		{Spec{NamePointer: ptr("/id"), SpecPointer: ptr("")}, map[string]any{"id": "a", "x": "nul\x00"}, "NUL"},
	} {
		_, err := c.s.Map(t.Context(), tenancy.NewRenderer(), c.item)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Map(%+v): %v, want %q", c.s, err, c.msg)
		}
	}
}

func TestCheck(t *testing.T) {
	good := Spec{URL: "https://api.example.com/v1/items?x=1", ItemsPointer: "/items", Target: Target{"WebApp", "v1"},
		NamePointer: ptr("/id"), Spec: json.RawMessage(`{"image":"{{ .image }}"}`),
		Headers: map[string]secret.Ref{"Authorization": secret.Env("NO8S_REGISTRY_TOKEN")}}
	if errs := Check(good); len(errs) != 0 {
		t.Fatalf("good spec: %v", errs)
	}
	for _, c := range []struct {
		edit func(s *Spec)
		path string
		msg  string
	}{
		{func(s *Spec) { s.URL = "ftp://x" }, "/spec/url", `scheme is "ftp"`},
		{func(s *Spec) { s.URL = "http://" }, "/spec/url", "no host"},
		{func(s *Spec) { s.URL = "https://user:pw@example.com/" }, "/spec/url", "user info"},
		{func(s *Spec) { s.URL = "http://exa mple.com/" }, "/spec/url", "does not parse"},
		{func(s *Spec) { s.Headers = map[string]secret.Ref{"If-None-Match": secret.Env("X")} }, "/spec/headers/If-None-Match", "set by the poll"},
		{func(s *Spec) { s.Headers = map[string]secret.Ref{"host": secret.Env("X")} }, "/spec/headers/host", "set by the poll"},
		{func(s *Spec) { s.Headers = map[string]secret.Ref{"Bad Header": secret.Env("X")} }, "/spec/headers/Bad Header", "not an HTTP header name"},
		{func(s *Spec) { s.Headers = map[string]secret.Ref{"X-Token": {}} }, "/spec/headers/X-Token", "secret reference"},
		{func(s *Spec) { s.ItemsPointer = "items" }, "/spec/itemsPointer", "does not start with /"},
		{func(s *Spec) { s.NameTemplate = "{{ .id }}" }, "/spec/nameTemplate", "not both"},
		{func(s *Spec) { s.NamePointer = nil }, "/spec/nameTemplate", "one of namePointer and nameTemplate is required"},
		{func(s *Spec) { s.NamePointer, s.NameTemplate = nil, "{{ .id " }, "/spec/nameTemplate", "template does not parse"},
		{func(s *Spec) { s.NamePointer = ptr("/a~9") }, "/spec/namePointer", "~ must be followed"},
		{func(s *Spec) { s.SpecPointer = ptr("") }, "/spec/specPointer", "not both"},
		{func(s *Spec) { s.Spec = nil }, "/spec/spec", "one of spec and specPointer is required"},
		{func(s *Spec) { s.Spec = json.RawMessage(`{"a":{"b":["{{ if }}"]}}`) }, "/spec/spec/a/b/0", "template does not parse"},
		{func(s *Spec) { s.Spec, s.SpecPointer = nil, ptr("x") }, "/spec/specPointer", "does not start with /"},
		{func(s *Spec) { s.Labels = map[string]string{LabelSource: "x"} }, "/spec/labels/httpsource.no8s.io~1source", "set by registry-sync"},
		{func(s *Spec) { s.Labels = map[string]string{"a": "{{"} }, "/spec/labels/a", "template does not parse"},
		{func(s *Spec) { s.Target = Target{"Tenant", "v1"} }, "/spec/target/typeName", "built-in type"},
		{func(s *Spec) { s.Target = Target{"HttpSource", "v1"} }, "/spec/target/typeName", "built-in type"},
	} {
		s := good
		s.Headers = map[string]secret.Ref{}
		c.edit(&s)
		errs := Check(s)
		if len(errs) == 0 || errs[0].Path != c.path || !strings.Contains(errs[0].Message, c.msg) {
			t.Errorf("%s: %v, want %s %q", c.path, errs, c.path, c.msg)
		}
	}
}

// FuzzMap: any body, pointer and templates: Items and Map never panic;
// what Map returns is a DNS-1123 name, a JSON object spec and valid labels.
func FuzzMap(f *testing.F) {
	f.Add(`[{"id":"a","x":{"y":1}}]`, "", "/id", "{{ .id }}-{{ .x.y }}", `{"k":"{{ .id }}"}`, "/x")
	f.Add(`{"items":[{"id":"A_B"}]}`, "/items", "/id", "{{ .id | lower }}", `{"{{ .id }}":[1,"{{ sha1sum .id }}"]}`, "")
	f.Add(`[null, 1, "s", [], {}]`, "", "", "{{ . }}", `{}`, "/0")
	f.Add(`[{"a/b":{"~":"n"}}]`, "", "/a~1b/~0", "{{ index . \"a/b\" }}", `{"a":"{{ toJson . }}"}`, "/a~1b")
	f.Fuzz(func(t *testing.T, body, itemsPtr, namePtr, nameTpl, specTpl, specPtr string) {
		items, err := Items([]byte(body), itemsPtr, 1000)
		if err != nil {
			if !errors.Is(err, ErrBody) && !errors.Is(err, ErrTooManyItems) {
				t.Fatalf("Items error %v is neither ErrBody nor ErrTooManyItems", err)
			}
			return
		}
		rd := tenancy.NewBoundedRenderer(tenancy.Budget{Output: 1 << 16, Steps: 1000, Time: time.Second})
		specs := []Spec{
			{NamePointer: &namePtr, SpecPointer: &specPtr, Labels: map[string]string{"k": nameTpl}},
			{NameTemplate: nameTpl, Spec: json.RawMessage(specTpl)},
		}
		for _, s := range specs {
			_ = Check(s)
			for _, it := range items {
				m, err := s.Map(t.Context(), rd, it)
				if err != nil {
					continue
				}
				if !names.IsDNSLabel(m.Name) {
					t.Fatalf("name %q", m.Name)
				}
				var obj map[string]any
				if json.Unmarshal(m.Spec, &obj) != nil || obj == nil {
					t.Fatalf("spec %s is not an object", m.Spec)
				}
			}
		}
	})
}

// TestCheckSample: template bombs in an HttpSource are refused with the
// budget named, at the field; data-dependent errors are left to the poll.
func TestCheckSample(t *testing.T) {
	rd := tenancy.NewRenderer()
	for _, c := range []struct {
		s    Spec
		path string // "": accepted
	}{
		{Spec{NameTemplate: "{{ .id }}-{{ .meta.team }}", Spec: json.RawMessage(`{"a":"{{ .meta.region | upper }}"}`)}, ""},
		{Spec{NameTemplate: "{{ index . \"a/b\" }}", SpecPointer: ptr("")}, ""},
		{Spec{NameTemplate: `{{ repeat 100000000 "x" }}`, SpecPointer: ptr("")}, "/spec/nameTemplate"},
		{Spec{NamePointer: ptr("/id"), Spec: json.RawMessage(`{"a":"{{ range until 16000 }}{{ range until 16000 }}{{ end }}{{ end }}"}`)}, "/spec/spec/a"},
		{Spec{NamePointer: ptr("/id"), SpecPointer: ptr(""), Labels: map[string]string{"k": "{{ range until 100000000 }}{{ end }}"}}, "/spec/labels/k"},
		{Spec{NameTemplate: "{{ .id }}", Spec: json.RawMessage(`{"a":"{{ .id }}\u0000"}`)}, "/spec/spec/a"},
	} {
		fe := c.s.CheckSample(t.Context(), rd)
		switch {
		case c.path == "" && fe != nil:
			t.Errorf("%+v refused: %+v", c.s, fe)
		case c.path != "" && (fe == nil || fe.Path != c.path):
			t.Errorf("%+v: %+v, want an error at %s", c.s, fe, c.path)
		case fe != nil:
			t.Logf("%s: %s", fe.Path, fe.Message)
		}
	}
}
