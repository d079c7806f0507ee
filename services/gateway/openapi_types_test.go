package gateway

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/client"
)

// documentTypes maps every schema of the OpenAPI document to its Go type
// in libs/client. A schema missing here fails TestOpenAPIMatchesClientTypes.
var documentTypes = map[string]reflect.Type{
	"WatchEvent":             reflect.TypeFor[client.WatchEvent](),
	"WatchBookmark":          reflect.TypeFor[client.WatchBookmark](),
	"WatchError":             reflect.TypeFor[client.WatchError](),
	"FieldError":             reflect.TypeFor[client.FieldError](),
	"Error":                  reflect.TypeFor[client.Error](),
	"JSONSchema":             reflect.TypeFor[json.RawMessage](),
	"ResourceType":           reflect.TypeFor[client.ResourceType](),
	"ResourceTypeCreate":     reflect.TypeFor[client.ResourceTypeWrite](),
	"ResourceTypeUpdate":     reflect.TypeFor[client.ResourceTypeWrite](),
	"OwnerReference":         reflect.TypeFor[client.OwnerReference](),
	"Condition":              reflect.TypeFor[client.Condition](),
	"Labels":                 reflect.TypeFor[map[string]string](),
	"Annotations":            reflect.TypeFor[map[string]string](),
	"Resource":               reflect.TypeFor[client.Resource](),
	"ResourceCreate":         reflect.TypeFor[client.CreateRequest](),
	"ResourceApply":          reflect.TypeFor[client.ApplyRequest](),
	"ResourceUpdate":         reflect.TypeFor[client.UpdateRequest](),
	"ResourcePatch":          reflect.TypeFor[client.ResourcePatch](),
	"JSONPatch":              reflect.TypeFor[[]client.JSONPatchOperation](),
	"JSONPatchOperation":     reflect.TypeFor[client.JSONPatchOperation](),
	"FinalizersUpdate":       reflect.TypeFor[client.FinalizersUpdate](),
	"Health":                 reflect.TypeFor[client.Health](),
	"AdmissionWebhook":       reflect.TypeFor[client.Webhook](),
	"AdmissionWebhookCreate": reflect.TypeFor[client.WebhookWrite](),
	"AdmissionWebhookUpdate": reflect.TypeFor[client.WebhookUpdate](),
	"ReconcilePolicy":        reflect.TypeFor[client.ReconcilePolicy](),
	"ReconcilePolicyWrite":   reflect.TypeFor[client.ReconcilePolicyWrite](),
	"HistoryEntry":           reflect.TypeFor[client.HistoryEntry](),
	"Outputs":                reflect.TypeFor[client.Outputs](),
	"Reconciler":             reflect.TypeFor[client.Reconciler](),
	"Token":                  reflect.TypeFor[client.Token](),
	"TokenCreate":            reflect.TypeFor[client.TokenCreate](),
	"WhoAmI":                 reflect.TypeFor[client.WhoAmI](),
	"AccessReview":           reflect.TypeFor[client.AccessReview](),
	"AccessReviewResult":     reflect.TypeFor[client.AccessReviewResult](),
	"EventRecord":            reflect.TypeFor[client.EventRecord](),
	"EventRecordCreate":      reflect.TypeFor[client.EventRecordCreate](),
	"Namespace":              reflect.TypeFor[client.Namespace](),
	"NamespaceCreate":        reflect.TypeFor[client.NamespaceCreate](),
}

// schema is the part of an OpenAPI 3.0 schema the drift check reads.
type schema struct {
	Type                 string             `json:"type"`
	Format               string             `json:"format"`
	Ref                  string             `json:"$ref"`
	Nullable             bool               `json:"nullable"`
	Description          string             `json:"description"`
	Properties           map[string]*schema `json:"properties"`
	Items                *schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	OneOf                []*schema          `json:"oneOf"`
}

// ignoredProperty is a property the server accepts and ignores (its
// description says "Ignored."): no Go field needs to carry it.
func ignoredProperty(s *schema) bool { return strings.TrimSpace(s.Description) == "Ignored." }

// driftProblems compares every component schema of doc with its Go type,
// field for field in both directions, and returns what differs.
func driftProblems(doc []byte) ([]string, error) {
	var d struct {
		Components struct {
			Schemas map[string]*schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	var problems []string
	for name, s := range d.Components.Schemas {
		t, ok := documentTypes[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("schema %s has no Go type in libs/client (documentTypes)", name))
			continue
		}
		problems = append(problems, compareSchema(name, s, t)...)
	}
	for name := range documentTypes {
		if _, ok := d.Components.Schemas[name]; !ok {
			problems = append(problems, fmt.Sprintf("Go type for schema %s, which the document no longer has", name))
		}
	}
	slices.Sort(problems)
	return problems, nil
}

// goField is one JSON field of a Go struct.
type goField struct {
	name      string
	typ       reflect.Type
	omitempty bool
}

// jsonFields lists t's JSON fields, embedded structs flattened.
func jsonFields(t reflect.Type) map[string]goField {
	out := map[string]goField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out[name] = goField{name: name, typ: f.Type, omitempty: strings.Contains(opts, "omitempty")}
	}
	return out
}

var (
	rawType  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
)

