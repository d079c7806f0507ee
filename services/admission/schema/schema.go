package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
)

// resourceURL is the in-memory location the schema document is compiled at.
const resourceURL = "mem://resource-type/schema.json"

// maxDepth is the deepest nesting of objects and arrays that Admit accepts in
// a spec (the spec object itself is level 1). Defaults are never applied where
// they would make the result deeper.
const maxDepth = 64

// maxSchemaDepth bounds the nesting of subschemas in a schema document.
const maxSchemaDepth = 256

// draft2020URL is the only $schema value accepted.
const draft2020URL = "https://json-schema.org/draft/2020-12/schema"

// Schema is a compiled resource type schema; safe for concurrent use.
type Schema struct {
	sch *jsonschema.Schema
	// hasDefaults reports, for every subschema reachable from sch, whether
	// applying defaults under it can change anything (a default is reachable).
	// Read-only after Compile.
	hasDefaults map[*jsonschema.Schema]bool
	// defaultDepth is the nesting depth of each reachable default value,
	// keyed by the schema's Default pointer. Read-only after Compile.
	defaultDepth map[*any]int
}

// CompileError says why a schema does not compile; Fields name the offending
// places by JSON pointer prefixed with "/schema" (e.g. "/schema/properties/x/type"),
// or just "/schema" when no finer location is known.
type CompileError struct {
	Fields []problem.FieldError
}

// Error implements error: every field as "at <path>: <message>", joined by "; ".
func (e *CompileError) Error() string {
	var sb strings.Builder
	sb.WriteString("invalid schema")
	for i, f := range e.Fields {
		if i == 0 {
			sb.WriteString(": ")
		} else {
			sb.WriteString("; ")
		}
		sb.WriteString("at ")
		sb.WriteString(f.Path)
		sb.WriteString(": ")
		sb.WriteString(f.Message)
	}
	return sb.String()
}

func compileErr(path, format string, args ...any) *CompileError {
	return &CompileError{Fields: []problem.FieldError{{Path: path, Message: fmt.Sprintf(format, args...)}}}
}

