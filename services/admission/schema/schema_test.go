package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// databaseClusterSchema is the DatabaseCluster schema from the seed's
// "Creating a Resource Type" example.
const databaseClusterSchema = `{
  "type": "object",
  "required": ["engine", "engine_version", "instance_class", "storage_gb"],
  "properties": {
    "engine": {
      "type": "string",
      "enum": ["postgres", "mysql", "mariadb"],
      "description": "Database engine type"
    },
    "engine_version": {
      "type": "string",
      "description": "Database engine version"
    },
    "instance_class": {
      "type": "string",
      "description": "Instance size class (e.g. db.small, db.medium, db.large)"
    },
    "storage_gb": {
      "type": "integer",
      "minimum": 10,
      "maximum": 10000,
      "description": "Storage size in GB"
    },
    "replicas": {
      "type": "integer",
      "minimum": 0,
      "maximum": 5,
      "default": 0,
      "description": "Number of read replicas"
    },
    "backup_retention_days": {
      "type": "integer",
      "minimum": 1,
      "maximum": 35,
      "default": 7,
      "description": "Number of days to retain backups"
    },
    "high_availability": {
      "type": "boolean",
      "default": false,
      "description": "Enable multi-AZ high availability"
    }
  }
}`

const seedSpec = `{"engine":"postgres","engine_version":"16","instance_class":"db.small","storage_gb":100}`