func compareSchema(name string, s *schema, t reflect.Type) []string {
	if t.Kind() == reflect.Slice && t != rawType {
		if p := compareProperty(s, t); p != "" {
			return []string{name + ": " + p}
		}
		return nil
	}
	if t == rawType || t.Kind() == reflect.Map {
		if s.Type != "object" {
			return []string{fmt.Sprintf("%s: schema type %q, Go %s", name, s.Type, t)}
		}
		return nil
	}
	if t.Kind() != reflect.Struct {
		return []string{fmt.Sprintf("%s: Go %s is not a struct", name, t)}
	}
	var problems []string
	fields := jsonFields(t)
	for prop, ps := range s.Properties {
		f, ok := fields[prop]
		if !ok {
			if !ignoredProperty(ps) {
				problems = append(problems, fmt.Sprintf("%s.%s: in the document, not in Go %s", name, prop, t))
			}
			continue
		}
		if p := compareProperty(ps, f.typ); p != "" {
			problems = append(problems, fmt.Sprintf("%s.%s: %s", name, prop, p))
		}
	}
	for fname := range fields {
		if _, ok := s.Properties[fname]; !ok {
			problems = append(problems, fmt.Sprintf("%s.%s: in Go %s, not in the document", name, fname, t))
		}
	}
	return problems
}

// compareProperty says how a property's schema and its Go field's type
// disagree ("" when they agree).
func compareProperty(s *schema, t reflect.Type) string {
	if s.Ref != "" {
		ref := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		want, ok := documentTypes[ref]
		if !ok {
			return "refers to unmapped schema " + ref
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t != want {
			return fmt.Sprintf("refers to %s (Go %s), field is %s", ref, want, t)
		}
		return ""
	}
	if s.Nullable {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		default:
			return fmt.Sprintf("nullable, but Go %s cannot be null", t)
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch s.Type {
	case "string":
		if t.Kind() == reflect.String || (s.Format == "date-time" && t == timeType) {
			return ""
		}
	case "integer":
		switch t.Kind() {
		case reflect.Int, reflect.Int32, reflect.Int64:
			if s.Format == "int64" && t.Kind() == reflect.Int32 {
				return "int64 in the document, int32 in Go"
			}
			return ""
		}
	case "number":
		if t.Kind() == reflect.Float64 {
			return ""
		}
	case "boolean":
		if t.Kind() == reflect.Bool {
			return ""
		}
	case "array":
		if t.Kind() == reflect.Slice && t != rawType {
			if s.Items == nil {
				return ""
			}
			return compareProperty(s.Items, t.Elem())
		}
	case "object", "":
		if t.Kind() == reflect.Map || t == rawType || t.Kind() == reflect.Struct || t.Kind() == reflect.Interface {
			return ""
		}
	}
	return fmt.Sprintf("type %q (format %q) in the document, Go %s", s.Type, s.Format, t)
}

// TestOpenAPIMatchesClientTypes: every schema of the served OpenAPI
// document has its Go type in libs/client with the same fields, of
// compatible types, and no more.
func TestOpenAPIMatchesClientTypes(t *testing.T) {
	problems, err := driftProblems(openAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("openapi.json and libs/client differ:\n  %s", strings.Join(problems, "\n  "))
	}
}

// TestDriftGuardCatchesChanges: the check fails on modified copies of the
// document: a property added, one removed, one retyped, a schema added.
func TestDriftGuardCatchesChanges(t *testing.T) {
	edit := func(t *testing.T, f func(schemas map[string]any)) []string {
		t.Helper()
		var doc map[string]any
		if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
			t.Fatal(err)
		}
		f(doc["components"].(map[string]any)["schemas"].(map[string]any))
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		problems, err := driftProblems(data)
		if err != nil {
			t.Fatal(err)
		}
		return problems
	}
	props := func(schemas map[string]any, name string) map[string]any {
		return schemas[name].(map[string]any)["properties"].(map[string]any)
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"field added to Resource", func(s map[string]any) {
			props(s, "Resource")["paused"] = map[string]any{"type": "boolean"}
		}, "Resource.paused: in the document, not in Go"},
		{"field added to AdmissionWebhook", func(s map[string]any) {
			props(s, "AdmissionWebhook")["side_effects"] = map[string]any{"type": "string"}
		}, "AdmissionWebhook.side_effects: in the document, not in Go"},
		{"field removed from Namespace", func(s map[string]any) {
			delete(props(s, "Namespace"), "uid")
		}, "Namespace.uid: in Go"},
		{"field retyped in EventRecord", func(s map[string]any) {
			props(s, "EventRecord")["count"] = map[string]any{"type": "string"}
		}, "EventRecord.count: type \"string\""},
		{"field made nullable in HistoryEntry", func(s map[string]any) {
			props(s, "HistoryEntry")["generation"].(map[string]any)["nullable"] = true
		}, "HistoryEntry.generation: nullable"},
		{"schema added", func(s map[string]any) {
			s["Lease"] = map[string]any{"type": "object", "properties": map[string]any{}}
		}, "schema Lease has no Go type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := edit(t, tc.edit)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("want a problem containing %q, got %q", tc.want, problems)
			}
		})
	}
}
