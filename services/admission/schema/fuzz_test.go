package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzAdmit fuzzes specs against the DatabaseCluster schema. Admit must not
// panic or fail internally; an admitted spec must be valid JSON that admits
// again unchanged (defaulting is idempotent and its result validates).
func FuzzAdmit(f *testing.F) {
	s := mustCompile(f, databaseClusterSchema)
	for _, seed := range []string{
		seedSpec,
		`{}`, `[]`, `null`, `"x"`, `1`, `{`, `{} {}`,
		`{"engine":"oracle","storage_gb":"big","replicas":-1}`,
		`{"engine":"mysql","engine_version":"8","instance_class":"<a&b>","storage_gb":12345678901234567890}`,
		`{"engine":"mariadb","engine_version":"\u2028","instance_class":"\ud800","storage_gb":1E2,"extra":{"a":[1,{"b":null}]}}`,
		`{"engine":"postgres","engine_version":"16","instance_class":"x","storage_gb":10.0,"high_availability":null}`,
		`{"storage_gb":1e999999}`,
		`{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		out, viol, err := s.Admit(spec)
		if err != nil {
			t.Fatalf("Admit(%q): internal error %v", spec, err)
		}
		for _, v := range viol {
			if !strings.HasPrefix(v.Path, "/spec") || v.Message == "" {
				t.Fatalf("bad violation %q", v)
			}
		}
		if out != nil && !json.Valid(out) {
			t.Fatalf("Admit(%q) = invalid JSON %q", spec, out)
		}
		if viol != nil {
			return
		}
		if out == nil {
			t.Fatalf("Admit(%q): no violations and no output", spec)
		}
		out2, viol2, err := s.Admit(out)
		if err != nil || viol2 != nil {
			t.Fatalf("re-admit of %q: violations %q, err %v", out, viol2, err)
		}
		if string(out2) != string(out) {
			t.Fatalf("re-admit changed the spec:\n%s\n%s", out, out2)
		}
	})
}

// FuzzCompile fuzzes schemas. Compile must not panic, must fail only with a
// *CompileError whose fields point into /schema, and a schema that compiles
// must admit a few specs without panicking or failing internally.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		databaseClusterSchema, nestedDefaultsSchema, arrayDefaultsSchema, openAPISchema, numbersSchema, strictSchema,
		`{"type":"object","properties":{"child":{"$ref":"#","default":{}}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/properties/a"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"https://example.com/x"}}}`,
		`{"type":"object","patternProperties":{"^x-":{"default":1}},"additionalProperties":{"type":"object","properties":{"d":{"default":[{}]}}}}`,
		`{"type":"object","properties":{"l":{"type":"object","propertyNames":{"maxLength":2}}}}`,
		`{"type":"object","properties":{"n":{"type":"number","multipleOf":0.01,"minimum":1e-3,"exclusiveMinimum":true}}}`,
		`{"type":"object","properties":{"a":{"type":"strnig"},"b":{"minimum":"ten"},"c":{"pattern":"("}}}`,
		`{"$id":"https://example.com/s","type":"object","$defs":{"x":{"$id":"x","$anchor":"y","type":"string"}},"properties":{"a":{"$ref":"#/$defs/x"}}}`,
		`{"type":"array"}`, `[]`, `{}`, `{`, `true`,
	} {
		f.Add([]byte(seed))
	}
	specs := [][]byte{
		[]byte(`{}`),
		[]byte(seedSpec),
		[]byte(`{"a":{"b":[1,"x",null,{"c":true}]},"n":-1.5e3,"s":"x@y.z","x-a":{}}`),
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Compile(raw)
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) || len(ce.Fields) == 0 {
				t.Fatalf("Compile(%q): %T %v, want *CompileError with fields", raw, err, err)
			}
			for _, f := range ce.Fields {
				if !strings.HasPrefix(f.Path, "/schema") {
					t.Fatalf("Compile(%q): field %q outside /schema", raw, f)
				}
			}
			return
		}
		for _, spec := range specs {
			out, viol, err := s.Admit(spec)
			if err != nil {
				t.Fatalf("schema %q, Admit(%s): %v", raw, spec, err)
			}
			if out == nil || !json.Valid(out) {
				t.Fatalf("schema %q, Admit(%s) = %q, %q", raw, spec, out, viol)
			}
		}
	})
}
