package tenancy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/template"
	tparse "text/template/parse"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
)

// Values are a row's template variables: uid, hostOrUrl, host (extracted
// from hostOrUrl), activate, registryId, templateRef and the registry's extra
// mappings.
type Values map[string]string

// RowValues builds the template variables of a row.
func RowValues(registry, tmpl, uid, hostOrURL, activate string, extra map[string]string) Values {
	v := Values{}
	maps.Copy(v, extra)
	v["uid"], v["hostOrUrl"], v["host"], v["activate"] = uid, hostOrURL, ToHost(hostOrURL), activate
	v["registryId"], v["templateRef"] = registry, tmpl
	return v
}

// Rendered is a template resource rendered with a row's values.
type Rendered struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	// Spec is the rendered spec, a JSON object: every string in the
	// template's spec (keys included) is rendered as a template.
	Spec []byte
}

// RenderError is a template that did not parse or execute; Path is the
// JSON pointer of the field under the resource (/nameTemplate,
// /spec/containers/0/image).
type RenderError struct {
	Path string
	Err  error
}

func (e *RenderError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *RenderError) Unwrap() error { return e.Err }

// parse parses one template text with the function map funcs (FuncMap's,
// bounded) and step as stepFunc, and meters it (a step at the start of
// every template and range body). Missing keys are errors (a typo in a
// variable name must not render as "<no value>").
func parse(path, text string, funcs template.FuncMap, step func() (string, error)) (*template.Template, error) {
	t, err := template.New(path).Funcs(funcs).Funcs(template.FuncMap{stepFunc: step}).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, &RenderError{Path: path, Err: err}
	}
	meterTree(t)
	return t, nil
}

// noStep is stepFunc for templates parsed and not run.
func noStep() (string, error) { return "", nil }

// Renderer renders templates within a Budget. Its function map is built
// once (FuncMap, every function bounded) and only read afterwards, so one
// Renderer serves concurrent renders (the tenant reconciler keeps one);
// building sprig's map for every template text was most of a render's
// cost.
type Renderer struct {
	funcs  template.FuncMap
	budget Budget
}

// NewRenderer returns a Renderer with DefaultBudget.
func NewRenderer() *Renderer { return NewBoundedRenderer(DefaultBudget()) }

// NewBoundedRenderer returns a Renderer with budget b.
func NewBoundedRenderer(b Budget) *Renderer {
	return &Renderer{funcs: bound(FuncMap(), b.Output), budget: b}
}

// Bound bounds a group of renders (a template's resources at admission, a
// Tenant's in the tenant reconciler) to one render's time together.
func (rd *Renderer) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, rd.budget.Time)
}

// Session is one render: every text rendered through it shares one
// budget (the output, the steps, the time).
type Session struct {
	rd *Renderer
	m  *meter
}

// Session starts a render bounded by the Renderer's budget and ctx.
func (rd *Renderer) Session(ctx context.Context) *Session {
	return &Session{rd: rd, m: newMeter(ctx, rd.budget)}
}

// Execute renders one text as a render of its own.
func (rd *Renderer) Execute(ctx context.Context, path, text string, data any) (string, error) {
	return rd.Session(ctx).Execute(path, text, data)
}

// Execute renders one template text with data (a row's Values, or any
// decoded JSON value: an HttpSource's item), with the function map and
// missing keys as errors; errors are *RenderError naming path (a budget
// exceeded wraps a *BudgetError; text that is not valid UTF-8 or holds a
// NUL wraps ErrBadText).
func (s *Session) Execute(path, text string, data any) (string, error) {
	if err := s.m.clock(); err != nil {
		return "", &RenderError{Path: path, Err: err}
	}
	t, err := parse(path, text, s.rd.funcs, s.m.step)
	if err != nil {
		return "", err
	}
	w := &writer{m: s.m}
	if err := t.Execute(w, data); err != nil {
		return "", &RenderError{Path: path, Err: err}
	}
	out := w.b.String()
	if err := checkText(out); err != nil {
		return "", &RenderError{Path: path, Err: err}
	}
	return out, nil
}

