package storage

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/no8s/no8s/services/internal/resource"
)

// StoredCollections are a resource's JSON-valued collection columns as a
// backend read them (PostgreSQL's jsonb text or SQLite's text).
type StoredCollections struct {
	Labels, Annotations, Owners, Conditions, Finalizers []byte
}

// Decode sets r's labels, annotations, owner references, conditions and
// finalizers from their stored JSON. The common shapes (string maps and
// lists whose strings hold no escapes, empty lists) are read without
// reflection; anything else goes through encoding/json. Every read of a
// resource comes here: it was a tenth of the store's CPU under the
// reconcile benchmark when all of it went through encoding/json.
func (c StoredCollections) Decode(r *resource.Resource) error {
	var err error
	if r.Labels, err = decodeStringMap(c.Labels); err != nil {
		return fmt.Errorf("labels: %w", err)
	}
	if r.Annotations, err = decodeStringMap(c.Annotations); err != nil {
		return fmt.Errorf("annotations: %w", err)
	}
	if r.Finalizers, err = decodeStrings(c.Finalizers); err != nil {
		return fmt.Errorf("finalizers: %w", err)
	}
	if isEmptyArray(c.Owners) {
		r.OwnerReferences = []resource.OwnerReference{}
	} else if err := unmarshalStored(c.Owners, &r.OwnerReferences); err != nil {
		return fmt.Errorf("owner references: %w", err)
	}
	if conds, ok := scanConditions(c.Conditions); ok {
		r.Conditions = conds
	} else if err := unmarshalStored(c.Conditions, &r.Conditions); err != nil {
		return fmt.Errorf("conditions: %w", err)
	}
	return nil
}

func unmarshalStored(raw []byte, v any) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// decodeStringMap reads a JSON object of strings. NULL (no text) is nil.
func decodeStringMap(raw []byte) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if m, ok := scanStringMap(raw); ok {
		return m, nil
	}
	var m map[string]string
	err := json.Unmarshal(raw, &m)
	return m, err
}

// decodeStrings reads a JSON array of strings. NULL (no text) is nil.
func decodeStrings(raw []byte) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if l, ok := scanStrings(raw); ok {
		return l, nil
	}
	var l []string
	err := json.Unmarshal(raw, &l)
	return l, err
}

// isEmptyArray reports whether raw is [] (spaces allowed).
func isEmptyArray(raw []byte) bool {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return false
	}
	i = skipSpace(raw, i+1)
	return i < len(raw) && raw[i] == ']' && skipSpace(raw, i+1) == len(raw)
}

// scanStringMap reads {"k": "v", ...} whose strings hold no backslash and
// no control character; ok is false for anything else (encoding/json then
// decides). A repeated key keeps its last value, as encoding/json does.
func scanStringMap(raw []byte) (map[string]string, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	m := map[string]string{}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return m, skipSpace(raw, i+1) == len(raw)
	}
	for {
		k, j, ok := scanPlainString(raw, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(raw, j)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		v, j, ok := scanPlainString(raw, skipSpace(raw, i+1))
		if !ok {
			return nil, false
		}
		m[k] = v
		i = skipSpace(raw, j)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return m, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// scanStrings reads ["a", ...] under scanStringMap's rules.
func scanStrings(raw []byte) ([]string, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	l := []string{}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return l, skipSpace(raw, i+1) == len(raw)
	}
	for {
		s, j, ok := scanPlainString(raw, i)
		if !ok {
			return nil, false
		}
		l = append(l, s)
		i = skipSpace(raw, j)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return l, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// scanConditions reads a list of conditions whose keys are exactly the
// condition's field names, whose strings are plain (scanPlainString) and
// whose observed generation is an integer literal; ok is false for
// anything else (encoding/json then decides).
func scanConditions(raw []byte) ([]resource.Condition, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	out := []resource.Condition{}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return out, skipSpace(raw, i+1) == len(raw)
	}
	for {
		c, j, ok := scanCondition(raw, i)
		if !ok {
			return nil, false
		}
		out = append(out, c)
		i = skipSpace(raw, j)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return out, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// scanCondition reads the condition object at raw[i] (as scanConditions
// says) and returns the index after its closing brace.
func scanCondition(raw []byte, i int) (resource.Condition, int, bool) {
	var c resource.Condition
	if i >= len(raw) || raw[i] != '{' {
		return c, 0, false
	}
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != '}' {
		k, j, ok := scanPlainString(raw, i)
		if !ok {
			return c, 0, false
		}
		i = skipSpace(raw, j)
		if i >= len(raw) || raw[i] != ':' {
			return c, 0, false
		}
		j, ok = scanConditionField(raw, skipSpace(raw, i+1), k, &c)
		if !ok {
			return c, 0, false
		}
		i = skipSpace(raw, j)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
			if i < len(raw) && raw[i] == '}' {
				return c, 0, false
			}
		} else if i >= len(raw) || raw[i] != '}' {
			return c, 0, false
		}
	}
	if i >= len(raw) {
		return c, 0, false
	}
	return c, i + 1, true
}

// scanConditionField reads the value of the condition's field k at raw[i]
// into c and returns the index after it; ok is false for an unknown key.
func scanConditionField(raw []byte, i int, k string, c *resource.Condition) (int, bool) {
	if k == "observed_generation" {
		n, end, ok := scanIntLiteral(raw, i)
		if !ok {
			return 0, false
		}
		c.ObservedGeneration = n
		return end, true
	}
	v, end, ok := scanPlainString(raw, i)
	if !ok {
		return 0, false
	}
	switch k {
	case "type":
		c.Type = v
	case "status":
		c.Status = v
	case "reason":
		c.Reason = v
	case "message":
		c.Message = v
	case "last_transition_time":
		if err := c.LastTransitionTime.UnmarshalJSON(raw[i:end]); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return end, true
}

// scanIntLiteral reads the JSON integer literal at raw[i] (an optional
// minus, then digits with no leading zero) that fits an int64, and returns
// the index after it.
func scanIntLiteral(raw []byte, i int) (int64, int, bool) {
	j := i
	if j < len(raw) && raw[j] == '-' {
		j++
	}
	for j < len(raw) && raw[j] >= '0' && raw[j] <= '9' {
		j++
	}
	digits := raw[i:j]
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' { // not a JSON number
		return 0, 0, false
	}
	n, err := strconv.ParseInt(string(raw[i:j]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return n, j, true
}

// scanPlainString reads the JSON string at raw[i] when it holds no
// backslash, no control character and only valid UTF-8 (so its text is its
// value), and returns the index after its closing quote.
func scanPlainString(raw []byte, i int) (string, int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return "", 0, false
	}
	ascii := true
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			s := raw[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return "", 0, false
			}
			return string(s), j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", 0, false
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}
