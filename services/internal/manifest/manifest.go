package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
)

// The kinds of document.
const (
	KindNamespace        = "Namespace"
	KindResourceType     = "ResourceType"
	KindAdmissionWebhook = "AdmissionWebhook"
	KindResource         = "Resource"
)

// kinds lists the kinds, for messages.
const kinds = "Namespace, ResourceType, AdmissionWebhook, Resource"

// Document is one decoded document: exactly one of Namespace, Type,
// Webhook and Resource is set, as Kind says.
type Document struct {
	// Source says where the document came from, for messages.
	Source Source
	Kind   string

	Namespace *Namespace
	Type      *ResourceType
	Webhook   *Webhook
	Resource  *Resource
}

// Source is where a document was read: a file (or "-" for standard input),
// the document's number in it (from 1) and its first line.
type Source struct {
	File string
	Doc  int
	Line int
}

// String is "file: document N (line L)".
func (s Source) String() string {
	return fmt.Sprintf("%s: document %d (line %d)", s.File, s.Doc, s.Line)
}

// Key names the object a document describes: "Namespace team-a",
// "ResourceType DatabaseCluster/v1", "AdmissionWebhook deny-small",
// "DatabaseCluster/v1 default/production-pg" (a resource without a
// namespace shows default).
func (d Document) Key() string {
	switch {
	case d.Namespace != nil:
		return NamespaceKey(d.Namespace.Name)
	case d.Type != nil:
		return KindResourceType + " " + d.Type.Name + "/" + d.Type.Version
	case d.Webhook != nil:
		return KindAdmissionWebhook + " " + d.Webhook.Name
	case d.Resource != nil:
		return ResourceKey(d.Resource.TypeName, d.Resource.TypeVersion, d.Resource.Namespace, d.Resource.Name)
	}
	return d.Kind
}

// ResourceKey is how messages name a resource: "Type/version
// namespace/name", the namespace defaulted as the API does.
func ResourceKey(typeName, typeVersion, namespace, name string) string {
	return typeName + "/" + typeVersion + " " + names.OrDefault(namespace) + "/" + name
}

// NamespaceKey is how messages name a namespace: "Namespace team-a".
func NamespaceKey(name string) string { return KindNamespace + " " + name }

// Namespace is a kind: Namespace document: the body of
// POST /api/v1/namespaces.
type Namespace struct {
	Name string
}

// ResourceType is a kind: ResourceType document: the body of
// POST /api/v1/resource-types.
type ResourceType struct {
	Name        string
	Version     string
	Description string
	// Schema is the OpenAPI v3 schema of the spec, as JSON.
	Schema json.RawMessage
	// ReconcilePolicy is the policy as JSON, nil when the document has none.
	ReconcilePolicy json.RawMessage
}

// Webhook is a kind: AdmissionWebhook document.
type Webhook struct {
	Name string
	// Body is the registration as the API takes it (name included).
	Body json.RawMessage
}

// Resource is a kind: Resource document: what server-side apply takes.
type Resource struct {
	TypeName    string
	TypeVersion string
	// Namespace is "" when the document names none: the client's
	// namespace applies (default unless configured).
	Namespace string
	Name      string
	// Labels and Annotations are nil when the document does not give them
	// (apply then keeps the stored ones).
	Labels      map[string]string
	Annotations map[string]string
	Spec        json.RawMessage
}

// Error is a document that cannot be used: where, what, and the offending
// fields by JSON pointer into the document.
type Error struct {
	Source Source
	Detail string
	Fields []names.FieldError
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source.String())
	b.WriteString(": ")
	b.WriteString(e.Detail)
	for _, f := range e.Fields {
		b.WriteString("\n  ")
		if f.Path != "" {
			b.WriteString(f.Path)
			b.WriteString(": ")
		}
		b.WriteString(f.Message)
	}
	return b.String()
}

