package tenancy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/no8s/no8s/services/internal/problem"
)

// CheckTemplate runs the static checks of a template (kro checks its graphs
// the same way), each error naming its field by JSON pointer under /spec:
// resource ids unique, dependIds naming existing ids of other resources,
// no dependency cycle (the error names it: a -> b -> a), and every template
// text parsing.
func CheckTemplate(t TemplateSpec) []problem.FieldError {
	var errs []problem.FieldError
	index := map[string]int{}
	for i, r := range t.Resources {
		base := fmt.Sprintf("/spec/resources/%d", i)
		if j, dup := index[r.ID]; dup {
			errs = append(errs, problem.FieldError{Path: base + "/id", Message: fmt.Sprintf("id %q is already used by /spec/resources/%d: ids must be unique", r.ID, j)})
			continue
		}
		index[r.ID] = i
	}
	for i, r := range t.Resources {
		base := fmt.Sprintf("/spec/resources/%d", i)
		for k, d := range r.DependIDs {
			switch _, ok := index[d]; {
			case d == r.ID:
				errs = append(errs, problem.FieldError{Path: fmt.Sprintf("%s/dependIds/%d", base, k), Message: fmt.Sprintf("resource %q depends on itself", r.ID)})
			case !ok:
				errs = append(errs, problem.FieldError{Path: fmt.Sprintf("%s/dependIds/%d", base, k), Message: fmt.Sprintf("no resource has id %q", d)})
			}
		}
		errs = append(errs, parseAll(base, r)...)
	}
	if cycle := findCycle(t.Resources, index); cycle != nil {
		errs = append(errs, problem.FieldError{Path: fmt.Sprintf("/spec/resources/%d/dependIds", index[cycle[0]]),
			Message: "dependency cycle: " + strings.Join(cycle, " -> ")})
	}
	return errs
}

// parseAll parses every template text of r.
func parseAll(base string, r TResource) []problem.FieldError {
	var errs []problem.FieldError
	funcs := FuncMap()
	try := func(path, text string) {
		if !strings.Contains(text, "{{") {
			return
		}
		if _, err := parse(path, text, funcs, noStep); err != nil {
			errs = append(errs, problem.FieldError{Path: base + path, Message: "template does not parse: " + err.(*RenderError).Err.Error()})
		}
	}
	try("/nameTemplate", r.NameTemplate)
	for k, v := range r.LabelsTemplate {
		try("/labelsTemplate/"+k, v)
	}
	for k, v := range r.AnnotationsTemplate {
		try("/annotationsTemplate/"+k, v)
	}
	return errs
}

// findCycle returns one dependency cycle as ids, the first repeated at the
// end (a -> b -> a), or nil. Unknown ids are ignored (reported apart).
func findCycle(rs []TResource, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(rs))
	var stack []string
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, rs[i].ID)
		for _, d := range rs[i].DependIDs {
			j, ok := index[d]
			if !ok || j == i {
				continue
			}
			switch color[j] {
			case grey:
				start := slices.Index(stack, d)
				cycle = append(slices.Clone(stack[start:]), d)
				return true
			case white:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return false
	}
	for i := range rs {
		if color[i] == white && visit(i) {
			return cycle
		}
	}
	return nil
}

// SampleValues are the values a template is rendered with at admission: a
// plausible row, every extra mapping of the registry set to "sample".
func SampleValues(registry, tmpl string, extra map[string]string) Values {
	ex := map[string]string{}
	for k := range extra {
		ex[k] = "sample"
	}
	return RowValues(registry, tmpl, "sample-uid", "https://sample.example.com", "1", ex)
}
