package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// Admit validates spec (a JSON object, raw bytes) against the schema after
// applying the schema's defaults. It returns the defaulted spec as compact JSON
// (no HTML escaping, numbers preserved exactly), and every violation with its
// JSON pointer prefixed with "/spec" (e.g. "/spec/storage_gb"), sorted by path.
// A spec that is not a JSON object (or not JSON, or nested deeper than 64
// levels) is one violation at "/spec"; a number that strictjson.NumberOK
// refuses (outside a double's range, or too long as written or as stored) is
// a violation at its path. In those cases nothing is validated and defaulted is nil.
// violations == nil means valid. err is reserved for internal failures.
func (s *Schema) Admit(spec []byte) (defaulted []byte, violations []problem.FieldError, err error) {
	depth, badNumber := scan(spec)
	if depth > maxDepth {
		return nil, []problem.FieldError{{Path: "/spec", Message: fmt.Sprintf("nesting deeper than %d levels", maxDepth)}}, nil
	}
	doc, err := decode(spec)
	if err != nil {
		return nil, []problem.FieldError{{Path: "/spec", Message: "malformed JSON: " + err.Error()}}, nil
	}
	if badNumber {
		if bad := badNumbers(doc, "/spec", nil); len(bad) > 0 {
			return nil, sortFields(bad), nil
		}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, []problem.FieldError{{Path: "/spec", Message: "must be a JSON object, got " + jsonKind(doc)}}, nil
	}

	s.applyDefaults(s.sch, obj, 1)

	if verr := s.sch.Validate(obj); verr != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(verr, &ve) {
			return nil, nil, fmt.Errorf("schema: validate: %w", verr)
		}
		violations = collectFields(ve, "/spec", obj, false)
		if len(violations) == 0 { // a failure with no leaf detail
			violations = []problem.FieldError{{Path: "/spec", Message: "does not match the schema"}}
		}
		violations = sortFields(violations)
	}

	defaulted, err = resource.Marshal(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("schema: encode defaulted spec: %w", err)
	}
	return defaulted, violations, nil
}

// decode parses one JSON value, numbers as json.Number, rejecting trailing data.
func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid data after top-level value")
	}
	return v, nil
}

// scan reports the deepest nesting of objects and arrays in b and whether a
// number literal is out of range, looking at bytes only, so hostile input
// costs next to nothing to reject. It is exact for valid JSON; for invalid
// JSON the decoder reports the error anyway.
func scan(b []byte) (depth int, badNumber bool) {
	cur := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			cur++
			depth = max(depth, cur)
		case '}', ']':
			cur--
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			j := i + 1
			for j < len(b) && isNumberByte(b[j]) {
				j++
			}
			if !strictjson.NumberOK(string(b[i:j])) {
				badNumber = true
			}
			i = j - 1
		}
	}
	return depth, badNumber
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// badNumbers returns a violation at every out-of-range number in v.
func badNumbers(v any, path string, out []problem.FieldError) []problem.FieldError {
	switch v := v.(type) {
	case json.Number:
		if !strictjson.NumberOK(string(v)) {
			out = append(out, problem.FieldError{Path: path, Message: strictjson.NumberRangeMessage})
		}
	case map[string]any:
		for k, e := range v {
			out = badNumbers(e, path+"/"+escapeToken(k), out)
		}
	case []any:
		for i, e := range v {
			out = badNumbers(e, path+"/"+strconv.Itoa(i), out)
		}
	}
	return out
}

// valueDepth is the nesting depth of a decoded value (scalars are 0).
func valueDepth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, valueDepth(e))
		}
		return d + 1
	case []any:
		for _, e := range v {
			d = max(d, valueDepth(e))
		}
		return d + 1
	}
	return 0
}

// deepCopy copies decoded JSON so defaults never share the compiled schema's
// maps and slices.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// applyDefaults fills in missing properties that have a default, in v (at
// nesting level depth, the spec being level 1) and below, following the
// subschemas that certainly apply: $ref and allOf, properties,
// patternProperties, additionalProperties and array items. A default is not
// applied where it would nest deeper than maxDepth (which also stops
// recursive schemas whose defaults would expand forever).
func (s *Schema) applyDefaults(sch *jsonschema.Schema, v any, depth int) {
	switch v := v.(type) {
	case map[string]any:
		s.defaultObject(sch, v, depth)
	case []any:
		s.defaultArray(sch, v, depth)
	}
}