func mustCompile(t testing.TB, raw string) *Schema {
	t.Helper()
	s, err := Compile([]byte(raw))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func fe(path, msg string) problem.FieldError { return problem.FieldError{Path: path, Message: msg} }

// Schemas exercising the features beyond the seed.
const (
	nestedDefaultsSchema = `{
  "type": "object",
  "properties": {
    "backup": {
      "type": "object",
      "default": {},
      "properties": {
        "enabled": {"type": "boolean", "default": true},
        "window": {"type": "object", "default": {"day": "sun"}, "properties": {
          "day": {"type": "string"},
          "hour": {"type": "integer", "default": 3}
        }},
        "schedule": {"type": "object", "properties": {"cron": {"type": "string", "default": "0 0 * * *"}}}
      }
    },
    "network": {"type": "object", "properties": {"port": {"type": "integer", "default": 5432}}}
  }
}`
	arrayDefaultsSchema = `{
  "type": "object",
  "$defs": {"tag": {"type": "object", "properties": {"value": {"type": "string", "default": "none"}}}},
  "properties": {
    "disks": {"type": "array", "items": {"type": "object", "required": ["size"], "properties": {
      "size": {"type": "integer", "minimum": 1},
      "kind": {"type": "string", "default": "ssd"}
    }}},
    "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
    "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"weight": {"type": "integer", "default": 1}}}},
    "combined": {"allOf": [{"type": "object", "properties": {"a": {"type": "integer", "default": 1}}}, {"properties": {"b": {"type": "integer", "default": 2}}}]}
  }
}`
	openAPISchema = `{
  "type": "object",
  "x-kubernetes-preserve-unknown-fields": true,
  "externalDocs": {"url": "https://example.com"},
  "properties": {
    "owner": {"type": "string", "nullable": true, "example": "alice", "x-kubernetes-list-type": "atomic"},
    "size": {"type": "string", "enum": ["s", "m"], "nullable": true, "xml": {"name": "size"}},
    "strict": {"type": "string", "nullable": false},
    "cpu": {"type": "integer", "minimum": 10, "exclusiveMinimum": true, "maximum": 20, "exclusiveMaximum": true},
    "mem": {"type": "integer", "minimum": 10, "exclusiveMinimum": false},
    "ratio": {"type": "number", "exclusiveMaximum": 1},
    "email": {"type": "string", "format": "email"},
    "id": {"type": "string", "format": "uuid"},
    "at": {"type": "string", "format": "date-time"},
    "pet": {"type": "object", "discriminator": {"propertyName": "kind"}, "properties": {"kind": {"type": "string"}}}
  }
}`
	numbersSchema = `{"type": "object", "properties": {
  "n": {"type": "integer"}, "f": {"type": "number"}, "name": {"type": "string"},
  "big": {"type": "integer", "default": 98765432109876543210}
}}`
	strictSchema = `{"properties": {"a": {"type": "string"}}, "additionalProperties": false}`
)

func TestAdmit(t *testing.T) {
	tests := []struct {
		name   string
		schema string // databaseClusterSchema when empty
		spec   string
		want   string // defaulted output; "" means nil
		viol   []problem.FieldError
	}{
		{
			name: "seed spec gets defaults",
			spec: seedSpec,
			want: `{"backup_retention_days":7,"engine":"postgres","engine_version":"16","high_availability":false,"instance_class":"db.small","replicas":0,"storage_gb":100}`,
		},
		{
			name: "given values are kept",
			spec: `{"engine":"mysql","engine_version":"8","instance_class":"db.large","storage_gb":10,"replicas":5,"backup_retention_days":35,"high_availability":true}`,
			want: `{"backup_retention_days":35,"engine":"mysql","engine_version":"8","high_availability":true,"instance_class":"db.large","replicas":5,"storage_gb":10}`,
		},
		{
			name: "wrong type",
			spec: `{"engine":"postgres","engine_version":"16","instance_class":"db.small","storage_gb":"big"}`,
			want: `{"backup_retention_days":7,"engine":"postgres","engine_version":"16","high_availability":false,"instance_class":"db.small","replicas":0,"storage_gb":"big"}`,
			viol: []problem.FieldError{fe("/spec/storage_gb", "expected integer, got string")},
		},
		{
			name: "number is not an integer",
			spec: `{"engine":"postgres","engine_version":"16","instance_class":"db.small","storage_gb":10.5}`,
			want: `{"backup_retention_days":7,"engine":"postgres","engine_version":"16","high_availability":false,"instance_class":"db.small","replicas":0,"storage_gb":10.5}`,
			viol: []problem.FieldError{fe("/spec/storage_gb", "expected integer, got number")},
		},
		{
			name: "enum miss lists allowed values",
			spec: `{"engine":"oracle","engine_version":"16","instance_class":"db.small","storage_gb":100}`,
			want: `{"backup_retention_days":7,"engine":"oracle","engine_version":"16","high_availability":false,"instance_class":"db.small","replicas":0,"storage_gb":100}`,
			viol: []problem.FieldError{fe("/spec/engine", `must be one of "postgres", "mysql", "mariadb"`)},
		},
		{
			name: "below minimum",
			spec: `{"engine":"postgres","engine_version":"16","instance_class":"db.small","storage_gb":5}`,
			want: `{"backup_retention_days":7,"engine":"postgres","engine_version":"16","high_availability":false,"instance_class":"db.small","replicas":0,"storage_gb":5}`,
			viol: []problem.FieldError{fe("/spec/storage_gb", "must be >= 10, got 5")},
		},
		{
			name: "above maximum, exactly",
			spec: `{"engine":"postgres","engine_version":"16","instance_class":"db.small","storage_gb":12345678901234567890}`,
			want: `{"backup_retention_days":7,"engine":"postgres","engine_version":"16","high_availability":false,"instance_class":"db.small","replicas":0,"storage_gb":12345678901234567890}`,
			viol: []problem.FieldError{fe("/spec/storage_gb", "must be <= 10000, got 12345678901234567890")},
		},
		{
			name: "every missing required field named separately",
			spec: `{}`,
			want: `{"backup_retention_days":7,"high_availability":false,"replicas":0}`,
			viol: []problem.FieldError{
				fe("/spec/engine", "required property is missing"),
				fe("/spec/engine_version", "required property is missing"),
				fe("/spec/instance_class", "required property is missing"),
				fe("/spec/storage_gb", "required property is missing"),
			},
		},
		{
			name: "several violations sorted by path",
			spec: `{"engine":"oracle","engine_version":16,"storage_gb":5,"replicas":6}`,
			want: `{"backup_retention_days":7,"engine":"oracle","engine_version":16,"high_availability":false,"replicas":6,"storage_gb":5}`,
			viol: []problem.FieldError{
				fe("/spec/engine", `must be one of "postgres", "mysql", "mariadb"`),
				fe("/spec/engine_version", "expected string, got integer"),
				fe("/spec/instance_class", "required property is missing"),
				fe("/spec/replicas", "must be <= 5, got 6"),
				fe("/spec/storage_gb", "must be >= 10, got 5"),
			},
		},
		{name: "spec is an array", spec: `[]`, viol: []problem.FieldError{fe("/spec", "must be a JSON object, got array")}},
		{name: "spec is a string", spec: `"db"`, viol: []problem.FieldError{fe("/spec", "must be a JSON object, got string")}},
		{name: "spec is null", spec: `null`, viol: []problem.FieldError{fe("/spec", "must be a JSON object, got null")}},
		{name: "spec is a number", spec: `42`, viol: []problem.FieldError{fe("/spec", "must be a JSON object, got integer")}},
		{name: "spec is malformed", spec: `{"engine":`, viol: []problem.FieldError{fe("/spec", "malformed JSON: unexpected EOF")}},
		{name: "spec has trailing data", spec: `{} {}`, viol: []problem.FieldError{fe("/spec", "malformed JSON: invalid data after top-level value")}},
		{name: "spec is empty", spec: ``, viol: []problem.FieldError{fe("/spec", "malformed JSON: EOF")}},
		{
			name: "spec nested too deeply",
			spec: `{"x":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
			viol: []problem.FieldError{fe("/spec", "nesting deeper than 64 levels")},
		},
		{
			name: "brackets inside strings do not count as nesting",
			spec: `{"engine":"postgres","engine_version":"16","instance_class":"` + strings.Repeat(`[{\"`, 100) + `","storage_gb":100}`,
			want: `{"backup_retention_days":7,"engine":"postgres","engine_version":"16","high_availability":false,"instance_class":"` + strings.Repeat(`[{\"`, 100) + `","replicas":0,"storage_gb":100}`,
		},
		{
			name: "number with a huge exponent",
			spec: `{"engine":"postgres","engine_version":"16","instance_class":"db.small","storage_gb":1e999999}`,
			viol: []problem.FieldError{fe("/spec/storage_gb", strictjson.NumberRangeMessage)},
		},
		{
			name: "HTML characters are not escaped",
			spec: `{"engine":"postgres","engine_version":"16","instance_class":"<a&b>","storage_gb":100}`,
			want: `{"backup_retention_days":7,"engine":"postgres","engine_version":"16","high_availability":false,"instance_class":"<a&b>","replicas":0,"storage_gb":100}`,
		},
		{
			name:   "big numbers preserved exactly, defaults too",
			schema: numbersSchema,
			spec:   `{"n":12345678901234567890,"f":1.000000000000000000000001,"name":"x"}`,
			want:   `{"big":98765432109876543210,"f":1.000000000000000000000001,"n":12345678901234567890,"name":"x"}`,
		},
		{
			name:   "integer-valued number literal is an integer",
			schema: numbersSchema,
			spec:   `{"n":1.0e3}`,
			want:   `{"big":98765432109876543210,"n":1.0e3}`,
		},
		{
			name:   "nested defaults",
			schema: nestedDefaultsSchema,
			spec:   `{}`,
			want:   `{"backup":{"enabled":true,"window":{"day":"sun","hour":3}}}`,
		},
		{
			name:   "nested defaults inside a given object",
			schema: nestedDefaultsSchema,
			spec:   `{"backup":{"enabled":false,"schedule":{}},"network":{}}`,
			want:   `{"backup":{"enabled":false,"schedule":{"cron":"0 0 * * *"},"window":{"day":"sun","hour":3}},"network":{"port":5432}}`,
		},
		{
			name:   "defaults not applied into a value of the wrong type",
			schema: nestedDefaultsSchema,
			spec:   `{"backup":"yes"}`,
			want:   `{"backup":"yes"}`,
			viol:   []problem.FieldError{fe("/spec/backup", "expected object, got string")},
		},
		{
			name:   "defaults in array items, $ref, additionalProperties, allOf",
			schema: arrayDefaultsSchema,
			spec:   `{"disks":[{"size":10},{"size":20,"kind":"hdd"},7],"tags":[{},{"value":"x"}],"labels":{"a":{},"b":{"weight":5}},"combined":{}}`,
			want:   `{"combined":{"a":1,"b":2},"disks":[{"kind":"ssd","size":10},{"kind":"hdd","size":20},7],"labels":{"a":{"weight":1},"b":{"weight":5}},"tags":[{"value":"none"},{"value":"x"}]}`,
			viol:   []problem.FieldError{fe("/spec/disks/2", "expected object, got integer")},
		},
		{
			name:   "defaults under patternProperties",
			schema: `{"type":"object","properties":{"m":{"type":"object","patternProperties":{"^db-":{"type":"object","properties":{"port":{"type":"integer","default":5432}}}}}}}`,
			spec:   `{"m":{"db-a":{},"db-b":{"port":1},"web":{}}}`,
			want:   `{"m":{"db-a":{"port":5432},"db-b":{"port":1},"web":{}}}`,
		},
		{
			name:   "violation inside an array item",
			schema: arrayDefaultsSchema,
			spec:   `{"disks":[{"size":0},{}]}`,
			want:   `{"disks":[{"kind":"ssd","size":0},{"kind":"ssd"}]}`,
			viol: []problem.FieldError{
				fe("/spec/disks/0/size", "must be >= 1, got 0"),
				fe("/spec/disks/1/size", "required property is missing"),
			},
		},
		{
			name:   "nullable and OpenAPI-only keywords",
			schema: openAPISchema,
			spec:   `{"owner":null,"size":null,"strict":null}`,
			want:   `{"owner":null,"size":null,"strict":null}`,
			viol:   []problem.FieldError{fe("/spec/strict", "expected string, got null")},
		},
		{
			name:   "nullable enum still checks values",
			schema: openAPISchema,
			spec:   `{"owner":"alice","size":"xl"}`,
			want:   `{"owner":"alice","size":"xl"}`,
			viol:   []problem.FieldError{fe("/spec/size", `must be one of "s", "m", null`)},
		},
		{
			name:   "boolean exclusive bounds",
			schema: openAPISchema,
			spec:   `{"cpu":10,"mem":10,"ratio":1}`,
			want:   `{"cpu":10,"mem":10,"ratio":1}`,
			viol: []problem.FieldError{
				fe("/spec/cpu", "must be > 10, got 10"),
				fe("/spec/ratio", "must be < 1, got 1"),
			},
		},
		{
			name:   "boolean exclusive maximum",
			schema: openAPISchema,
			spec:   `{"cpu":20}`,
			want:   `{"cpu":20}`,
			viol:   []problem.FieldError{fe("/spec/cpu", "must be < 20, got 20")},
		},
		{
			name:   "within exclusive bounds",
			schema: openAPISchema,
			spec:   `{"cpu":11,"ratio":0.5,"email":"a@example.com","id":"0f8fad5b-d9cb-469f-a165-70867728950e","at":"2026-01-02T03:04:05Z"}`,
			want:   `{"at":"2026-01-02T03:04:05Z","cpu":11,"email":"a@example.com","id":"0f8fad5b-d9cb-469f-a165-70867728950e","ratio":0.5}`,
		},
		{
			name:   "formats asserted",
			schema: openAPISchema,
			spec:   `{"email":"not-an-email","id":"1234","at":"yesterday"}`,
			want:   `{"at":"yesterday","email":"not-an-email","id":"1234"}`,
			viol: []problem.FieldError{
				fe("/spec/at", "'yesterday' is not valid date-time: less than 20 characters long"),
				fe("/spec/email", "'not-an-email' is not valid email: missing @"),
				fe("/spec/id", "'1234' is not valid uuid: must have 5 elements"),
			},
		},
		{
			name:   "additional properties named one by one, pointer-escaped",
			schema: strictSchema,
			spec:   `{"a":"x","b":1,"c/d~e":2}`,
			want:   `{"a":"x","b":1,"c/d~e":2}`,
			viol: []problem.FieldError{
				fe("/spec/b", "property is not allowed"),
				fe("/spec/c~1d~0e", "property is not allowed"),
			},
		},
		{
			name:   "top level without type is an object schema",
			schema: strictSchema,
			spec:   `["a"]`,
			viol:   []problem.FieldError{fe("/spec", "must be a JSON object, got array")},
		},
		{
			name:   "default violating the schema surfaces",
			schema: `{"type":"object","properties":{"replicas":{"type":"integer","maximum":5,"default":9}}}`,
			spec:   `{}`,
			want:   `{"replicas":9}`,
			viol:   []problem.FieldError{fe("/spec/replicas", "must be <= 5, got 9")},
		},
		{
			name:   "defaults through $ref to a property default",
			schema: `{"type":"object","$defs":{"port":{"type":"integer","default":80}},"properties":{"port":{"$ref":"#/$defs/port"}}}`,
			spec:   `{}`,
			want:   `{"port":80}`,
		},
		{
			name:   "anyOf reports every leaf",
			schema: `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer","minimum":5}]}}}`,
			spec:   `{"v":3}`,
			want:   `{"v":3}`,
			viol: []problem.FieldError{
				fe("/spec/v", "expected string, got integer"),
				fe("/spec/v", "must be >= 5, got 3"),
			},
		},
		{
			name:   "propertyNames",
			schema: `{"type":"object","properties":{"labels":{"type":"object","propertyNames":{"pattern":"^[a-z]+$"}},"z":{"type":"object"}}}`,
			spec:   `{"labels":{"ok":"1","Bad":"2"},"z":{"a":1,"b":2,"c":3}}`,
			want:   `{"labels":{"Bad":"2","ok":"1"},"z":{"a":1,"b":2,"c":3}}`,
			viol:   []problem.FieldError{fe("/spec/labels/Bad", `invalid property name "Bad": 'Bad' does not match pattern '^[a-z]+$'`)},
		},
		{
			name:   "dependentRequired names each missing property",
			schema: `{"type":"object","dependentRequired":{"tls":["cert","key"]}}`,
			spec:   `{"tls":true}`,
			want:   `{"tls":true}`,
			viol: []problem.FieldError{
				fe("/spec/cert", `required property is missing (required when "tls" is present)`),
				fe("/spec/key", `required property is missing (required when "tls" is present)`),
			},
		},
	}
	compiled := map[string]*Schema{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := tt.schema
			if raw == "" {
				raw = databaseClusterSchema
			}
			s, ok := compiled[raw]
			if !ok {
				s = mustCompile(t, raw)
				compiled[raw] = s
			}
			out, viol, err := s.Admit([]byte(tt.spec))
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if tt.want == "" {
				if out != nil {
					t.Errorf("defaulted = %s, want nil", out)
				}
			} else if string(out) != tt.want {
				t.Errorf("defaulted =\n %s\nwant\n %s", out, tt.want)
			}
			if !reflect.DeepEqual(viol, tt.viol) {
				t.Errorf("violations =\n %q\nwant\n %q", viol, tt.viol)
			}
		})
	}
}

