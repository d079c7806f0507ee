package tenancy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/template"

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

// parse parses one template text with the function map funcs (FuncMap's).
// Missing keys are errors (a typo in a variable name must not render as
// "<no value>").
func parse(path, text string, funcs template.FuncMap) (*template.Template, error) {
	t, err := template.New(path).Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, &RenderError{Path: path, Err: err}
	}
	return t, nil
}

// Renderer renders templates. Its function map is built once (FuncMap) and
// only read afterwards, so one Renderer serves concurrent renders (the
// tenant reconciler keeps one); building sprig's map for every template
// text was most of a render's cost. The package functions Execute,
// Render and RenderObject make a Renderer per call.
type Renderer struct {
	funcs template.FuncMap
}

// NewRenderer returns a Renderer.
func NewRenderer() *Renderer { return &Renderer{funcs: FuncMap()} }

// Execute is Renderer.Execute with a Renderer of its own.
func Execute(path, text string, data any) (string, error) {
	return NewRenderer().Execute(path, text, data)
}

// Render is Renderer.Render with a Renderer of its own.
func Render(r TResource, v Values) (*Rendered, error) { return NewRenderer().Render(r, v) }

// RenderObject is Renderer.RenderObject with a Renderer of its own.
func RenderObject(path string, raw json.RawMessage, data any) ([]byte, error) {
	return NewRenderer().RenderObject(path, raw, data)
}

// Execute renders one template text with data (a row's Values, or any
// decoded JSON value: an HttpSource's item), with the function map and
// missing keys as errors; errors are *RenderError naming path.
func (rd *Renderer) Execute(path, text string, data any) (string, error) {
	t, err := parse(path, text, rd.funcs)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", &RenderError{Path: path, Err: err}
	}
	return b.String(), nil
}

// Render renders r with the values v.
func (rd *Renderer) Render(r TResource, v Values) (*Rendered, error) {
	out := &Rendered{Labels: map[string]string{}, Annotations: map[string]string{}}
	var err error
	if out.Name, err = rd.Execute("/nameTemplate", r.NameTemplate, v); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(r.LabelsTemplate)) {
		if out.Labels[k], err = rd.Execute("/labelsTemplate/"+resource.EscapePointer(k), r.LabelsTemplate[k], v); err != nil {
			return nil, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.AnnotationsTemplate)) {
		if out.Annotations[k], err = rd.Execute("/annotationsTemplate/"+resource.EscapePointer(k), r.AnnotationsTemplate[k], v); err != nil {
			return nil, err
		}
	}
	if out.Spec, err = rd.RenderObject("/spec", r.Spec, map[string]string(v)); err != nil {
		return nil, err
	}
	return out, nil
}

// RenderObject renders every string (keys too) of the JSON object raw (empty:
// {}) as a template with data, and returns the result as compact JSON;
// errors are *RenderError whose Path starts with path.
func (rd *Renderer) RenderObject(path string, raw json.RawMessage, data any) ([]byte, error) {
	spec, err := decodeSpec(raw)
	if err != nil {
		return nil, &RenderError{Path: path, Err: err}
	}
	rendered, err := rd.renderValue(path, spec, data)
	if err != nil {
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

// renderValue renders every string (keys too) in a decoded JSON value.
func (rd *Renderer) renderValue(path string, x any, data any) (any, error) {
	switch x := x.(type) {
	case string:
		if !strings.Contains(x, "{{") {
			return x, nil
		}
		return rd.Execute(path, x, data)
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p := path + "/" + resource.EscapePointer(k)
			key := k
			if strings.Contains(k, "{{") {
				var err error
				if key, err = rd.Execute(p, k, data); err != nil {
					return nil, err
				}
			}
			r, err := rd.renderValue(p, x[k], data)
			if err != nil {
				return nil, err
			}
			out[key] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := rd.renderValue(path+"/"+strconv.Itoa(i), e, data)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return x, nil
}

// ParseText parses one template text without running it (a *RenderError
// naming path when it does not parse).
func ParseText(path, text string) error {
	if !strings.Contains(text, "{{") {
		return nil
	}
	_, err := parse(path, text, FuncMap())
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