// Compile compiles raw (a JSON object) as an OpenAPI v3 schema.
// On failure it returns *CompileError.
func Compile(raw []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, compileErr("/schema", "malformed JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, compileErr("/schema", "schema must be a JSON object, got %s", jsonKind(doc))
	}
	if bad := badNumbers(obj, "/schema", nil); len(bad) > 0 {
		return nil, newCompileError(bad)
	}
	if err := checkTopLevel(obj); err != nil {
		return nil, err
	}
	p := &prep{}
	p.schema(obj, "/schema", 0, obj)
	p.resolveRefs()
	if len(p.errs) > 0 {
		return nil, newCompileError(p.errs)
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(resourceURL, obj); err != nil {
		return nil, compileErr("/schema", "%v", err)
	}
	sch, err := c.Compile(resourceURL)
	if err != nil {
		return nil, translateCompileError(err, obj)
	}
	if err := checkCycles(sch); err != nil {
		return nil, err
	}
	has, depths := findDefaults(sch)
	return &Schema{sch: sch, hasDefaults: has, defaultDepth: depths}, nil
}

// edge is a subschema applied to the same instance location as its parent.
type edge struct {
	keyword string
	to      *jsonschema.Schema
}

// sameInstance lists the subschemas that apply to the instance sch applies
// to (rather than to a property or item of it).
func sameInstance(sch *jsonschema.Schema) []edge {
	var out []edge
	add := func(kw string, to *jsonschema.Schema) {
		if to != nil {
			out = append(out, edge{kw, to})
		}
	}
	add("$ref", sch.Ref)
	add("$recursiveRef", sch.RecursiveRef)
	if sch.DynamicRef != nil {
		add("$dynamicRef", sch.DynamicRef.Ref)
	}
	for i, c := range sch.AllOf {
		add("allOf/"+strconv.Itoa(i), c)
	}
	for i, c := range sch.AnyOf {
		add("anyOf/"+strconv.Itoa(i), c)
	}
	for i, c := range sch.OneOf {
		add("oneOf/"+strconv.Itoa(i), c)
	}
	add("not", sch.Not)
	add("if", sch.If)
	add("then", sch.Then)
	add("else", sch.Else)
	names := make([]string, 0, len(sch.DependentSchemas))
	for name := range sch.DependentSchemas {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		add("dependentSchemas/"+escapeToken(name), sch.DependentSchemas[name])
	}
	return out
}

// checkCycles refuses references that lead back to a schema already applied
// to the same value (for example {"$ref": "#/properties/a"} at
// /properties/a): validation would never terminate, and jsonschema only
// reports it when an instance reaches it.
func checkCycles(root *jsonschema.Schema) *CompileError {
	const (
		visiting = 1
		done     = 2
	)
	state := map[*jsonschema.Schema]int{}
	var cycle *CompileError
	var visit func(sch *jsonschema.Schema) bool
	visit = func(sch *jsonschema.Schema) bool {
		state[sch] = visiting
		for _, e := range sameInstance(sch) {
			switch state[e.to] {
			case visiting:
				cycle = compileErr(schemaPath(sch.Location)+"/"+e.keyword,
					"reference cycle: %s leads back to %s without descending into the value",
					schemaPath(sch.Location)+"/"+e.keyword, schemaPath(e.to.Location))
				return false
			case 0:
				if !visit(e.to) {
					return false
				}
			}
		}
		state[sch] = done
		return true
	}
	// Every schema, not only the root's same-instance closure: cycles may
	// sit under properties or items. Sorted, so that the cycle reported is
	// always the same one.
	seen := map[*jsonschema.Schema]bool{}
	var all []*jsonschema.Schema
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		sch := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[sch] {
			continue
		}
		seen[sch] = true
		all = append(all, sch)
		stack = append(stack, allSubschemas(sch)...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Location < all[j].Location })
	for _, sch := range all {
		if state[sch] == 0 && !visit(sch) {
			return cycle
		}
	}
	return nil
}

// allSubschemas lists every subschema of sch that validation can reach.
func allSubschemas(sch *jsonschema.Schema) []*jsonschema.Schema {
	out := children(sch)
	for _, e := range sameInstance(sch) {
		out = append(out, e.to)
	}
	for _, c := range []*jsonschema.Schema{sch.PropertyNames, sch.Contains, sch.UnevaluatedProperties, sch.UnevaluatedItems, sch.ContentSchema} {
		if c != nil {
			out = append(out, c)
		}
	}
	for _, d := range sch.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok {
			out = append(out, c)
		}
	}
	return out
}

// schemaPath turns a compiled schema's location into a /schema pointer.
func schemaPath(loc string) string {
	if !strings.HasPrefix(loc, resourceURL) {
		return "/schema"
	}
	return "/schema" + fragmentPointer(loc)
}

// checkTopLevel requires the top level to describe objects: type "object",
// or no type at all, which means an object (type "object" is added), so that
// the empty schema {} is an object with any fields, as in the seed.
func checkTopLevel(obj map[string]any) *CompileError {
	t, ok := obj["type"]
	if !ok {
		obj["type"] = "object"
		return nil
	}
	switch t := t.(type) {
	case string:
		if t == "object" {
			return nil
		}
	case []any:
		if len(t) == 1 && t[0] == "object" {
			return nil
		}
	}
	return compileErr("/schema/type", `top-level type must be "object", got %s`, compactJSON(t))
}

// refuseLoader refuses every URL: a schema must not fetch anything.
type refuseLoader struct{}

func (refuseLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("loading %q refused: schemas must be self-contained", u)
}

