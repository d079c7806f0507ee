package httpsource

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// ErrBody is matched (errors.Is) by every body that is not a list of items
// where the spec says: not JSON, no value at itemsPointer, not an array,
// too many items.
var ErrBody = errors.New("invalid body")

// ErrTooManyItems is matched by a list longer than the limit.
var ErrTooManyItems = errors.New("too many items")

// Items decodes body (numbers kept as written) and returns the array at
// pointer; more than limit items (when limit > 0) is an error.
func Items(body []byte, pointer string, limit int) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrBody, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrBody)
	}
	v, err := Resolve(doc, pointer)
	if err != nil {
		return nil, fmt.Errorf("%w: itemsPointer %w", ErrBody, err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: the value at itemsPointer %q is %s, not an array", ErrBody, pointer, kind(v))
	}
	if limit > 0 && len(list) > limit {
		return nil, fmt.Errorf("%w: %d items, the limit is %d", ErrTooManyItems, len(list), limit)
	}
	return list, nil
}

// Item is one item mapped to a resource.
type Item struct {
	Name   string
	Spec   []byte
	Labels map[string]string
}

// Applied is the digest registry-sync records in AnnotationApplied: of the
// spec and the labels as mapped.
func (it Item) Applied() string {
	h := sha256.New()
	h.Write(it.Spec)
	for _, k := range slices.Sorted(maps.Keys(it.Labels)) {
		fmt.Fprintf(h, "\x00%s\x00%s", k, it.Labels[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Map maps one item (decoded JSON) to a resource: its name (a DNS-1123
// label), spec (a JSON object) and labels (valid label keys and values),
// its templates rendered by rd as one render (one budget: a
// tenancy.BudgetError past it). The errors name the field of the spec that
// failed.
func (s Spec) Map(ctx context.Context, rd *tenancy.Renderer, item any) (Item, error) {
	var out Item
	render := rd.Session(ctx)
	switch {
	case s.NamePointer != nil:
		v, err := Resolve(item, *s.NamePointer)
		if err != nil {
			return out, fmt.Errorf("namePointer: %w", err)
		}
		switch v := v.(type) {
		case string:
			out.Name = v
		case json.Number:
			out.Name = v.String()
		default:
			return out, fmt.Errorf("namePointer %q: the name is %s, not a string", *s.NamePointer, kind(v))
		}
	default:
		name, err := render.Execute("/nameTemplate", s.NameTemplate, item)
		if err != nil {
			return out, err // a *tenancy.RenderError at /nameTemplate
		}
		out.Name = strings.TrimSpace(name)
	}
	if fe := names.Name("name", out.Name); fe != nil {
		return out, errors.New(fe.Message)
	}
	switch {
	case s.SpecPointer != nil:
		v, err := Resolve(item, *s.SpecPointer)
		if err != nil {
			return out, fmt.Errorf("specPointer: %w", err)
		}
		if _, ok := v.(map[string]any); !ok {
			return out, fmt.Errorf("specPointer %q: the spec is %s, not an object", *s.SpecPointer, kind(v))
		}
		if out.Spec, err = resource.Marshal(v); err != nil {
			return out, fmt.Errorf("specPointer: %w", err)
		}
		// The item's own text: a NUL (\u0000) is refused here, before any
		// write, as in a rendered value.
		if bytes.Contains(out.Spec, []byte(`\u0000`)) {
			return out, fmt.Errorf("specPointer %q: %w: the spec holds a NUL character", *s.SpecPointer, tenancy.ErrBadText)
		}
	default:
		spec, err := render.RenderObject("/spec", s.Spec, item)
		if err != nil {
			return out, fmt.Errorf("spec: %w", err)
		}
		out.Spec = spec
	}
	out.Labels = map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		v, err := render.Execute("/labels/"+resource.EscapePointer(k), s.Labels[k], item)
		if err != nil {
			return out, fmt.Errorf("labels: %w", err)
		}
		out.Labels[k] = strings.TrimSpace(v)
	}
	if errs := resource.ValidateMetadata(out.Labels, nil, nil); len(errs) > 0 {
		slices.SortFunc(errs, func(a, b problem.FieldError) int { return strings.Compare(a.Path, b.Path) })
		return out, fmt.Errorf("labels: %s: %s", errs[0].Path, errs[0].Message)
	}
	return out, nil
}