// Parse decodes every document of a stream read from file (a name for
// messages). A stream whose documents are all valid yields them in order;
// otherwise the error joins one *Error per bad document.
func Parse(file string, data []byte) ([]Document, error) {
	var (
		docs []Document
		errs []error
	)
	for i, c := range Split(data) {
		src := Source{File: file, Doc: i + 1, Line: c.Line}
		d, err := decode(src, c.Data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if d != nil {
			docs = append(docs, *d)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return docs, nil
}

// decode turns one document's text into a Document; nil for a document
// that is YAML null (only comments, or `~`).
func decode(src Source, text []byte) (*Document, error) {
	fail := func(detail string, fields ...names.FieldError) error {
		return &Error{Source: src, Detail: detail, Fields: fields}
	}
	data, err := toJSON(text)
	if err != nil {
		return nil, fail(absoluteLines(err.Error(), src.Line))
	}
	if string(data) == "null" {
		return nil, nil
	}
	var top map[string]json.RawMessage
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &top) != nil {
		return nil, fail("a document must be a mapping with a kind")
	}
	var kind string
	if raw, ok := top["kind"]; !ok {
		return nil, fail("kind is missing", names.FieldError{Path: "/kind", Message: "must be one of " + kinds})
	} else if json.Unmarshal(raw, &kind) != nil {
		return nil, fail("kind must be a string", names.FieldError{Path: "/kind", Message: "must be one of " + kinds})
	}
	d := &Document{Source: src, Kind: kind}
	var fields []names.FieldError
	switch kind {
	case KindNamespace:
		d.Namespace, fields = decodeNamespace(top)
	case KindResourceType:
		d.Type, fields = decodeType(top)
	case KindAdmissionWebhook:
		d.Webhook, fields = decodeWebhook(top)
	case KindResource:
		d.Resource, fields = decodeResource(top)
	default:
		return nil, fail(fmt.Sprintf("unknown kind %q", kind), names.FieldError{Path: "/kind", Message: "must be one of " + kinds})
	}
	if len(fields) > 0 {
		return nil, fail("invalid "+kind, fields...)
	}
	return d, nil
}

// toJSON converts a document's YAML (or JSON) text to JSON. JSON text is
// kept as it is (numbers exactly as written); YAML is converted strictly:
// a key given twice is an error.
func toJSON(text []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(text)
	if len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		if err := checkDuplicateKeys(trimmed); err != nil {
			return nil, err
		}
		return trimmed, nil
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(text))
	if err := dec.Decode(&root); errors.Is(err, io.EOF) {
		return []byte("null"), nil
	} else if err != nil {
		return nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	// Split cut the stream at every document marker; a parser that still
	// sees a second document here would have it dropped silently.
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("line %d: not valid YAML: a second document starts inside this one", more.Line)
	}
	budget := maxNodes
	v, err := nodeValue("", &root, &budget)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	return out, nil
}

// maxNodes bounds the values a document may expand to through aliases (a
// few aliases can otherwise stand for billions of values).
const maxNodes = 1 << 20

// nodeValue turns a YAML node into a value encoding/json writes. Scalars
// keep their text: numbers are written as given when JSON can read them
// (1e3 stays 1e3; 0x10 becomes 16), timestamps and every other tag stay
// strings; only true and false are booleans. Mapping keys are scalars, each
// at most once; merge keys (<<) are understood; infinities and NaN are
// refused.
func nodeValue(path string, n *yaml.Node, budget *int) (any, error) {
	*budget--
	if *budget < 0 {
		return nil, fmt.Errorf("the document expands to more than %d values (aliases)", maxNodes)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return nodeValue(path, n.Content[0], budget)
	case yaml.AliasNode:
		return nodeValue(path, n.Alias, budget)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := nodeValue(fmt.Sprintf("%s/%d", path, i), c, budget)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		if err := mergeMapping(path, n, out, map[string]bool{}, budget); err != nil {
			return nil, err
		}
		return out, nil
	case yaml.ScalarNode:
		return scalarValue(path, n)
	}
	return nil, fmt.Errorf("line %d: %s: unsupported YAML node", n.Line, orRoot(path))
}

// mergeMapping adds the pairs of mapping n to out. Keys given explicitly
// (own) may appear once; merged ones (<<) never override them.
func mergeMapping(path string, n *yaml.Node, out map[string]any, own map[string]bool, budget *int) error {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: a mapping key must be a scalar", k.Line, orRoot(path))
		}
		kp := path + "/" + escapePointer(k.Value)
		if own[k.Value] {
			return fmt.Errorf("line %d: %s: the key %q is given twice", k.Line, kp, k.Value)
		}
		own[k.Value] = true
		val, err := nodeValue(kp, v, budget)
		if err != nil {
			return err
		}
		out[k.Value] = val
	}
	for _, m := range merges {
		for m.Kind == yaml.AliasNode {
			m = m.Alias
		}
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			for src.Kind == yaml.AliasNode {
				src = src.Alias
			}
			if src.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: %s: << merges mappings only", src.Line, orRoot(path))
			}
			merged := map[string]any{}
			if err := mergeMapping(path, src, merged, map[string]bool{}, budget); err != nil {
				return err
			}
			for k, v := range merged {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return nil
}