// Keywords whose value is one subschema, a map of subschemas, or an array of
// subschemas.
var (
	singleSchemaKeywords = []string{
		"additionalProperties", "items", "not", "if", "then", "else",
		"propertyNames", "contains", "unevaluatedProperties", "unevaluatedItems",
		"additionalItems", "contentSchema",
	}
	mapSchemaKeywords   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
	arraySchemaKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	// openAPIOnly are OpenAPI 3.0 keywords that are not JSON Schema; dropped.
	openAPIOnly = map[string]bool{"example": true, "discriminator": true, "xml": true, "externalDocs": true}
	refKeywords = []string{"$ref", "$dynamicRef", "$recursiveRef"}
	// intKeywords take a count; the library converts them to int unchecked.
	intKeywords = []string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"}
)

// prep rewrites a decoded OpenAPI 3.0 schema document in place into draft
// 2020-12, collecting the errors it can name precisely. Only values at the
// same keys change, so JSON pointers into the rewritten document remain
// valid for the original.
type prep struct {
	errs []problem.FieldError
	refs []localRef
}

// localRef is a "#/..." reference to check once the document is rewritten.
type localRef struct {
	at     string // pointer of the $ref keyword
	ref    string
	root   any // the schema resource the reference is relative to
	tokens []string
}

// resolveRefs reports local JSON-pointer references that lead nowhere, at
// the $ref itself (the library names only the missing target).
func (p *prep) resolveRefs() {
	for _, r := range p.refs {
		if _, ok := lookup(r.root, r.tokens); !ok {
			p.fail(r.at, "reference %q does not resolve: no such location in the schema", r.ref)
		}
	}
}