// applicable returns sch and every schema it pulls in at the same instance
// location through $ref and allOf, each once, in a deterministic order.
func (s *Schema) applicable(sch *jsonschema.Schema, out []*jsonschema.Schema) []*jsonschema.Schema {
	if sch == nil || !s.hasDefaults[sch] {
		return out
	}
	for _, seen := range out {
		if seen == sch {
			return out
		}
	}
	out = append(out, sch)
	out = s.applicable(sch.Ref, out)
	for _, a := range sch.AllOf {
		out = s.applicable(a, out)
	}
	return out
}

// defaultOf returns the default that applies to a missing property with
// schema sch: its own, or one reached through $ref/allOf.
func defaultOf(sch *jsonschema.Schema, seen int) *any {
	if sch == nil || seen > 32 {
		return nil
	}
	if sch.Default != nil {
		return sch.Default
	}
	if d := defaultOf(sch.Ref, seen+1); d != nil {
		return d
	}
	for _, a := range sch.AllOf {
		if d := defaultOf(a, seen+1); d != nil {
			return d
		}
	}
	return nil
}

func (s *Schema) defaultObject(sch *jsonschema.Schema, obj map[string]any, depth int) {
	var buf [4]*jsonschema.Schema
	for _, a := range s.applicable(sch, buf[:0]) {
		for name, ps := range a.Properties {
			if !s.hasDefaults[ps] {
				continue
			}
			pv, present := obj[name]
			if !present {
				d := defaultOf(ps, 0)
				if d == nil || depth+s.defaultDepth[d] > maxDepth {
					continue
				}
				pv = deepCopy(*d)
				obj[name] = pv
			}
			s.applyDefaults(ps, pv, depth+1)
		}
		if len(a.PatternProperties) > 0 {
			patterns := sortedPatterns(a)
			for name, pv := range obj {
				for _, re := range patterns {
					if ps := a.PatternProperties[re]; s.hasDefaults[ps] && re.MatchString(name) {
						s.applyDefaults(ps, pv, depth+1)
					}
				}
			}
		}
		if ap, ok := a.AdditionalProperties.(*jsonschema.Schema); ok && s.hasDefaults[ap] {
			for name, pv := range obj {
				if _, declared := a.Properties[name]; declared || matchesAny(a, name) {
					continue
				}
				s.applyDefaults(ap, pv, depth+1)
			}
		}
	}
}

