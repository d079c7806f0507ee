package strictjson

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/no8s/no8s/services/internal/problem"
)

func paths(e *problem.Error) []string {
	if e == nil {
		return nil
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Path)
	}
	return out
}

// manyKeys renders n distinct members "k0":0,"k1":0,...
func manyKeys(n int) string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("%q:0", fmt.Sprintf("k%d", i))
	}
	return strings.Join(ms, ",")
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name, doc, code string
		paths           []string
	}{
		{"clean", `{"a":[1,"x",{"b":null}],"c":true,"é":"ü 😀 \ud83d\ude00"}`, "", nil},
		{"invalid JSON is the decoder's business", `{"a":`, "", nil},
		{"NUL in a value", `{"spec":{"s":"a\u0000b"}}`, "invalid", []string{"/spec/s"}},
		{"NUL in an array", `{"a":["ok","\u0000"]}`, "invalid", []string{"/a/1"}},
		{"NUL in a key", `{"spec":{"a\u0000":1}}`, "invalid", []string{"/spec/a\x00"}},
		{"lone high surrogate", `{"s":"\ud800"}`, "malformed_json", []string{"/s"}},
		{"lone low surrogate", `{"s":"x\udc00y"}`, "malformed_json", []string{"/s"}},
		{"high surrogate then non-surrogate", `{"s":"\ud800\u0041"}`, "malformed_json", []string{"/s"}},
		{"invalid UTF-8", "{\"s\":\"a\xffb\"}", "malformed_json", []string{"/s"}},
		{"invalid UTF-8 in a key", "{\"k\xff\":1}", "malformed_json", []string{"/k\uFFFD"}},
		{"duplicate key", `{"spec":{"n":1,"n":2}}`, "malformed_json", []string{"/spec/n"}},
		{"duplicate key by escape", `{"a":1,"\u0061":2}`, "malformed_json", []string{"/a"}},
		{"duplicate among escaped keys", `{"\u0061":1,"\u0062":2,"\u0061":3}`, "malformed_json", []string{"/a"}},
		{"duplicate in a large object", `{` + manyKeys(40) + `,"k33":1}`, "malformed_json", []string{"/k33"}},
		{"large object without duplicates", `{` + manyKeys(40) + `}`, "", nil},
		{"duplicate top-level key", `{"name":"a","name":"b"}`, "malformed_json", []string{"/name"}},
		{"keys escaped in the pointer", `{"a/b":{"c~d":"\u0000"}}`, "invalid", []string{"/a~1b/c~0d"}},
		{"number too large", `{"spec":{"n":1e400}}`, "invalid", []string{"/spec/n"}},
		{"number too small", `{"spec":{"n":-1e-400}}`, "invalid", []string{"/spec/n"}},
		{"number too long", `{"n":1` + strings.Repeat("0", MaxNumberLen) + `.5}`, "invalid", []string{"/n"}},
		{"zero with a huge exponent", `{"n":0e5000}`, "invalid", []string{"/n"}},
		{"within range", `{"a":1e300,"b":-1.7976931348623157e308,"c":5e-324,"d":0e-20,"e":-0}`, "", nil},
		{"every problem", "{\"a\":\"\\u0000\",\"b\":1e999,\"a\":\"\xfe\"}", "malformed_json", []string{"/a", "/b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := Check([]byte(tc.doc), "")
			if tc.code == "" {
				if e != nil {
					t.Fatalf("refused: %v %+v", e, e.Fields)
				}
				return
			}
			if e == nil {
				t.Fatalf("accepted")
			}
			if e.Code != tc.code || e.Kind != problem.Invalid {
				t.Errorf("code %q kind %v, want %q", e.Code, e.Kind, tc.code)
			}
			for _, p := range tc.paths {
				if !slices.Contains(paths(e), p) {
					t.Errorf("paths %q lack %q", paths(e), p)
				}
			}
		})
	}
}