// Render renders r with the values v, as one render: its name must be a
// DNS-1123 label and its labels and annotations valid, checked here before
// anything is written. It reports every field that fails, not only the
// first: the error is a *RenderError, or RenderErrors when several fail
// (RenderErrorList lists them); a budget exceeded ends the render there.
func (rd *Renderer) Render(ctx context.Context, r TResource, v Values) (*Rendered, error) {
	s := rd.Session(ctx)
	var c collector
	out := &Rendered{Labels: map[string]string{}, Annotations: map[string]string{}}
	var err error
	if out.Name, err = s.Execute("/nameTemplate", r.NameTemplate, v); err != nil {
		c.add(err)
	} else if fe := names.Name("/nameTemplate", out.Name); fe != nil {
		c.add(&RenderError{Path: "/nameTemplate", Err: fmt.Errorf("the name %q is not a DNS-1123 label", Trunc63(out.Name))})
	}
	for _, k := range slices.Sorted(maps.Keys(r.LabelsTemplate)) {
		if c.stopped {
			break
		}
		if out.Labels[k], err = s.Execute("/labelsTemplate/"+resource.EscapePointer(k), r.LabelsTemplate[k], v); err != nil {
			c.add(err)
			delete(out.Labels, k) // not checked below: its error is reported
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.AnnotationsTemplate)) {
		if c.stopped {
			break
		}
		if out.Annotations[k], err = s.Execute("/annotationsTemplate/"+resource.EscapePointer(k), r.AnnotationsTemplate[k], v); err != nil {
			c.add(err)
			delete(out.Annotations, k)
		}
	}
	if !c.stopped {
		errs := resource.ValidateMetadata(out.Labels, out.Annotations, nil)
		slices.SortFunc(errs, func(a, b problem.FieldError) int { return strings.Compare(a.Path, b.Path) })
		for _, fe := range errs {
			path := strings.Replace(strings.Replace(fe.Path, "/labels", "/labelsTemplate", 1), "/annotations/", "/annotationsTemplate/", 1)
			c.add(&RenderError{Path: path, Err: errors.New(fe.Message)})
		}
	}
	if !c.stopped {
		if out.Spec, err = s.RenderObject("/spec", r.Spec, map[string]string(v)); err != nil {
			c.add(err)
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// RenderErrors are the fields of one render that failed, in the order
// they were rendered.
type RenderErrors []*RenderError

func (e RenderErrors) Error() string {
	msgs := make([]string, len(e))
	for i, re := range e {
		msgs[i] = re.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap lets errors.Is and errors.As see each field's error.
func (e RenderErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, re := range e {
		out[i] = re
	}
	return out
}

// RenderErrorList lists the fields that failed in an error of Render or
// RenderObject (nil when err holds no *RenderError).
func RenderErrorList(err error) []*RenderError {
	var list RenderErrors
	if errors.As(err, &list) {
		return list
	}
	var re *RenderError
	if errors.As(err, &re) {
		return []*RenderError{re}
	}
	return nil
}

// collector gathers the failed fields of one render; a budget exceeded
// stops it (every later field would fail the same way).
type collector struct {
	errs    RenderErrors
	stopped bool
}

func (c *collector) add(err error) {
	list := RenderErrorList(err)
	if list == nil {
		list = []*RenderError{{Err: err}}
	}
	for _, re := range list {
		c.errs = append(c.errs, re)
		var be *BudgetError
		if errors.As(re, &be) {
			c.stopped = true
		}
	}
}

// err is nil, the one *RenderError, or RenderErrors.
func (c *collector) err() error {
	switch len(c.errs) {
	case 0:
		return nil
	case 1:
		return c.errs[0]
	}
	return c.errs
}

// RenderObject renders every string (keys too) of the JSON object raw (empty:
// {}) as a template with data, and returns the result as compact JSON;
// errors are *RenderError whose Path starts with path, or RenderErrors when
// several strings fail.
func (s *Session) RenderObject(path string, raw json.RawMessage, data any) ([]byte, error) {
	spec, err := decodeSpec(raw)
	if err != nil {
		return nil, &RenderError{Path: path, Err: err}
	}
	var c collector
	rendered := s.renderValue(&c, path, spec, data)
	if err := c.err(); err != nil {
		return nil, err
	}
	out, err := resource.Marshal(rendered)
	if err != nil {
		return nil, &RenderError{Path: path, Err: err}
	}
	return out, nil
}

func decodeSpec(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("spec must be a JSON object")
	}
	return v, nil
}

// renderValue renders every string (keys too) in a decoded JSON value;
// every string, rendered or not, must be valid text (checkText). A string
// that fails is added to c and the others are still rendered, until c
// stops.
func (s *Session) renderValue(c *collector, path string, x any, data any) any {
	if c.stopped {
		return nil
	}
	switch x := x.(type) {
	case string:
		if !strings.Contains(x, "{{") {
			if err := checkText(x); err != nil {
				c.add(&RenderError{Path: path, Err: err})
			}
			return x
		}
		out, err := s.Execute(path, x, data)
		if err != nil {
			c.add(err)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p := path + "/" + resource.EscapePointer(k)
			key := k
			var err error
			if strings.Contains(k, "{{") {
				key, err = s.Execute(p, k, data)
			} else if err = checkText(k); err != nil {
				err = &RenderError{Path: p, Err: err}
			}
			if err != nil {
				c.add(err)
			}
			out[key] = s.renderValue(c, p, x[k], data)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.renderValue(c, path+"/"+strconv.Itoa(i), e, data)
		}
		return out
	}
	return x
}

// ParseText parses one template text without running it (a *RenderError
// naming path when it does not parse).
func ParseText(path, text string) error {
	if !strings.Contains(text, "{{") {
		return nil
	}
	_, err := parse(path, text, FuncMap(), noStep)
	return err
}

// ParseObject parses every template text (keys too) of the JSON object raw
// without running them: the check of a template whose data is not known
// before it runs. The error is the first *RenderError, in key order.
func ParseObject(path string, raw json.RawMessage) error {
	spec, err := decodeSpec(raw)
	if err != nil {
		return &RenderError{Path: path, Err: err}
	}
	var walk func(path string, x any) error
	walk = func(path string, x any) error {
		switch x := x.(type) {
		case string:
			return ParseText(path, x)
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				p := path + "/" + resource.EscapePointer(k)
				if err := ParseText(p, k); err != nil {
					return err
				}
				if err := walk(p, x[k]); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := walk(path+"/"+strconv.Itoa(i), e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(path, spec)
}

// Fields lists the field chains a template text reads from its data
// ({{ .meta.team }} → [meta team], {{ $.id }} → [id]), in order, repeats
// included; a text that does not parse has none. It is what a sample of
// the data (an HttpSource's sample item) must hold.
func Fields(text string) [][]string {
	if !strings.Contains(text, "{{") {
		return nil
	}
	t, err := template.New("fields").Funcs(FuncMap()).Funcs(template.FuncMap{stepFunc: noStep}).Parse(text)
	if err != nil {
		return nil
	}
	var out [][]string
	var walk func(n tparse.Node)
	walk = func(n tparse.Node) {
		switch n := n.(type) {
		case *tparse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *tparse.ActionNode:
			walk(n.Pipe)
		case *tparse.PipeNode:
			if n != nil {
				for _, c := range n.Cmds {
					walk(c)
				}
			}
		case *tparse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *tparse.ChainNode:
			walk(n.Node)
		case *tparse.FieldNode:
			out = append(out, n.Ident)
		case *tparse.VariableNode:
			if len(n.Ident) > 1 && n.Ident[0] == "$" {
				out = append(out, n.Ident[1:])
			}
		case *tparse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *tparse.RangeNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *tparse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *tparse.TemplateNode:
			walk(n.Pipe)
		}
	}
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			walk(tt.Root)
		}
	}
	return out
}
