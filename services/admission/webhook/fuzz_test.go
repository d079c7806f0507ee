package webhook

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseResponse feeds arbitrary bodies to the response parser: it must
// never panic, accept only JSON objects with a boolean allowed, and never
// let a patch that writes outside /spec, /labels and /annotations through.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"allowed":true}`, `{"allowed":false,"message":"no"}`, `{"allowed":true,"patches":[]}`,
		`{"allowed":true,"patches":[{"op":"add","path":"/spec/a","value":1}]}`,
		`{"allowed":true,"patches":[{"op":"move","from":"/spec/a","path":"/labels/b"}]}`,
		`{"allowed":true,"patches":[{"op":"copy","from":"/name","path":"/annotations/n"}]}`,
		`{"allowed":true,"patches":[{"op":"replace","path":"/name","value":"x"}]}`,
		`{"allowed":"true"}`, `[]`, `null`, ``, `{"allowed":true}x`, `{"allowed":true,"patches":[{"op":"add","path":"/spec~1a","value":1}]}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, mutating bool) {
		r, err := ParseResponse(body, mutating)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) != nil {
			t.Fatalf("accepted a non-object %q", body)
		}
		if len(r.Patch) > 0 && (!mutating || !r.Allowed) {
			t.Fatalf("patches accepted from a validating webhook or a denial: %q", body)
		}
		for _, op := range r.Patch {
			kind := op.Kind()
			if kind == "test" {
				continue
			}
			path, err := op.Path()
			if err != nil || !within(path) {
				t.Fatalf("op %s writes %q (%v): %q", kind, path, err, body)
			}
			if kind == "move" {
				if from, err := op.From(); err != nil || !within(from) {
					t.Fatalf("move from %q (%v): %q", from, err, body)
				}
			}
		}
	})
}

// within is an independent statement of the rule: the pointer's first
// reference token, unescaped, is spec, labels or annotations.
func within(pointer string) bool {
	if !strings.HasPrefix(pointer, "/") {
		return false
	}
	tok, _, _ := strings.Cut(pointer[1:], "/")
	tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
	return tok == "spec" || tok == "labels" || tok == "annotations"
}

// FuzzApplyPatch applies arbitrary patches to a resource document: the
// application must never panic, must produce a JSON object, and must leave
// every member but spec, labels and annotations as it was. A patch that
// passed ParseResponse must never be caught only by the final check (that
// would mean the path rule and the patch library disagree).
func FuzzApplyPatch(f *testing.F) {
	for _, s := range []string{
		`[{"op":"add","path":"/spec/a","value":1}]`,
		`[{"op":"remove","path":"/spec/size"},{"op":"add","path":"/labels/x","value":"y"}]`,
		`[{"op":"move","from":"/spec/tags","path":"/spec/t"}]`,
		`[{"op":"copy","from":"/spec","path":"/spec/self"}]`,
		`[{"op":"replace","path":"/spec","value":[]}]`,
		`[{"op":"add","path":"/spec/tags/0","value":{"deep":[1,2,{"x":null}]}}]`,
		`[{"op":"test","path":"/id","value":7},{"op":"remove","path":"/annotations"}]`,
		`[{"op":"move","from":"/spec","path":"/spec/inner"}]`,
		`[{"op":"add","path":"/spec/","value":1}]`,
	} {
		f.Add([]byte(s), []byte(`{"size":1,"tags":["x"]}`))
	}
	f.Fuzz(func(t *testing.T, patches, spec []byte) {
		doc := []byte(testDoc)
		if json.Valid(spec) && len(spec) > 0 && spec[0] == '{' {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(doc, &m)
			m["spec"] = spec
			doc, _ = json.Marshal(m)
		}
		r, err := ParseResponse([]byte(`{"allowed":true,"patches":`+string(patches)+`}`), true)
		if err != nil || len(r.Patch) == 0 {
			return
		}
		out, err := ApplyPatch(doc, r.Patch)
		if err != nil {
			if strings.Contains(err.Error(), "may change only") {
				t.Fatalf("a checked patch changed a protected member: %v\npatch %s", err, patches)
			}
			return
		}
		var before, after map[string]any
		if err := json.Unmarshal(doc, &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("patched document is not a JSON object: %v: %s", err, out)
		}
		for k := range before {
			if k == "spec" || k == "labels" || k == "annotations" {
				delete(before, k)
				delete(after, k)
			}
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("members outside spec, labels and annotations changed:\n%v\n%v\npatch %s", before, after, patches)
		}
	})
}