// TestAdmitDepthLimit checks the boundary: 64 levels pass, 65 do not.
func TestAdmitDepthLimit(t *testing.T) {
	s := mustCompile(t, `{"type":"object"}`)
	ok := `{"x":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`
	if out, viol, err := s.Admit([]byte(ok)); err != nil || viol != nil || string(out) != ok {
		t.Errorf("64 levels: out=%s viol=%v err=%v", out, viol, err)
	}
	deep := `{"x":` + strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64) + `}`
	if _, viol, _ := s.Admit([]byte(deep)); len(viol) != 1 || viol[0].Path != "/spec" {
		t.Errorf("65 levels: viol=%v", viol)
	}
	hostile := strings.Repeat("[", 1<<20)
	if _, viol, _ := s.Admit([]byte(hostile)); len(viol) != 1 || viol[0].Message != "nesting deeper than 64 levels" {
		t.Errorf("hostile: viol=%v", viol)
	}
}

// TestRecursiveDefaultsTerminate: a schema whose defaults would expand
// forever stops at the depth limit, and the result is stable.
func TestRecursiveDefaultsTerminate(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"child":{"$ref":"#","default":{}},"n":{"type":"integer","default":1}}}`)
	out, viol, err := s.Admit([]byte(`{}`))
	if err != nil || viol != nil {
		t.Fatalf("viol=%v err=%v", viol, err)
	}
	if d, _ := scan(out); d != maxDepth {
		t.Errorf("depth of defaulted = %d, want %d", d, maxDepth)
	}
	out2, viol, err := s.Admit(out)
	if err != nil || viol != nil || string(out2) != string(out) {
		t.Errorf("re-admit changed the spec or failed: viol=%v err=%v", viol, err)
	}
}

// TestDefaultsAreCopied: applying nested defaults must not modify the
// compiled schema's default values.
func TestDefaultsAreCopied(t *testing.T) {
	s := mustCompile(t, nestedDefaultsSchema)
	for range 2 {
		out, _, err := s.Admit([]byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"backup":{"enabled":true,"window":{"day":"sun","hour":3}}}`; string(out) != want {
			t.Fatalf("out = %s, want %s", out, want)
		}
	}
	backup := s.sch.Properties["backup"]
	if got := (*backup.Default).(map[string]any); len(got) != 0 {
		t.Errorf("compiled default of backup was modified: %v", got)
	}
	window := backup.Properties["window"]
	if got := (*window.Default).(map[string]any); len(got) != 1 {
		t.Errorf("compiled default of window was modified: %v", got)
	}
}

