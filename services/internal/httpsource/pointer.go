package httpsource

import (
	"fmt"
	"strconv"
	"strings"
)

// ParsePointer splits an RFC 6901 JSON pointer into its reference tokens
// (unescaped): "" is the whole document (no tokens); otherwise it starts
// with "/", and "~" is followed only by 0 or 1.
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("JSON pointer %q: ~ must be followed by 0 or 1", p)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// Resolve returns the value at pointer p in doc (decoded JSON: maps,
// slices, strings, json.Number, bool, nil).
func Resolve(doc any, p string) (any, error) {
	tokens, err := ParsePointer(p)
	if err != nil {
		return nil, err
	}
	cur := doc
	for _, t := range tokens {
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[t]
			if !ok {
				return nil, fmt.Errorf("%s: no member %q", p, t)
			}
			cur = v
		case []any:
			n, err := arrayIndex(t)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if n >= len(x) {
				return nil, fmt.Errorf("%s: index %d out of range (%d elements)", p, n, len(x))
			}
			cur = x[n]
		default:
			return nil, fmt.Errorf("%s: cannot look up %q in %s", p, t, kind(cur))
		}
	}
	return cur, nil
}

// arrayIndex reads an array index token: decimal, no leading zero.
func arrayIndex(t string) (int, error) {
	if t == "" || (len(t) > 1 && t[0] == '0') || strings.TrimLeft(t, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not an array index", t)
	}
	n, err := strconv.Atoi(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not an array index", t)
	}
	return n, nil
}

// kind names the JSON kind of a decoded value.
func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	}
	return "a number"
}