// A string with several bad bytes is one error (issue 27: "and 2 more" of
// the same entry).
func TestCheckReportsAStringOnce(t *testing.T) {
	e := Check([]byte("{\"s\":\"a\xff\xfe\xfdb\",\"t\":\"\xff\xff\"}"), "")
	if e == nil {
		t.Fatal("accepted")
	}
	if got := paths(e); !slices.Equal(got, []string{"/s", "/t"}) || e.Detail != "/s: not valid UTF-8 (and 1 more)" {
		t.Fatalf("paths %q, detail %q", got, e.Detail)
	}
}

func TestCheckBase(t *testing.T) {
	if got := paths(Check([]byte(`{"n":"\u0000"}`), "/spec")); !slices.Equal(got, []string{"/spec/n"}) {
		t.Fatalf("paths %q", got)
	}
}

// The expected forms are what PostgreSQL 15 answers for
// SELECT '[...]'::jsonb::text; pgstore's tests compare against the server.
func TestExpand(t *testing.T) {
	for lit, want := range map[string]string{
		"1e2": "100", "1.50e1": "15.0", "1.5e-3": "0.0015", "-0": "0", "-0.00": "0.00", "0e5": "0",
		"1E+2": "100", "12.3400e-1": "1.23400", "0.000e3": "0", "1e-5": "0.00001", "100e-2": "1.00",
		"-12.5": "-12.5", "7": "7", "0.1": "0.1", "-1e-2": "-0.01", "123456789012345678901234567890": "123456789012345678901234567890",
	} {
		if got := Expand(lit); got != want {
			t.Errorf("Expand(%s) = %s, want %s", lit, got, want)
		}
		if got := Expand(Expand(lit)); got != Expand(lit) {
			t.Errorf("Expand is not idempotent on %s: %s", lit, got)
		}
	}
	if got := Expand("1e300"); len(got) != 301 {
		t.Errorf("Expand(1e300) has %d characters", len(got))
	}
}