func TestAdmitConcurrent(t *testing.T) {
	s := mustCompile(t, databaseClusterSchema)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				spec := fmt.Sprintf(`{"engine":"postgres","engine_version":"16","instance_class":"c%d","storage_gb":%d}`, i, 5+j)
				_, viol, err := s.Admit([]byte(spec))
				if err != nil || (j >= 5) != (viol == nil) {
					t.Errorf("spec %s: viol=%v err=%v", spec, viol, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		path   string
		msg    string // substring of the first field's message
	}{
		{"unknown type", `{"type":"object","properties":{"engine":{"type":"strnig"}}}`, "/schema/properties/engine/type", `must be one of "array", "boolean"`},
		{"minimum not a number", `{"type":"object","properties":{"n":{"type":"integer","minimum":"ten"}}}`, "/schema/properties/n/minimum", "expected number, got string"},
		{"bad pattern", `{"type":"object","properties":{"s":{"type":"string","pattern":"a(b"}}}`, "/schema/properties/s/pattern", "missing closing )"},
		{"bad patternProperties regex", `{"type":"object","patternProperties":{"a/(":{"type":"string"}}}`, "/schema/patternProperties/a~1(", "invalid regular expression"},
		{"required not an array", `{"type":"object","properties":{"a":{"type":"integer","required":true}}}`, "/schema/properties/a/required", "expected array, got boolean"},
		{"top-level array type", `{"type":"array","items":{"type":"string"}}`, "/schema/type", `top-level type must be "object", got "array"`},
		{"top-level string type", `{"type":"string"}`, "/schema/type", `top-level type must be "object"`},
		{"top-level nullable type list", `{"type":["object","null"]}`, "/schema/type", `top-level type must be "object"`},
		{"JSON array", `[{"type":"object"}]`, "/schema", "schema must be a JSON object, got array"},
		{"JSON string", `"object"`, "/schema", "schema must be a JSON object, got string"},
		{"JSON boolean schema", `true`, "/schema", "schema must be a JSON object, got boolean"},
		{"malformed JSON", `{"type":"object",`, "/schema", "malformed JSON"},
		{"trailing data", `{"type":"object"} x`, "/schema", "malformed JSON"},
		{"remote https $ref", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, "/schema/properties/a/$ref", "remote reference"},
		{"remote http $ref", `{"type":"object","properties":{"a":{"$ref":"http://169.254.169.254/latest"}}}`, "/schema/properties/a/$ref", "remote reference"},
		{"file $ref", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "/schema/properties/a/$ref", "remote reference"},
		{"relative $ref", `{"type":"object","properties":{"a":{"items":{"$ref":"other.json#/x"}}}}`, "/schema/properties/a/items/$ref", "remote reference"},
		{"relative $ref after $id", `{"$id":"https://example.com/root.json","type":"object","properties":{"a":{"$ref":"b.json"}}}`, "/schema/properties/a/$ref", "remote reference"},
		{"metaschema $ref", `{"type":"object","properties":{"a":{"$ref":"https://json-schema.org/draft/2020-12/schema"}}}`, "/schema/properties/a/$ref", "remote reference"},
		{"dangling local $ref", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`, "/schema/properties/a/$ref", "does not resolve"},
		{"unknown anchor", `{"type":"object","properties":{"a":{"$ref":"#nowhere"}}}`, "/schema", "nowhere"},
		{"reference cycle", `{"type":"object","properties":{"a":{"$ref":"#/properties/a"}}}`, "/schema/properties/a/$ref", "reference cycle"},
		{"reference cycle through allOf", `{"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"type":"object"},{"$ref":"#/$defs/a"}]}},"properties":{"x":{"items":{"$ref":"#/$defs/b"}}}}`, "/schema/$defs/b/allOf/1/$ref", "leads back to /schema/$defs/a"},
		{"other dialect", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`, "/schema/$schema", "not supported"},
		{"nullable not boolean", `{"type":"object","properties":{"a":{"type":"string","nullable":"yes"}}}`, "/schema/properties/a/nullable", "expected boolean, got string"},
		{"exclusiveMinimum without minimum", `{"type":"object","properties":{"a":{"type":"integer","exclusiveMinimum":true}}}`, "/schema/properties/a/exclusiveMinimum", "requires minimum"},
		{"huge number", `{"type":"object","properties":{"a":{"type":"integer","maximum":1e9999999}}}`, "/schema/properties/a/maximum", "number out of range"},
		{"huge count", `{"type":"object","properties":{"a":{"type":"string","maxLength":1e30}}}`, "/schema/properties/a/maxLength", "must be at most"},
		{"negative count", `{"type":"object","properties":{"a":{"type":"string","minLength":-1}}}`, "/schema/properties/a/minLength", "must be >= 0, got -1"},
		{"zero multipleOf", `{"type":"object","properties":{"a":{"type":"number","multipleOf":0}}}`, "/schema/properties/a/multipleOf", "must be > 0, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile([]byte(tt.schema))
			if err == nil {
				t.Fatalf("compiled, want an error")
			}
			if s != nil {
				t.Errorf("schema = %v, want nil", s)
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T (%v), want *CompileError", err, err)
			}
			if len(ce.Fields) == 0 {
				t.Fatalf("no fields: %v", ce)
			}
			f := ce.Fields[0]
			if f.Path != tt.path || !strings.Contains(f.Message, tt.msg) {
				t.Errorf("fields = %q\nwant first at %s containing %q", ce.Fields, tt.path, tt.msg)
			}
			if !strings.Contains(err.Error(), "at "+f.Path+": "+f.Message) {
				t.Errorf("Error() = %q does not include the field", err)
			}
			for _, f := range ce.Fields {
				if !strings.HasPrefix(f.Path, "/schema") || strings.Contains(f.Message, "mem://") {
					t.Errorf("field %q: path must start with /schema and message must not leak the resource URL", f)
				}
			}
		})
	}
}

// TestCompileErrorFieldsSeparate: every bad keyword is its own field.
func TestCompileErrorFieldsSeparate(t *testing.T) {
	_, err := Compile([]byte(`{"type":"object","properties":{"a":{"type":"strnig"},"b":{"minimum":"ten"}}}`))
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	var paths []string
	for _, f := range ce.Fields {
		paths = append(paths, f.Path)
	}
	if want := []string{"/schema/properties/a/type", "/schema/properties/b/minimum"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("paths = %q, want %q (fields %q)", paths, want, ce.Fields)
	}
	want := `invalid schema: at /schema/properties/a/type: must be one of "array", "boolean", "integer", "null", "number", "object", "string"; at /schema/properties/b/minimum: expected number, got string`
	if err.Error() != want {
		t.Errorf("Error() =\n %s\nwant\n %s", err, want)
	}
}

func TestCompileAccepts(t *testing.T) {
	for name, raw := range map[string]string{
		"seed":                      databaseClusterSchema,
		"openapi":                   openAPISchema,
		"nested defaults":           nestedDefaultsSchema,
		"array defaults":            arrayDefaultsSchema,
		"no type, properties":       `{"properties":{"a":{"type":"string"}}}`,
		"type list":                 `{"type":["object"]}`,
		"$id is not fetched":        `{"$id":"https://example.com/x.json","type":"object","$defs":{"p":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/p"}}}`,
		"2020-12 $schema":           `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`,
		"boolean subschemas":        `{"type":"object","properties":{"a":true,"b":false}}`,
		"x- keys as property names": `{"type":"object","properties":{"x-id":{"type":"string","default":"d"},"example":{"type":"integer"}},"required":["x-id"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := mustCompile(t, raw)
			if _, _, err := s.Admit([]byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A property literally named x-id keeps its schema and default.
	s := mustCompile(t, `{"type":"object","properties":{"x-id":{"type":"string","default":"d"}}}`)
	if out, viol, _ := s.Admit([]byte(`{}`)); string(out) != `{"x-id":"d"}` || viol != nil {
		t.Errorf("out = %s, viol = %v", out, viol)
	}
}

// TestAdmitOutputIsValidJSON double-checks the encoding of the output.
func TestAdmitOutputIsValidJSON(t *testing.T) {
	s := mustCompile(t, databaseClusterSchema)
	out, _, err := s.Admit([]byte(`{"engine":"postgres","engine_version":"\u2028<>&\"","instance_class":"\ud800","storage_gb":1E2}`))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
	if !strings.Contains(string(out), `"storage_gb":1E2`) || !strings.Contains(string(out), `<>&\"`) {
		t.Errorf("out = %s", out)
	}
}

func BenchmarkAdmit(b *testing.B) {
	s := mustCompile(b, databaseClusterSchema)
	spec := []byte(seedSpec)
	b.ReportAllocs()
	for b.Loop() {
		if _, viol, err := s.Admit(spec); err != nil || viol != nil {
			b.Fatalf("viol=%v err=%v", viol, err)
		}
	}
}

func BenchmarkAdmitInvalid(b *testing.B) {
	s := mustCompile(b, databaseClusterSchema)
	spec := []byte(`{"engine":"oracle","storage_gb":5}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, viol, err := s.Admit(spec); err != nil || viol == nil {
			b.Fatalf("viol=%v err=%v", viol, err)
		}
	}
}

// The empty schema is an object with any fields; a schema without a type
// describes objects.
func TestUntypedTopLevelIsObject(t *testing.T) {
	for _, raw := range []string{`{}`, `{"required":["a"]}`, `{"additionalProperties":{"type":"integer"}}`} {
		s, err := Compile([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if _, viol, _ := s.Admit([]byte(`[]`)); len(viol) == 0 {
			t.Errorf("%s: an array spec is accepted", raw)
		}
	}
	s, _ := Compile([]byte(`{}`))
	out, viol, err := s.Admit([]byte(`{"a":1,"b":{"c":[true]}}`))
	if err != nil || viol != nil || string(out) != `{"a":1,"b":{"c":[true]}}` {
		t.Fatalf("admit: %s %v %v", out, viol, err)
	}
}