// sortedPatterns orders sch's patternProperties, so that when several match
// one property the first default to apply is always the same.
func sortedPatterns(sch *jsonschema.Schema) []jsonschema.Regexp {
	out := make([]jsonschema.Regexp, 0, len(sch.PatternProperties))
	for re := range sch.PatternProperties {
		out = append(out, re)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func matchesAny(sch *jsonschema.Schema, name string) bool {
	for re := range sch.PatternProperties {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func (s *Schema) defaultArray(sch *jsonschema.Schema, arr []any, depth int) {
	var buf [4]*jsonschema.Schema
	for _, a := range s.applicable(sch, buf[:0]) {
		for i, e := range arr {
			if is := itemSchema(a, i); is != nil && s.hasDefaults[is] {
				s.applyDefaults(is, e, depth+1)
			}
		}
	}
}

// itemSchema is the schema for element i of an array under sch.
func itemSchema(sch *jsonschema.Schema, i int) *jsonschema.Schema {
	if i < len(sch.PrefixItems) {
		return sch.PrefixItems[i]
	}
	if sch.Items2020 != nil {
		return sch.Items2020
	}
	switch items := sch.Items.(type) { // drafts before 2020-12
	case *jsonschema.Schema:
		return items
	case []*jsonschema.Schema:
		if i < len(items) {
			return items[i]
		}
		if ai, ok := sch.AdditionalItems.(*jsonschema.Schema); ok {
			return ai
		}
	}
	return nil
}

// children are the subschemas applyDefaults can descend into from sch.
func children(sch *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	add := func(c *jsonschema.Schema) {
		if c != nil {
			out = append(out, c)
		}
	}
	add(sch.Ref)
	for _, c := range sch.AllOf {
		add(c)
	}
	for _, c := range sch.Properties {
		add(c)
	}
	for _, c := range sch.PatternProperties {
		add(c)
	}
	if ap, ok := sch.AdditionalProperties.(*jsonschema.Schema); ok {
		add(ap)
	}
	for _, c := range sch.PrefixItems {
		add(c)
	}
	add(sch.Items2020)
	switch items := sch.Items.(type) {
	case *jsonschema.Schema:
		add(items)
	case []*jsonschema.Schema:
		for _, c := range items {
			add(c)
		}
	}
	if ai, ok := sch.AdditionalItems.(*jsonschema.Schema); ok {
		add(ai)
	}
	return out
}

// findDefaults computes, for every schema reachable from root through
// children, whether a default is reachable from it (a fixpoint, so cycles
// through $ref are handled), and the nesting depth of every default.
func findDefaults(root *jsonschema.Schema) (map[*jsonschema.Schema]bool, map[*any]int) {
	kids := map[*jsonschema.Schema][]*jsonschema.Schema{}
	var order []*jsonschema.Schema
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		sch := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, seen := kids[sch]; seen {
			continue
		}
		k := children(sch)
		kids[sch] = k
		order = append(order, sch)
		stack = append(stack, k...)
	}
	has := make(map[*jsonschema.Schema]bool, len(order))
	depths := map[*any]int{}
	for _, sch := range order {
		if sch.Default != nil {
			has[sch] = true
			depths[sch.Default] = valueDepth(*sch.Default)
		}
	}
	for changed := true; changed; {
		changed = false
		for _, sch := range order {
			if has[sch] {
				continue
			}
			for _, k := range kids[sch] {
				if has[k] {
					has[sch] = true
					changed = true
					break
				}
			}
		}
	}
	return has, depths
}

// appendKindFields appends the field errors for one leaf error at path:
// one per property for required, additionalProperties and dependencies.
func appendKindFields(fields []problem.FieldError, path string, k jsonschema.ErrorKind) []problem.FieldError {
	switch k := k.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			fields = append(fields, problem.FieldError{Path: path + "/" + escapeToken(m), Message: "required property is missing"})
		}
		return fields
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			fields = append(fields, problem.FieldError{Path: path + "/" + escapeToken(p), Message: "property is not allowed"})
		}
		return fields
	case *kind.DependentRequired:
		for _, m := range k.Missing {
			fields = append(fields, problem.FieldError{Path: path + "/" + escapeToken(m), Message: fmt.Sprintf("required property is missing (required when %q is present)", k.Prop)})
		}
		return fields
	case *kind.Dependency:
		for _, m := range k.Missing {
			fields = append(fields, problem.FieldError{Path: path + "/" + escapeToken(m), Message: fmt.Sprintf("required property is missing (required when %q is present)", k.Prop)})
		}
		return fields
	}
	return append(fields, problem.FieldError{Path: path, Message: kindMessage(k)})
}

// kindMessage is a human message for one leaf error.
func kindMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Minimum:
		return fmt.Sprintf("must be >= %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be <= %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be > %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be < %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long, got %d", k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long, got %d", k.Want, k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items, got %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items, got %d", k.Want, k.Got)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d properties, got %d", k.Want, k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d properties, got %d", k.Want, k.Got)
	case *kind.FalseSchema:
		return "value is not allowed here"
	case *kind.Not:
		return `must not match the "not" schema`
	case *kind.OneOf:
		if len(k.Subschemas) == 2 {
			return fmt.Sprintf("must match exactly one oneOf schema, but matches #%d and #%d", k.Subschemas[0], k.Subschemas[1])
		}
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = compactJSON(w)
		}
		if len(want) == 1 {
			return "must be " + want[0]
		}
		return "must be one of " + strings.Join(want, ", ")
	case *kind.Const:
		return "must be " + compactJSON(k.Want)
	}
	return k.LocalizedString(english)
}

// english prints the library's messages for the kinds without a message here.
var english = message.NewPrinter(language.English)

// ratString renders an exact number: an integer as such, otherwise a decimal
// when exact, else a fraction.
func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	if prec, exact := r.FloatPrec(); exact {
		return r.FloatString(prec)
	}
	return r.RatString()
}
