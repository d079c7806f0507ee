package webhook

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseResponse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		mutating bool
		want     string // error substring; "" for success
		allowed  bool
		message  string
		ops      int
	}{
		{name: "allowed", body: `{"allowed":true}`, allowed: true},
		{name: "denied with message", body: `{"allowed":false,"message":"no"}`, message: "no"},
		{name: "extra members ignored", body: `{"allowed":true,"uid":"x","warnings":[]}`, allowed: true},
		{name: "patches", body: `{"allowed":true,"patches":[{"op":"add","path":"/spec/a","value":1},{"op":"remove","path":"/labels/x"}]}`, mutating: true, allowed: true, ops: 2},
		{name: "null patches", body: `{"allowed":true,"patches":null}`, allowed: true},
		{name: "denial ignores patches", body: `{"allowed":false,"patches":[{"op":"add","path":"/name","value":1}]}`, mutating: true},
		{name: "copy from anywhere", body: `{"allowed":true,"patches":[{"op":"copy","from":"/name","path":"/labels/name"}]}`, mutating: true, allowed: true, ops: 1},
		{name: "test anywhere", body: `{"allowed":true,"patches":[{"op":"test","path":"/name","value":"x"}]}`, mutating: true, allowed: true, ops: 1},

		{name: "empty", body: ``, want: "not a JSON object"},
		{name: "not JSON", body: `<html>`, want: "not a JSON object"},
		{name: "array", body: `[]`, want: "not a JSON object"},
		{name: "null", body: `null`, want: "not a JSON object"},
		{name: "no allowed", body: `{"message":"hi"}`, want: `no boolean "allowed"`},
		{name: "allowed not boolean", body: `{"allowed":"yes"}`, want: "not a JSON object"},
		{name: "message not string", body: `{"allowed":true,"message":3}`, want: "not a JSON object"},
		{name: "trailing data", body: `{"allowed":true} {}`, want: "not a JSON object"},
		{name: "patches not array", body: `{"allowed":true,"patches":{}}`, mutating: true, want: "not a JSON object"},
		{name: "validating patches", body: `{"allowed":true,"patches":[{"op":"add","path":"/spec/a","value":1}]}`, want: "only mutating webhooks may patch"},
		{name: "op missing", body: `{"allowed":true,"patches":[{"path":"/spec/a"}]}`, mutating: true, want: `patches/0: no "op"`},
		{name: "bad op", body: `{"allowed":true,"patches":[{"op":"merge","path":"/spec/a"}]}`, mutating: true, want: "not a JSON Patch op"},
		{name: "value missing", body: `{"allowed":true,"patches":[{"op":"add","path":"/spec/a"}]}`, mutating: true, want: `needs a "value"`},
		{name: "from missing", body: `{"allowed":true,"patches":[{"op":"move","path":"/spec/a"}]}`, mutating: true, want: `needs a "from"`},
		{name: "path outside", body: `{"allowed":true,"patches":[{"op":"replace","path":"/name","value":"x"}]}`, mutating: true, want: "outside /spec, /labels and /annotations"},
		{name: "status outside", body: `{"allowed":true,"patches":[{"op":"add","path":"/status","value":"ready"}]}`, mutating: true, want: "outside"},
		{name: "finalizers outside", body: `{"allowed":true,"patches":[{"op":"add","path":"/finalizers/-","value":"x"}]}`, mutating: true, want: "outside"},
		{name: "whole document", body: `{"allowed":true,"patches":[{"op":"replace","path":"","value":{}}]}`, mutating: true, want: "whole resource"},
		{name: "move out of spec", body: `{"allowed":true,"patches":[{"op":"move","from":"/name","path":"/spec/name"}]}`, mutating: true, want: "from \"/name\""},
		{name: "no leading slash", body: `{"allowed":true,"patches":[{"op":"add","path":"spec/a","value":1}]}`, mutating: true, want: `starts with "/"`},
		{name: "escaped prefix", body: `{"allowed":true,"patches":[{"op":"add","path":"/spec~1x","value":1}]}`, mutating: true, want: "outside"},
		{name: "bad escape", body: `{"allowed":true,"patches":[{"op":"add","path":"/spec/~2","value":1}]}`, mutating: true, want: `"~" must be followed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseResponse([]byte(tc.body), tc.mutating)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want it to contain %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed != tc.allowed || r.Message != tc.message || len(r.Patch) != tc.ops {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func TestParseResponseBoundsMessage(t *testing.T) {
	long := strings.Repeat("é", MaxMessageBytes)
	body, _ := json.Marshal(map[string]any{"allowed": false, "message": long})
	r, err := ParseResponse(body, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Message) > MaxMessageBytes+3 || !strings.HasSuffix(r.Message, "...") {
		t.Fatalf("message of %d bytes", len(r.Message))
	}
}

const testDoc = `{"id":7,"name":"db","resource_type_name":"DB","resource_type_version":"v1","labels":{"a":"1"},"annotations":{},"spec":{"size":1,"tags":["x"]},"status":"ready","finalizers":[]}`

func mustPatch(t *testing.T, patches string) *Response {
	t.Helper()
	r, err := ParseResponse([]byte(`{"allowed":true,"patches":`+patches+`}`), true)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestApplyPatch(t *testing.T) {
	r := mustPatch(t, `[
		{"op":"add","path":"/spec/backup","value":7},
		{"op":"replace","path":"/spec/size","value":3},
		{"op":"add","path":"/spec/tags/-","value":"y"},
		{"op":"copy","from":"/name","path":"/labels/app"},
		{"op":"move","from":"/labels/a","path":"/annotations/a"},
		{"op":"test","path":"/status","value":"ready"}
	]`)
	out, err := ApplyPatch([]byte(testDoc), r.Patch)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"annotations":{"a":"1"},"finalizers":[],"id":7,"labels":{"app":"db"},"name":"db","resource_type_name":"DB","resource_type_version":"v1","spec":{"backup":7,"size":3,"tags":["x","y"]},"status":"ready"}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Fatalf("patched:\n%s\nwant\n%s", b, want)
	}

	for _, bad := range []string{
		`[{"op":"remove","path":"/spec/missing"}]`,
		`[{"op":"replace","path":"/spec/tags/5","value":1}]`,
		`[{"op":"test","path":"/spec/size","value":2}]`,
		`[{"op":"add","path":"/spec/tags/-1","value":1}]`,
		`[{"op":"add","path":"/spec/a/b/c","value":1}]`,
	} {
		if _, err := ApplyPatch([]byte(testDoc), mustPatch(t, bad).Patch); err == nil || !strings.Contains(err.Error(), "cannot be applied") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}

func TestApplyPatchBoundsCopies(t *testing.T) {
	ops := []string{`{"op":"add","path":"/spec/blob","value":"` + strings.Repeat("x", 64<<10) + `"}`}
	for i := range 40 {
		ops = append(ops, `{"op":"copy","from":"/spec/blob","path":"/spec/c`+string(rune('a'+i%26))+string(rune('a'+i/26))+`"}`)
	}
	r := mustPatch(t, "["+strings.Join(ops, ",")+"]")
	if _, err := ApplyPatch([]byte(testDoc), r.Patch); err == nil {
		t.Fatal("copies beyond the limit were applied")
	}
}