// A number accepted once is accepted again in its stored form.
func TestNumberOKStable(t *testing.T) {
	for _, lit := range []string{"1e300", "1.7976931348623157e308", "5e-324", "-2.2250738585072014e-308", "1.000000000e-300", "0e-900", "123.456e-200"} {
		if !NumberOK(lit) {
			t.Fatalf("%s refused", lit)
		}
		if e := Expand(lit); !NumberOK(e) || int64(len(e)) != parse(lit).expandedLen() {
			t.Errorf("%s expands to %d characters (%d predicted), accepted %v", lit, len(e), parse(lit).expandedLen(), NumberOK(e))
		}
	}
	for _, lit := range []string{"1e309", "-1e400", "1e-400", "2e-324", "0e-2000", "0e2000", "1e99999999999999999999"} {
		if NumberOK(lit) {
			t.Errorf("%s accepted", lit)
		}
	}
}

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		eq   bool
	}{
		{`{"n":100}`, `{"n":1e2}`, true},
		{`{"n":100}`, `{"n":100.0}`, true},
		{`{"a":1,"b":[1,2]}`, `{"b":[1.0,2e0],"a":10e-1}`, true},
		{`{"n":0}`, `{"n":-0.0}`, true},
		{`{"n":100}`, `{"n":101}`, false},
		{`{"n":"100"}`, `{"n":100}`, false},
		{`{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`{"n":0.1}`, `{"n":0.10000000000000000001}`, false},
	} {
		if got := Equal([]byte(tc.a), []byte(tc.b)); got != tc.eq {
			t.Errorf("Equal(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

func TestExpanded(t *testing.T) {
	in := `{"a":1e2,"b":["1e2",-1.5e-2,{"c\"1e2":2E+1}],"d":true}`
	want := `{"a":100,"b":["1e2",-0.015,{"c\"1e2":20}],"d":true}`
	if got := string(Expanded([]byte(in))); got != want {
		t.Fatalf("Expanded = %s, want %s", got, want)
	}
}

// The fast path for short literals without an exponent agrees with the
// exact checks.
func TestPlainNumbersAgreeWithTheExactCheck(t *testing.T) {
	for _, lit := range []string{"0", "-0", "7", "500", "-12.5", "0.0000000000001", "999999999999999", "-99999999999999", "0.000", "1.5", "123456789012345"} {
		if !plainNumber(lit) {
			t.Errorf("%s: not plain", lit)
		}
		l := parse(lit)
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil || l.expandedLen() > MaxNumberLen || (f == 0 && l.nonZero) {
			t.Errorf("%s: plain, but the exact check refuses it", lit)
		}
	}
	for _, lit := range []string{"1e2", "1E400", "1234567890123456", "-0.00000000000001"} {
		if plainNumber(lit) {
			t.Errorf("%s: plain", lit)
		}
	}
}

// BenchmarkCheck measures the check of a typical request body.
func BenchmarkCheck(b *testing.B) {
	body := []byte(`{"name":"db-0001","labels":{"team":"payments","env":"prod","tier":"gold"},` +
		`"annotations":{"no8s.io/owner":"alice@example.com"},"finalizers":["reconciler.no8s.io/postgres"],` +
		`"spec":{"engine":"postgres","version":"16.4","storage_gb":100,"replicas":3,"ratio":0.75,` +
		`"backup":{"enabled":true,"schedule":"0 3 * * *","retention_days":14},` +
		`"parameters":{"max_connections":"200","shared_buffers":"4GB","work_mem":"64MB"},` +
		`"users":[{"name":"app","roles":["rw"]},{"name":"report","roles":["ro"]}],` +
		`"note":"caf\u00e9 \u2014 primary","zones":["eu-west-1a","eu-west-1b","eu-west-1c"],"maintenance":null}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(body, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCheck: Check never panics, and a document it passes is valid UTF-8
// JSON whose pointer paths it could have rendered.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x",{"b":null}]}`, `{"a":1,"\u0061":2}`, "{\"k\xff\":1}", `{"s":"\ud800\u0041"}`, `[1e400,"\u0000"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := Check(data, "/spec")
		if e == nil && json.Valid(data) && !utf8.Valid(data) {
			t.Fatalf("passed invalid UTF-8: %q", data)
		}
		if e != nil {
			for _, fe := range e.Fields {
				if !strings.HasPrefix(fe.Path, "/spec") {
					t.Fatalf("path %q lacks the base", fe.Path)
				}
			}
		}
	})
}

// TestCovers: have contains want by value; have's extra members are
// allowed, nothing else is.
func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		ok         bool
	}{
		{`{"a":1,"b":2}`, `{"a":1}`, true},
		{`{"a":1.0}`, `{"a":1}`, true},
		{`{"a":1e2}`, `{"a":100}`, true},
		{`{"a":"1"}`, `{"a":1}`, false},
		{`{"a":{"b":[1,{"c":true,"d":null}]}}`, `{"a":{"b":[1,{"c":true}]}}`, true},
		{`{"a":1,"b":{"c":[1,{"d":2,"e":3}]},"def":1}`, `{"a":1.0,"b":{"c":[1,{"d":2}]}}`, true},
		{`{"a":[1,2,3]}`, `{"a":[1,2]}`, false},
		{`{"a":[1]}`, `{"a":[1,2]}`, false},
		{`{"a":null}`, `{"a":null}`, true},
		{`{}`, `{"a":null}`, false},
		{`{"a":{"b":1}}`, `{"a":{"b":2}}`, false},
		{`{"a":[]}`, `{"a":{}}`, false},
		{`not json`, `{}`, false},
		{`{}`, `not json`, false},
		{`{"a":1} {}`, `{}`, false},
	} {
		if got := Covers([]byte(tc.have), []byte(tc.want)); got != tc.ok {
			t.Errorf("Covers(%s, %s) = %v, want %v", tc.have, tc.want, got, tc.ok)
		}
	}
}
