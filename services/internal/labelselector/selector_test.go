package labelselector

import "testing"

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
	for _, s := range []string{"=web", "a=b,,c=d", "env in (a", "env within (a)", "a b c", "x=has space", "!"} {
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
		again, err := Parse(sel.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", sel.String(), s, err)
		}
		if again.String() != sel.String() {
			t.Fatalf("canonical form not stable: %q then %q", sel.String(), again.String())
		}
	})
}
