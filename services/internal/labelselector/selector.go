// Package labelselector parses Kubernetes-style label selectors
// (app=web,tier!=db,env in (prod,stage),!legacy) and matches label sets
// against them. The store turns a Selector into SQL; watchers match in memory.
package labelselector

import (
	"fmt"
	"sort"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
)

// Operator is a requirement's comparison.
type Operator string

// The supported operators.
const (
	Equals       Operator = "="
	NotEquals    Operator = "!="
	In           Operator = "in"
	NotIn        Operator = "notin"
	Exists       Operator = "exists"
	DoesNotExist Operator = "!"
)

// MaxLength bounds a selector string.
const MaxLength = 4096

// Requirement is one comma-separated term of a selector.
type Requirement struct {
	Key      string
	Operator Operator
	// Values holds one value for = and !=, one or more for in and notin.
	Values []string
}

// Selector is the conjunction of its requirements; the empty selector matches
// everything.
type Selector []Requirement

// Parse parses a selector. The empty string is the empty selector.
func Parse(s string) (Selector, error) {
	if len(s) > MaxLength {
		return nil, fmt.Errorf("label selector is longer than %d characters", MaxLength)
	}
	var sel Selector
	for _, term := range splitTerms(s) {
		term = strings.TrimSpace(term)
		if term == "" {
			if strings.TrimSpace(s) == "" {
				continue
			}
			return nil, fmt.Errorf("label selector %q has an empty term", s)
		}
		r, err := parseTerm(term)
		if err != nil {
			return nil, err
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// splitTerms splits on commas outside parentheses.
func splitTerms(s string) []string {
	var terms []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				terms = append(terms, s[start:i])
				start = i + 1
			}
		}
	}
	return append(terms, s[start:])
}

func parseTerm(t string) (Requirement, error) {
	if strings.HasPrefix(t, "!") {
		key := strings.TrimSpace(t[1:])
		if err := checkKey(key); err != nil {
			return Requirement{}, err
		}
		return Requirement{Key: key, Operator: DoesNotExist}, nil
	}
	if i := strings.Index(t, "!="); i >= 0 {
		return binary(t[:i], NotEquals, t[i+2:])
	}
	if i := strings.Index(t, "=="); i >= 0 {
		return binary(t[:i], Equals, t[i+2:])
	}
	if i := strings.Index(t, "="); i >= 0 {
		return binary(t[:i], Equals, t[i+1:])
	}
	if open := strings.Index(t, "("); open >= 0 {
		if !strings.HasSuffix(t, ")") {
			return Requirement{}, fmt.Errorf("label selector term %q: missing ')'", t)
		}
		head := strings.Fields(t[:open])
		if len(head) != 2 {
			return Requirement{}, fmt.Errorf("label selector term %q: expected 'key in (a,b)' or 'key notin (a,b)'", t)
		}
		var op Operator
		switch head[1] {
		case "in":
			op = In
		case "notin":
			op = NotIn
		default:
			return Requirement{}, fmt.Errorf("label selector term %q: unknown operator %q", t, head[1])
		}
		if err := checkKey(head[0]); err != nil {
			return Requirement{}, err
		}
		var values []string
		for _, v := range strings.Split(t[open+1:len(t)-1], ",") {
			v = strings.TrimSpace(v)
			if err := checkValue(v); err != nil {
				return Requirement{}, err
			}
			values = append(values, v)
		}
		sort.Strings(values)
		return Requirement{Key: head[0], Operator: op, Values: values}, nil
	}
	if err := checkKey(t); err != nil {
		return Requirement{}, err
	}
	return Requirement{Key: t, Operator: Exists}, nil
}

func binary(key string, op Operator, value string) (Requirement, error) {
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	if err := checkKey(key); err != nil {
		return Requirement{}, err
	}
	if err := checkValue(value); err != nil {
		return Requirement{}, err
	}
	return Requirement{Key: key, Operator: op, Values: []string{value}}, nil
}

// checkKey checks a key by the rule of label keys (names.QualifiedKey, as
// in Kubernetes): a key no label can have is an error, not an empty match.
func checkKey(k string) error {
	if fe := names.QualifiedKey("", k); fe != nil {
		return fmt.Errorf("label selector: %s", fe.Message)
	}
	return nil
}

// checkValue checks a value by the rule of label values (names.LabelValue).
func checkValue(v string) error {
	if fe := names.LabelValue("", v); fe != nil {
		return fmt.Errorf("label selector: %s", fe.Message)
	}
	return nil
}

// Matches reports whether labels satisfy every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		v, ok := labels[r.Key]
		switch r.Operator {
		case Equals:
			if !ok || v != r.Values[0] {
				return false
			}
		case NotEquals:
			if ok && v == r.Values[0] {
				return false
			}
		case In:
			if !ok || !contains(r.Values, v) {
				return false
			}
		case NotIn:
			if ok && contains(r.Values, v) {
				return false
			}
		case Exists:
			if !ok {
				return false
			}
		case DoesNotExist:
			if ok {
				return false
			}
		}
	}
	return true
}

func contains(values []string, v string) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

// String renders the selector in canonical form.
func (s Selector) String() string {
	parts := make([]string, 0, len(s))
	for _, r := range s {
		switch r.Operator {
		case Exists:
			parts = append(parts, r.Key)
		case DoesNotExist:
			parts = append(parts, "!"+r.Key)
		case In, NotIn:
			parts = append(parts, fmt.Sprintf("%s %s (%s)", r.Key, r.Operator, strings.Join(r.Values, ",")))
		default:
			parts = append(parts, r.Key+string(r.Operator)+r.Values[0])
		}
	}
	return strings.Join(parts, ",")
}
