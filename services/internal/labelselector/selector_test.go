package labelselector

import (
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/api/names"
)

func TestParseAndMatch(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "frontend", "env": "prod"}
	cases := []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"app=web", true},
		{"app==web", true},
		{"app=db", false},
		{"app=web,tier!=db", true},
		{"tier!=frontend", false},
		{"missing!=x", true},
		{"env in (prod,stage)", true},
		{"env in (dev)", false},
		{"env notin (dev, stage)", true},
		{"env notin (prod)", false},
		{"app", true},
		{"nope", false},
		{"!nope", true},
		{"!app", false},
		{" app = web , env in ( prod ) ", true},
		{"example.com/app=web", false},
		{"app=", false},
		{"app!=", true},
	}
	for _, c := range cases {
		sel, err := Parse(c.sel)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.sel, err)
		}
		if got := sel.Matches(labels); got != c.want {
			t.Errorf("%q.Matches = %v, want %v", c.sel, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, s := range []string{"=web", "a=b,,c=d", "env in (a", "env within (a)", "a b c", "x=has space", "!",
		// Keys and values no label can have (issue 27): answered 400, not [].
		strings.Repeat("k", 300) + "=v", "app>1", "app=é", "app in (é)", "é", "!-app", "a/b/c=d", "-app=x", "app=-x",
		"example.com/" + strings.Repeat("n", 64), "app=" + strings.Repeat("v", 64)} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", s)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"app=web,tier!=db", "env in (a,b)", "!x", "a", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := Parse(s)
		if err != nil {
			return
		}
		// What parses can be a label: a key or a value no label can
		// have would select nothing, silently (issue 27).
		for _, r := range sel {
			if fe := names.QualifiedKey("", r.Key); fe != nil {
				t.Fatalf("%q parsed with key %q: %s", s, r.Key, fe.Message)
			}
			for _, v := range r.Values {
				if fe := names.LabelValue("", v); fe != nil {
					t.Fatalf("%q parsed with value %q: %s", s, v, fe.Message)
				}
			}
		}
		sel.Matches(map[string]string{"app": "web"})
		again, err := Parse(sel.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", sel.String(), s, err)
		}
		if again.String() != sel.String() {
			t.Fatalf("canonical form not stable: %q then %q", sel.String(), again.String())
		}
	})
}
