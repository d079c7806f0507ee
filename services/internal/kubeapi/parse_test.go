package kubeapi

import (
	"slices"
	"strings"
	"testing"
)

// TestParseWarnings: the text of each warning, escapes undone, with or
// without a date, several to a header value or one per header.
func TestParseWarnings(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{`299 - "would violate PodSecurity \"restricted:latest\": runAsNonRoot != true"`},
			[]string{`would violate PodSecurity "restricted:latest": runAsNonRoot != true`}},
		{[]string{`299 - "a, b"`, `299 - "c"`}, []string{"a, b", "c"}},
		{[]string{`299 - "a" "Sat, 06 Dec 2026 06:00:00 GMT", 199 agent "b \\ c"`}, []string{"a", `b \ c`}},
		{[]string{`not a warning`}, []string{"not a warning"}},
		{[]string{`299 - "unterminated`}, []string{`299 - "unterminated`}},
	} {
		if got := parseWarnings(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("parseWarnings(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestParseObjects: helm template's output splits into its objects (the
// source comments and empty documents left out, each document's text kept
// as it is); a document that does not parse, or lacks apiVersion, kind or
// a name, fails the whole stream.
func TestParseObjects(t *testing.T) {
	stream := `---
# Source: chart/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: other
data: {k: v}
---
# Source: chart/templates/empty.yaml
---
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: b}
`
	objs, err := parseObjects([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("got %d objects, want 2: %+v", len(objs), objs)
	}
	if o := objs[0]; o.ref() != "ConfigMap/a" || o.apiVersion != "v1" || o.namespace != "other" || o.line != 3 || !strings.HasSuffix(string(o.data), "data: {k: v}\n") {
		t.Errorf("first object: %+v", o)
	}
	if o := objs[1]; o.ref() != "Deployment/b" || o.apiVersion != "apps/v1" || o.namespace != "" {
		t.Errorf("second object: %+v", o)
	}

	for _, tc := range []struct{ name, stream, want string }{
		{"malformed", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a\n", "document at line 5: yaml: line 6: did not find expected"},
		{"no kind", "apiVersion: v1\nmetadata: {name: a}\n", "no kind"},
		{"no apiVersion or name", "kind: ConfigMap\n", "no apiVersion, metadata.name"},
		{"a list", "- a\n- b\n", "not a mapping"},
	} {
		_, err := parseObjects([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\n" + tc.stream))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing applied") {
			t.Errorf("%s: error %v, want one saying %q and nothing applied", tc.name, err, tc.want)
		}
	}
}
