package httpsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// SampleItem is the item admission renders a spec's templates with: every
// field chain its templates read ({{ .meta.team }}) and the namePointer's
// path set, the last element to "sample" (specPointer "" takes the item).
func (s Spec) SampleItem() map[string]any {
	item := map[string]any{}
	texts := []string{s.NameTemplate}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		texts = append(texts, s.Labels[k])
	}
	texts = append(texts, specTexts(s.Spec)...)
	var chains [][]string
	for _, text := range texts {
		chains = append(chains, tenancy.Fields(text)...)
	}
	if s.NamePointer != nil {
		if tokens, err := ParsePointer(*s.NamePointer); err == nil && len(tokens) > 0 {
			chains = append(chains, tokens)
		}
	}
	for _, chain := range chains {
		m := item
		for _, k := range chain[:len(chain)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		if _, ok := m[chain[len(chain)-1]]; !ok {
			m[chain[len(chain)-1]] = "sample"
		}
	}
	return item
}

// specTexts are the strings (keys too) of a spec object that hold
// templates.
func specTexts(raw []byte) []string {
	var out []string
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case string:
			if strings.Contains(x, "{{") {
				out = append(out, x)
			}
		case map[string]any:
			for k, v := range x {
				walk(k)
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	var v any
	if json.Unmarshal(raw, &v) == nil {
		walk(v)
	}
	return out
}

// CheckSample renders the spec's templates with SampleItem through rd, as
// registry-sync will with each item: a render past its budget, or that
// makes text with a NUL or invalid UTF-8, is an error naming the field
// (/spec/nameTemplate, /spec/spec/...). Other errors (a missing key, a
// value of another shape, a name the sample does not make valid) depend
// on the real items and are left to the poll, which reports such an item
// and writes nothing for it.
func (s Spec) CheckSample(ctx context.Context, rd *tenancy.Renderer) *problem.FieldError {
	_, err := s.Map(ctx, rd, s.SampleItem())
	var be *tenancy.BudgetError
	if err == nil || (!errors.As(err, &be) && !errors.Is(err, tenancy.ErrBadText)) {
		return nil
	}
	path := "/spec"
	var re *tenancy.RenderError
	if errors.As(err, &re) {
		path += re.Path
	}
	return &problem.FieldError{Path: path, Message: fmt.Sprintf("rendered with a sample item: %v", unwrap(err))}
}