// parseLocalRef returns the pointer tokens of a "#/a/b" reference; ok is
// false for anchors ("#name") and undecodable fragments.
func parseLocalRef(ref string) (tokens []string, ok bool) {
	frag, err := url.PathUnescape(strings.TrimPrefix(ref, "#"))
	if err != nil {
		return nil, false
	}
	if frag == "" {
		return nil, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false
	}
	tokens = strings.Split(frag[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, true
}

func (p *prep) fail(path, format string, args ...any) {
	p.errs = append(p.errs, problem.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// schema checks and rewrites the schema v found at ptr, depth levels deep,
// then each of its subschemas; resRoot is the schema resource its local
// references are relative to.
func (p *prep) schema(v any, ptr string, depth int, resRoot any) {
	obj, ok := v.(map[string]any)
	if !ok {
		return // booleans are schemas; anything else the metaschema reports
	}
	if depth > maxSchemaDepth {
		p.fail(ptr, "schema nested deeper than %d levels", maxSchemaDepth)
		return
	}
	dropExtensions(obj)
	p.checkRefs(obj, ptr, resRoot)
	p.checkSchemaURI(obj, ptr)
	p.rewriteNullable(obj, ptr)
	p.checkCounts(obj, ptr)
	p.checkPatterns(obj, ptr)
	p.exclusive(obj, ptr, "exclusiveMinimum", "minimum")
	p.exclusive(obj, ptr, "exclusiveMaximum", "maximum")
	if id, ok := obj["$id"].(string); ok && depth > 0 && strings.TrimPrefix(id, "#") != "" {
		resRoot = obj // a nested resource: its "#/..." references are relative to it
	}
	p.subschemas(obj, ptr, depth, resRoot)
}

// dropExtensions removes the x- extensions and the keywords only OpenAPI
// knows.
func dropExtensions(obj map[string]any) {
	for k := range obj {
		if strings.HasPrefix(k, "x-") || openAPIOnly[k] {
			delete(obj, k)
		}
	}
}

// checkRefs refuses remote references and records each local $ref, to
// check once the document is rewritten (resolveRefs).
func (p *prep) checkRefs(obj map[string]any, ptr string, resRoot any) {
	for _, kw := range refKeywords {
		r, ok := obj[kw]
		if !ok {
			continue
		}
		s, isStr := r.(string)
		switch {
		case !isStr:
		case !strings.HasPrefix(s, "#"):
			p.fail(ptr+"/"+escapeToken(kw), "remote reference %q is not allowed: only local references (\"#...\") are", s)
		case kw == "$ref":
			if tokens, ok := parseLocalRef(s); ok {
				p.refs = append(p.refs, localRef{at: ptr + "/$ref", ref: s, root: resRoot, tokens: tokens})
			}
		}
	}
}

// checkSchemaURI accepts only draft 2020-12 as $schema.
func (p *prep) checkSchemaURI(obj map[string]any, ptr string) {
	if s, ok := obj["$schema"]; ok {
		if str, _ := s.(string); strings.TrimSuffix(str, "#") != draft2020URL {
			p.fail(ptr+"/$schema", "$schema %s is not supported: schemas are OpenAPI v3 (JSON Schema %s)", compactJSON(s), draft2020URL)
		}
	}
}

// rewriteNullable rewrites OpenAPI 3.0's nullable into a type (and an
// enum) that accepts null.
func (p *prep) rewriteNullable(obj map[string]any, ptr string) {
	n, ok := obj["nullable"]
	if !ok {
		return
	}
	delete(obj, "nullable")
	switch n := n.(type) {
	case bool:
		if n {
			addNull(obj)
		}
	default:
		p.fail(ptr+"/nullable", "expected boolean, got %s", jsonKind(n))
	}
}

// checkCounts refuses counts (maxLength and the like) over math.MaxInt32.
func (p *prep) checkCounts(obj map[string]any, ptr string) {
	for _, kw := range intKeywords {
		if n, ok := obj[kw].(json.Number); ok {
			if f, err := strconv.ParseFloat(string(n), 64); err == nil && f > math.MaxInt32 {
				p.fail(ptr+"/"+kw, "must be at most %d, got %s", math.MaxInt32, n)
			}
		}
	}
}

// checkPatterns refuses a patternProperties key that is not a regular
// expression.
func (p *prep) checkPatterns(obj map[string]any, ptr string) {
	if pp, ok := obj["patternProperties"].(map[string]any); ok {
		for re := range pp {
			if _, err := regexp.Compile(re); err != nil {
				p.fail(ptr+"/patternProperties/"+escapeToken(re), "invalid regular expression %q: %v", re, err)
			}
		}
	}
}

// subschemas goes on into every subschema of obj, one level deeper.
func (p *prep) subschemas(obj map[string]any, ptr string, depth int, resRoot any) {
	for _, kw := range singleSchemaKeywords {
		if sub, ok := obj[kw]; ok {
			p.schema(sub, ptr+"/"+kw, depth+1, resRoot)
		}
	}
	for _, kw := range mapSchemaKeywords {
		if m, ok := obj[kw].(map[string]any); ok {
			for name, sub := range m {
				p.schema(sub, ptr+"/"+escapeToken(kw)+"/"+escapeToken(name), depth+1, resRoot)
			}
		}
	}
	for _, kw := range arraySchemaKeywords {
		if a, ok := obj[kw].([]any); ok {
			for i, sub := range a {
				p.schema(sub, fmt.Sprintf("%s/%s/%d", ptr, kw, i), depth+1, resRoot)
			}
		}
	}
}

// addNull makes a schema with nullable: true accept null.
func addNull(obj map[string]any) {
	switch t := obj["type"].(type) {
	case string:
		if t != "null" {
			obj["type"] = []any{t, "null"}
		}
	case []any:
		if !containsNull(t, "null") {
			obj["type"] = append(t, "null")
		}
	}
	if e, ok := obj["enum"].([]any); ok && !containsNull(e, nil) {
		obj["enum"] = append(e, nil)
	}
}

func containsNull(a []any, null any) bool {
	for _, v := range a {
		if v == null {
			return true
		}
	}
	return false
}

// exclusive rewrites OpenAPI 3.0's boolean exclusiveMinimum (with minimum)
// into the numeric draft 2020-12 form; likewise for the maximum.
func (p *prep) exclusive(obj map[string]any, ptr, exKw, kw string) {
	b, ok := obj[exKw].(bool)
	if !ok {
		return // absent, or numeric (2020-12 form), or invalid: metaschema's call
	}
	if !b {
		delete(obj, exKw)
		return
	}
	bound, has := obj[kw]
	if !has {
		p.fail(ptr+"/"+exKw, "%s: true requires %s", exKw, kw)
		return
	}
	if _, isNum := bound.(json.Number); !isNum {
		delete(obj, exKw) // the metaschema reports the bad bound
		return
	}
	obj[exKw] = bound
	delete(obj, kw)
}

// translateCompileError turns an error from jsonschema's Compile into a
// *CompileError with /schema pointers.
// doc is the compiled document, for naming the types of bad values.
func translateCompileError(err error, doc any) *CompileError {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			frag := fragmentPointer(sve.URL)
			sub, _ := parseLocalRef("#" + frag)
			at, found := lookup(doc, sub)
			if !found {
				at = nil
			}
			fields := collectFields(ve, "/schema"+frag, at, true)
			if len(fields) > 0 {
				return newCompileError(fields)
			}
		}
		return compileErr("/schema"+fragmentPointer(sve.URL), "%s", clean(sve.Err.Error()))
	}
	var rxe *jsonschema.InvalidRegexError
	if errors.As(err, &rxe) {
		return compileErr("/schema"+fragmentPointer(rxe.URL), "invalid regular expression %q: %v", rxe.Regex, rxe.Err)
	}
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) {
		return compileErr("/schema", "reference to %q is not allowed: schemas must be self-contained", le.URL)
	}
	return compileErr("/schema", "%s", clean(err.Error()))
}

// newCompileError sorts and deduplicates fields.
func newCompileError(fields []problem.FieldError) *CompileError {
	return &CompileError{Fields: sortFields(fields)}
}

// fragmentPointer returns the JSON pointer in u's fragment ("" for none).
func fragmentPointer(u string) string {
	_, frag, ok := strings.Cut(u, "#")
	if !ok || frag == "" {
		return ""
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if !strings.HasPrefix(frag, "/") {
		return "" // an anchor, not a pointer
	}
	return frag
}

// clean rewrites the internal resource URL in a library message into /schema.
func clean(msg string) string {
	msg = strings.ReplaceAll(msg, resourceURL+"#/", "/schema/")
	msg = strings.ReplaceAll(msg, resourceURL+"#", "#")
	return strings.ReplaceAll(msg, resourceURL, "/schema")
}

// collectFields returns one field error per leaf of ve's tree (more for
// leaves naming several properties), each at base + its instance location.
// doc, when not nil, is the validated instance, used to name the type of a
// value that has the wrong type. With prune, an anyOf/oneOf whose branches
// fail for different reasons reports only the branches that failed for more
// than their type (the value had a plausible type but wrong content): for
// schema errors, where the metaschema's alternatives are noise.
func collectFields(ve *jsonschema.ValidationError, base string, doc any, prune bool) []problem.FieldError {
	var fields []problem.FieldError
	var walk func(ve *jsonschema.ValidationError)
	walk = func(ve *jsonschema.ValidationError) {
		if len(ve.Causes) == 0 {
			path := base + pointer(ve.InstanceLocation)
			if t, ok := ve.ErrorKind.(*kind.Type); ok && doc != nil {
				if v, found := lookup(doc, ve.InstanceLocation); found {
					fields = append(fields, problem.FieldError{Path: path, Message: fmt.Sprintf("expected %s, got %s", strings.Join(t.Want, " or "), jsonKind(v))})
					return
				}
			}
			fields = appendKindFields(fields, path, ve.ErrorKind)
			return
		}
		if pn, ok := ve.ErrorKind.(*kind.PropertyNames); ok {
			var msgs []string
			for _, c := range ve.Causes {
				for _, f := range collectFields(c, "", nil, prune) {
					msgs = append(msgs, f.Message)
				}
			}
			fields = append(fields, problem.FieldError{
				Path:    base + locateProperty(doc, ve.InstanceLocation, pn.Property),
				Message: fmt.Sprintf("invalid property name %q: %s", pn.Property, strings.Join(msgs, "; ")),
			})
			return
		}
		causes := ve.Causes
		if prune {
			switch ve.ErrorKind.(type) {
			case *kind.AnyOf, *kind.OneOf:
				causes = pruneTypeOnly(causes)
			}
		}
		for _, c := range causes {
			walk(c)
		}
	}
	walk(ve)
	return fields
}

// locateProperty returns the pointer of property name in the object that
// failed propertyNames. jsonschema v6.0.3 records that object's location
// without copying a slice that sibling validations later overwrite, so the
// reported location has the right length but maybe not the right tokens: use
// it when it names an object holding name, else the first such object at the
// same depth, else the bare location.
func locateProperty(doc any, reported []string, name string) string {
	holds := func(v any) bool {
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		_, has := obj[name]
		return has
	}
	if doc == nil {
		return ""
	}
	if v, ok := lookup(doc, reported); ok && holds(v) {
		return pointer(reported) + "/" + escapeToken(name)
	}
	var found []string
	var walk func(v any, path string, depth int)
	walk = func(v any, path string, depth int) {
		if depth == len(reported) {
			if holds(v) {
				found = append(found, path)
			}
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(e, path+"/"+escapeToken(k), depth+1)
			}
		case []any:
			for i, e := range v {
				walk(e, path+"/"+strconv.Itoa(i), depth+1)
			}
		}
	}
	walk(doc, "", 0)
	if len(found) == 0 {
		return ""
	}
	sort.Strings(found)
	return found[0] + "/" + escapeToken(name)
}

// pruneTypeOnly drops the causes that are only type mismatches, unless all are.
func pruneTypeOnly(causes []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	var keep []*jsonschema.ValidationError
	for _, c := range causes {
		if !onlyTypeErrors(c) {
			keep = append(keep, c)
		}
	}
	if len(keep) == 0 {
		return causes
	}
	return keep
}

func onlyTypeErrors(ve *jsonschema.ValidationError) bool {
	if len(ve.Causes) == 0 {
		_, ok := ve.ErrorKind.(*kind.Type)
		return ok
	}
	for _, c := range ve.Causes {
		if !onlyTypeErrors(c) {
			return false
		}
	}
	return true
}

// lookup finds the value at the JSON pointer tokens in a decoded document.
func lookup(doc any, tokens []string) (any, bool) {
	for _, tok := range tokens {
		switch d := doc.(type) {
		case map[string]any:
			v, ok := d[tok]
			if !ok {
				return nil, false
			}
			doc = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(d) {
				return nil, false
			}
			doc = d[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// sortFields sorts by path then message and drops exact duplicates.
func sortFields(fields []problem.FieldError) []problem.FieldError {
	sort.Slice(fields, func(i, j int) bool {
		if fields[i].Path != fields[j].Path {
			return fields[i].Path < fields[j].Path
		}
		return fields[i].Message < fields[j].Message
	})
	out := fields[:0]
	for i, f := range fields {
		if i > 0 && f == fields[i-1] {
			continue
		}
		out = append(out, f)
	}
	return out
}

// pointer renders JSON pointer tokens ("" for none).
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(escapeToken(t))
	}
	return sb.String()
}

func escapeToken(t string) string { return resource.EscapePointer(t) }

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if strings.ContainsAny(v.String(), ".eE") {
			return "number"
		}
		return "integer"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// compactJSON renders a decoded value for a message.
func compactJSON(v any) string {
	b, err := resource.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