// scalarValue is the JSON value of a scalar node.
func scalarValue(path string, n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n.Line, orRoot(path), err)
		}
		return b, nil
	case "!!int", "!!float":
		if isJSONNumber(n.Value) {
			return json.Number(n.Value), nil
		}
		var i int64
		if n.Decode(&i) == nil {
			return i, nil
		}
		var u uint64
		if n.Decode(&u) == nil {
			return u, nil
		}
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n.Line, orRoot(path), err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("line %d: %s: %s is not a JSON number", n.Line, orRoot(path), n.Value)
		}
		return f, nil
	case "!!str":
		// YAML resolves a plain number out of float64's range (1e400) as a
		// string: a number it is, kept as written, for the server to accept
		// or refuse as a number (issue 27), never stored as "1e400". Quoted
		// or tagged strings stay strings.
		if n.Style == 0 && isJSONNumber(n.Value) {
			return json.Number(n.Value), nil
		}
	}
	return n.Value, nil
}

// isJSONNumber reports whether s is a number as JSON writes them.
func isJSONNumber(s string) bool {
	var v json.Number
	return s != "" && json.Unmarshal([]byte(s), &v) == nil
}

func orRoot(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

var yamlLineRE = regexp.MustCompile(`\bline (\d+)\b`)

// absoluteLines rewrites the parser's "line N", counted from the document's
// first line, into the file's line number.
func absoluteLines(msg string, first int) string {
	return yamlLineRE.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.Atoi(m[len("line "):])
		if err != nil {
			return m
		}
		return "line " + strconv.Itoa(n+first-1)
	})
}

// checkDuplicateKeys refuses a JSON text with a key repeated in an object
// (the API refuses them too: no "last one wins").
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not valid JSON: %w", err)
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return fmt.Errorf("not valid JSON: %w", err)
				}
				k, _ := kt.(string)
				p := path + "/" + escapePointer(k)
				if seen[k] {
					return fmt.Errorf("%s: the key %q is given twice", p, k)
				}
				seen[k] = true
				if err := walk(p); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(fmt.Sprintf("%s/%d", path, i)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		if err != nil {
			return fmt.Errorf("not valid JSON: %w", err)
		}
		return nil
	}
	return walk("")
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// unknownFields reports the top-level fields outside allowed.
func unknownFields(top map[string]json.RawMessage, prefix string, allowed ...string) []names.FieldError {
	var errs []names.FieldError
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !slices.Contains(allowed, k) {
			errs = append(errs, names.FieldError{Path: prefix + "/" + escapePointer(k), Message: "unknown field (allowed: " + strings.Join(allowed, ", ") + ")"})
		}
	}
	return errs
}

