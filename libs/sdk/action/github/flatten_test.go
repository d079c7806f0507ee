package github

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestFlatten(t *testing.T) {
	got, err := Flatten(json.RawMessage(`{"env": "prod", "replicas": 3, "ratio": 1.50, "big": 12345678901234567890,
		"debug": false, "skip": null, "db": {"size": 10, "tier": {"name": "gold"}, "none": {}}, "zones": ["a", "b"], "Mixed-Case_1": "x"}`), 25)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"env": "prod", "replicas": "3", "ratio": "1.50", "big": "12345678901234567890", "debug": "false",
		"db_size": "10", "db_tier_name": "gold", "zones": `["a","b"]`, "Mixed-Case_1": "x"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	for _, empty := range []string{``, `null`, `{}`} {
		if got, err := Flatten(json.RawMessage(empty), 25); err != nil || len(got) != 0 {
			t.Errorf("%q: %v %v", empty, got, err)
		}
	}
	many := map[string]int{}
	for i := range 25 {
		many[fmt.Sprintf("in%d", i)] = i
	}
	manyJSON, _ := json.Marshal(many)
	for _, c := range []struct{ in, path, msg string }{
		{`[1]`, "", "must be one JSON object"},
		{`"x"`, "", "must be one JSON object"},
		{`{"a_b": 1, "a": {"b": 2}}`, "/a_b", `becomes input "a_b", as /a/b does`},
		{`{"a": 1} {"b": 2}`, "", "one JSON object"},
		{`{"A": 1, "a": 2}`, "/a", "without regard to case"},
		{`{"no8s_correlation_id": "x"}`, "/no8s_correlation_id", "reserved"},
		{`{"NO8S_correlation_ID": "x"}`, "/NO8S_correlation_ID", "reserved"},
		{`{"1st": "x"}`, "/1st", "not a GitHub input name"},
		{`{"a b": "x"}`, "/a b", "not a GitHub input name"},
		{`{"db": {"a/b": 1}}`, "/db/a~1b", "not a GitHub input name"},
		{string(manyJSON), "", "25 inputs after flattening; GitHub takes at most 24"},
		{`{"big": "` + strings.Repeat("x", MaxInputsBytes) + `"}`, "", "characters of JSON"},
	} {
		_, err := Flatten(json.RawMessage(c.in), 24)
		var ie *InputError
		if !errors.As(err, &ie) || ie.Path != c.path || !strings.Contains(ie.Message, c.msg) {
			t.Errorf("%.60s: %v, want path %q and %q", c.in, err, c.path, c.msg)
		}
	}
}

// FuzzFlatten: whatever the inputs, Flatten neither panics nor returns
// names GitHub would refuse, too many inputs, or the reserved name.
func FuzzFlatten(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `{"a": {"b": [1, {"c": null}]}}`, `{"a_b": 1, "a": {"b": 2}}`, `[]`, `{"x": "\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Flatten(b, 5)
		if err != nil {
			return
		}
		if len(out) > 5 {
			t.Fatalf("%d inputs", len(out))
		}
		lower := map[string]bool{}
		for k := range out {
			if !inputNameRE.MatchString(k) || strings.EqualFold(k, CorrelationInput) || lower[strings.ToLower(k)] {
				t.Fatalf("input name %q from %q", k, b)
			}
			lower[strings.ToLower(k)] = true
		}
	})
}
