package github

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// GitHub's limits on workflow_dispatch inputs.
const (
	// DefaultMaxInputs is how many inputs GitHub takes in one dispatch
	// (github.com; older GitHub Enterprise Server versions take 10: set
	// Config.MaxInputs). The correlation input counts as one.
	DefaultMaxInputs = 25
	// MaxInputsBytes bounds the JSON text of all inputs together (GitHub's
	// 65,535-character payload limit for inputs).
	MaxInputsBytes = 65535
	// CorrelationInput is the input that carries the correlation id: the
	// workflow declares it and puts it in its run-name, so that the run is
	// found among concurrent runs of the same workflow. Reserved: a spec's
	// inputs may not use the name.
	CorrelationInput = "no8s_correlation_id"
)

// inputNameRE is GitHub's rule for an input's id: a letter or _, then
// letters, digits, - and _.
var inputNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// InputError is an input that cannot be sent to GitHub: its path in the
// spec's inputs (JSON pointer, /db/size) and why.
type InputError struct {
	Path    string
	Message string
}

func (e *InputError) Error() string { return "inputs" + e.Path + ": " + e.Message }

// Flatten turns a resource's inputs (a JSON object) into workflow_dispatch
// inputs, which are strings, by this rule:
//
//   - a string is passed as it is; a number as its JSON text (12, 1.5e3 as
//     written); true and false as "true" and "false";
//   - null leaves the input out (the workflow's default applies);
//   - an object is flattened: member m of input a becomes input a_m, at
//     any depth ({"db": {"size": 10}} → db_size = "10"); an empty object
//     sends nothing;
//   - an array is sent as its compact JSON text (["a","b"] → `["a","b"]`;
//     the workflow reads it with fromJSON).
//
// Every resulting name must be a GitHub input id (a letter or _, then
// letters, digits, - and _); names are compared without regard to case, so
// two that meet ({"a_b": 1, "a": {"b": 2}}, or A and a) are refused, as is
// the reserved CorrelationInput. At most maxInputs inputs result, and
// their JSON text is at most MaxInputsBytes. Anything else is refused with
// an *InputError naming the path: nothing is dispatched.
func Flatten(inputs json.RawMessage, maxInputs int) (map[string]string, error) {
	out := map[string]string{}
	if len(bytes.TrimSpace(inputs)) == 0 || string(bytes.TrimSpace(inputs)) == "null" {
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(inputs))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, &InputError{Path: "", Message: "not JSON: " + err.Error()}
	}
	if dec.More() {
		return nil, &InputError{Path: "", Message: "must be one JSON object"}
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return nil, &InputError{Path: "", Message: "must be one JSON object of input names to values"}
	}
	seen := map[string]string{} // lower-case name → path
	var walk func(name, path string, v any) error
	walk = func(name, path string, v any) error {
		var s string
		switch x := v.(type) {
		case nil:
			return nil
		case map[string]any:
			for _, k := range sortedKeys(x) {
				if err := walk(name+"_"+k, path+"/"+escapePointer(k), x[k]); err != nil {
					return err
				}
			}
			return nil
		case string:
			s = x
		case json.Number:
			s = x.String()
		case bool:
			s = fmt.Sprint(x)
		case []any:
			b, err := json.Marshal(x)
			if err != nil {
				return &InputError{Path: path, Message: err.Error()}
			}
			s = string(b)
		default:
			return &InputError{Path: path, Message: fmt.Sprintf("unsupported value %T", v)}
		}
		if !inputNameRE.MatchString(name) {
			return &InputError{Path: path, Message: fmt.Sprintf("%q is not a GitHub input name: a letter or _, then letters, digits, - and _", name)}
		}
		key := strings.ToLower(name)
		if key == CorrelationInput {
			return &InputError{Path: path, Message: fmt.Sprintf("%s is reserved for the correlation id", CorrelationInput)}
		}
		if other, dup := seen[key]; dup {
			return &InputError{Path: path, Message: fmt.Sprintf("becomes input %q, as %s does (names are compared without regard to case)", name, other)}
		}
		seen[key] = path
		out[name] = s
		return nil
	}
	for _, k := range sortedKeys(obj) {
		if err := walk(k, "/"+escapePointer(k), obj[k]); err != nil {
			return nil, err
		}
	}
	if maxInputs > 0 && len(out) > maxInputs {
		return nil, &InputError{Path: "", Message: fmt.Sprintf("%d inputs after flattening; GitHub takes at most %d besides the correlation id: pass a group as an array or fewer fields", len(out), maxInputs)}
	}
	if b, _ := json.Marshal(out); len(b) > MaxInputsBytes {
		return nil, &InputError{Path: "", Message: fmt.Sprintf("the inputs are %d characters of JSON; GitHub takes at most %d", len(b), MaxInputsBytes)}
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