// str decodes a string field; missing is "".
func str(top map[string]json.RawMessage, key, path string, errs *[]names.FieldError) string {
	raw, ok := top[key]
	if !ok || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		*errs = append(*errs, names.FieldError{Path: path, Message: "must be a string"})
	}
	return s
}

// stringMap decodes labels or annotations: nil when absent.
func stringMap(top map[string]json.RawMessage, key, path string, errs *[]names.FieldError) map[string]string {
	raw, ok := top[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		*errs = append(*errs, names.FieldError{Path: path, Message: "must be a mapping of strings to strings"})
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		var v string
		if json.Unmarshal(m[k], &v) != nil {
			*errs = append(*errs, names.FieldError{Path: path + "/" + escapePointer(k), Message: "must be a string (quote numbers and booleans: \"1\", \"true\")"})
			continue
		}
		out[k] = v
	}
	return out
}

// metadata decodes a document's metadata mapping.
func metadata(top map[string]json.RawMessage, allowed []string, errs *[]names.FieldError) map[string]json.RawMessage {
	raw, ok := top["metadata"]
	if !ok {
		*errs = append(*errs, names.FieldError{Path: "/metadata/name", Message: "name is required"})
		return map[string]json.RawMessage{}
	}
	var md map[string]json.RawMessage
	if json.Unmarshal(raw, &md) != nil || md == nil {
		*errs = append(*errs, names.FieldError{Path: "/metadata", Message: "must be a mapping"})
		return map[string]json.RawMessage{}
	}
	*errs = append(*errs, unknownFields(md, "/metadata", allowed...)...)
	return md
}

func decodeNamespace(top map[string]json.RawMessage) (*Namespace, []names.FieldError) {
	errs := unknownFields(top, "", "kind", "metadata")
	md := metadata(top, []string{"name"}, &errs)
	ns := &Namespace{Name: str(md, "name", "/metadata/name", &errs)}
	_, hasMetadata := top["metadata"]
	switch fe := names.Namespace("/metadata/name", ns.Name); {
	case fe == nil:
	case ns.Name == "":
		if hasMetadata { // else metadata reported it
			errs = append(errs, names.FieldError{Path: "/metadata/name", Message: "name is required"})
		}
	default:
		errs = append(errs, *fe)
	}
	return ns, errs
}

func decodeType(top map[string]json.RawMessage) (*ResourceType, []names.FieldError) {
	errs := unknownFields(top, "", "kind", "metadata", "version", "description", "schema", "reconcile_policy")
	md := metadata(top, []string{"name"}, &errs)
	t := &ResourceType{
		Name:        str(md, "name", "/metadata/name", &errs),
		Version:     str(top, "version", "/version", &errs),
		Description: str(top, "description", "/description", &errs),
	}
	if fe := names.TypeName("/metadata/name", t.Name); fe != nil {
		errs = append(errs, *fe)
	}
	if fe := names.TypeVersion("/version", t.Version); fe != nil {
		errs = append(errs, *fe)
	}
	switch raw, ok := top["schema"]; {
	case !ok || string(raw) == "null":
		errs = append(errs, names.FieldError{Path: "/schema", Message: "schema is required (an OpenAPI v3 schema of the spec; {} accepts any object)"})
	case raw[0] != '{':
		errs = append(errs, names.FieldError{Path: "/schema", Message: "must be a mapping"})
	default:
		t.Schema = raw
	}
	if raw, ok := top["reconcile_policy"]; ok && string(raw) != "null" {
		if raw[0] != '{' {
			errs = append(errs, names.FieldError{Path: "/reconcile_policy", Message: "must be a mapping"})
		}
		t.ReconcilePolicy = raw
	}
	return t, errs
}

// webhookFields are the fields a webhook document may carry: kind,
// metadata (the name), and every field of the API's registration body
// (client.WebhookWrite) but the name.
var webhookFields = append([]string{"kind", "metadata"}, slices.DeleteFunc(jsonFieldNames(reflect.TypeFor[client.WebhookWrite]()),
	func(n string) bool { return n == "name" })...)

// jsonFieldNames lists the JSON names of a struct's fields, in order.
func jsonFieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func decodeWebhook(top map[string]json.RawMessage) (*Webhook, []names.FieldError) {
	errs := unknownFields(top, "", webhookFields...)
	md := metadata(top, []string{"name"}, &errs)
	w := &Webhook{Name: str(md, "name", "/metadata/name", &errs)}
	if w.Name == "" {
		errs = append(errs, names.FieldError{Path: "/metadata/name", Message: "name is required"})
	}
	for _, k := range []string{"webhook_url", "webhook_type"} {
		if _, ok := top[k]; !ok {
			errs = append(errs, names.FieldError{Path: "/" + k, Message: k + " is required"})
		}
	}
	body := map[string]json.RawMessage{}
	for k, v := range top {
		if k != "kind" && k != "metadata" && slices.Contains(webhookFields, k) {
			body[k] = v
		}
	}
	name, _ := json.Marshal(w.Name)
	body["name"] = name
	w.Body, _ = json.Marshal(body)
	return w, errs
}

func decodeResource(top map[string]json.RawMessage) (*Resource, []names.FieldError) {
	errs := unknownFields(top, "", "kind", "type", "metadata", "spec")
	md := metadata(top, []string{"name", "namespace", "labels", "annotations"}, &errs)
	r := &Resource{
		Name:        str(md, "name", "/metadata/name", &errs),
		Namespace:   str(md, "namespace", "/metadata/namespace", &errs),
		Labels:      stringMap(md, "labels", "/metadata/labels", &errs),
		Annotations: stringMap(md, "annotations", "/metadata/annotations", &errs),
	}
	if fe := names.Name("/metadata/name", r.Name); fe != nil {
		errs = append(errs, *fe)
	}
	if _, given := md["namespace"]; given {
		if fe := names.Namespace("/metadata/namespace", r.Namespace); fe != nil {
			if r.Namespace == "" {
				fe.Message = "namespace must not be empty (leave it out for the CLI's namespace)"
			}
			errs = append(errs, *fe)
		}
	}
	typ := str(top, "type", "/type", &errs)
	name, version, ok := strings.Cut(typ, "/")
	switch {
	case typ == "":
		errs = append(errs, names.FieldError{Path: "/type", Message: "type is required: the resource type and its version, as DatabaseCluster/v1"})
	case !ok:
		errs = append(errs, names.FieldError{Path: "/type", Message: fmt.Sprintf("%q must be Name/version, as DatabaseCluster/v1", typ)})
	default:
		if fe := names.TypeName("/type", name); fe != nil {
			errs = append(errs, *fe)
		}
		if fe := names.TypeVersion("/type", version); fe != nil {
			errs = append(errs, *fe)
		}
	}
	r.TypeName, r.TypeVersion = name, version
	switch raw, ok := top["spec"]; {
	case !ok || string(raw) == "null":
		r.Spec = json.RawMessage("{}")
	case raw[0] != '{':
		errs = append(errs, names.FieldError{Path: "/spec", Message: "must be a mapping"})
	default:
		r.Spec = raw
	}
	return r, errs
}

// kindOrder ranks kinds for applying: namespaces first, then types, then
// webhooks, then resources (so that one apply can create a namespace,
// register a type and create resources of it in that namespace, with the
// webhooks that admit them in place).
func kindOrder(kind string) int {
	switch kind {
	case KindNamespace:
		return 0
	case KindResourceType:
		return 1
	case KindAdmissionWebhook:
		return 2
	}
	return 3
}

// SortForApply orders documents for apply: by kind (namespaces, types,
// webhooks, resources), otherwise as read. Delete goes the other way round.
func SortForApply(docs []Document) {
	slices.SortStableFunc(docs, func(a, b Document) int { return kindOrder(a.Kind) - kindOrder(b.Kind) })
}
