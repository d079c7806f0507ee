package tenancy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"text/template"
	tparse "text/template/parse"
	"time"
	"unicode/utf8"
)

// Budget bounds one render: every text of one resource (a TenantTemplate
// resource with a row's values) or of one HttpSource item together. It is
// what makes a template bomb ({{ repeat 100000000 "x" }}, a nested range
// over until 16000, a template calling itself twice) end quickly with a
// named error instead of taking the memory and CPU of admission,
// registry-sync or the tenant reconciler.
type Budget struct {
	// Output is the most bytes a render writes, all its texts together,
	// and the largest value (a string's bytes, a list's or map's contents)
	// a template function may take or make.
	Output int
	// Steps is the most range iterations and template calls ({{ template
	// }}, {{ block }}) of a render.
	Steps int
	// Time bounds a render's wall time (checked at every step), within the
	// caller's context.
	Time time.Duration
}

// DefaultBudget is every render's budget: 1 MiB of output, 100,000 steps,
// 1 s.
func DefaultBudget() Budget {
	return Budget{Output: 1 << 20, Steps: 100000, Time: time.Second}
}

// The budgets, as BudgetError names them.
const (
	BudgetOutput = "output"
	BudgetValue  = "value size"
	BudgetSteps  = "steps"
	BudgetTime   = "time"
)

// BudgetError is a render stopped by its budget. Admission answers it with
// 400 naming the budget; the tenant reconciler and registry-sync fail that
// Tenant or item only.
type BudgetError struct {
	// Budget is BudgetOutput, BudgetValue, BudgetSteps or BudgetTime.
	Budget string
	// Limit is the budget's size, as text ("1048576 bytes").
	Limit string
	// Cause is the context's error when the caller's context ended.
	Cause error
}

func (e *BudgetError) Error() string {
	msg := fmt.Sprintf("render budget exceeded: %s (limit %s)", e.Budget, e.Limit)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *BudgetError) Unwrap() error { return e.Cause }

// stepFunc is the function the renderer calls at the start of every range
// iteration and template body (injected into the parse tree).
const stepFunc = "no8sRenderStep"

// meter counts one render against its budget.
type meter struct {
	ctx      context.Context
	b        Budget
	deadline time.Time
	steps    int
	out      int
}

func newMeter(ctx context.Context, b Budget) *meter {
	return &meter{ctx: ctx, b: b, deadline: time.Now().Add(b.Time)}
}

// step counts one step; it is the template function stepFunc (it writes
// nothing).
func (m *meter) step() (string, error) {
	m.steps++
	if m.steps > m.b.Steps {
		return "", &BudgetError{Budget: BudgetSteps, Limit: fmt.Sprintf("%d range iterations and template calls", m.b.Steps)}
	}
	return "", m.clock()
}

// clock is a BudgetError once the render's time is up or its context
// ended.
func (m *meter) clock() error {
	if err := m.ctx.Err(); err != nil {
		return &BudgetError{Budget: BudgetTime, Limit: m.b.Time.String(), Cause: err}
	}
	if time.Now().After(m.deadline) {
		return &BudgetError{Budget: BudgetTime, Limit: m.b.Time.String()}
	}
	return nil
}

// writer collects one text's output within the render's output budget.
type writer struct {
	m *meter
	b strings.Builder
}

func (w *writer) Write(p []byte) (int, error) {
	if w.m.out+len(p) > w.m.b.Output {
		return 0, &BudgetError{Budget: BudgetOutput, Limit: fmt.Sprintf("%d bytes", w.m.b.Output)}
	}
	w.m.out += len(p)
	return w.b.Write(p)
}

// meterTree puts a step at the start of every template body and range
// body of t (parsed with stepFunc in its function map).
func meterTree(t *template.Template) {
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Root == nil {
			continue
		}
		tree := tt.Tree
		var walk func(n tparse.Node)
		walk = func(n tparse.Node) {
			switch n := n.(type) {
			case *tparse.ListNode:
				if n == nil {
					return
				}
				for _, c := range n.Nodes {
					walk(c)
				}
			case *tparse.RangeNode:
				walk(n.List)
				walk(n.ElseList)
				n.List = withStep(tree, n.List, n.Position())
			case *tparse.IfNode:
				walk(n.List)
				walk(n.ElseList)
			case *tparse.WithNode:
				walk(n.List)
				walk(n.ElseList)
			}
		}
		walk(tree.Root)
		tree.Root = withStep(tree, tree.Root, tree.Root.Position())
	}
}

// withStep is list with a call of stepFunc first.
func withStep(tree *tparse.Tree, list *tparse.ListNode, pos tparse.Pos) *tparse.ListNode {
	id := tparse.NewIdentifier(stepFunc).SetTree(tree).SetPos(pos)
	action := &tparse.ActionNode{NodeType: tparse.NodeAction, Pos: pos, Line: 0, Pipe: &tparse.PipeNode{
		NodeType: tparse.NodePipe, Pos: pos, Cmds: []*tparse.CommandNode{{NodeType: tparse.NodeCommand, Pos: pos, Args: []tparse.Node{id}}},
	}}
	out := &tparse.ListNode{NodeType: tparse.NodeList, Pos: pos}
	out.Nodes = append(out.Nodes, action)
	if list != nil {
		out.Nodes = append(out.Nodes, list.Nodes...)
	}
	return out
}

// bound wraps every function of m so that no argument or result is larger
// than limit (sizeOf), and the functions that make large values from small
// arguments (repeat, indent, until, printf widths, replace …) are refused
// before they allocate. A refusal is a *BudgetError panic, which
// text/template turns into the render's error.
func bound(m template.FuncMap, limit int) template.FuncMap {
	out := make(template.FuncMap, len(m))
	for name, fn := range m {
		out[name] = boundFunc(name, fn, limit)
	}
	return out
}

func boundFunc(name string, fn any, limit int) any {
	v := reflect.ValueOf(fn)
	t := v.Type()
	pre := preCheck(name)
	over := func() {
		panic(&BudgetError{Budget: BudgetValue, Limit: fmt.Sprintf("%d bytes, in %s", limit, name)})
	}
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		for _, a := range args {
			if sizeOf(a, limit) > limit {
				over()
			}
		}
		if pre != nil && pre(args) > limit {
			over()
		}
		var res []reflect.Value
		if t.IsVariadic() {
			res = v.CallSlice(args)
		} else {
			res = v.Call(args)
		}
		for _, r := range res {
			if sizeOf(r, limit) > limit {
				over()
			}
		}
		return res
	}).Interface()
}

// sizeOf approximates the bytes of a value: a string's length, 16 per
// element of a list or map plus their contents, recursively; it stops
// counting past limit.
func sizeOf(v reflect.Value, limit int) int {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return v.Len()
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Len()
		}
		n := 16 * v.Len()
		for i := 0; i < v.Len() && n <= limit; i++ {
			n += sizeOf(v.Index(i), limit-n)
		}
		return n
	case reflect.Map:
		n := 16 * v.Len()
		it := v.MapRange()
		for n <= limit && it.Next() {
			n += sizeOf(it.Key(), limit-n) + sizeOf(it.Value(), limit-n)
		}
		return n
	}
	return 0
}

// preCheck estimates, from its arguments, the size of what the function
// name would allocate, for the functions whose result can be much larger
// than their arguments (nil for the others).
func preCheck(name string) func(a []reflect.Value) int {
	switch name {
	case "repeat":
		return func(a []reflect.Value) int { return intArg(a, 0) * strLen(a, 1) }
	case "indent", "nindent":
		return func(a []reflect.Value) int { return strLen(a, 1) + intArg(a, 0)*(strings.Count(strArg(a, 1), "\n")+2) }
	case "until":
		return func(a []reflect.Value) int { return 16 * abs(intArg(a, 0)) }
	case "untilStep":
		return func(a []reflect.Value) int { return 16 * stepCount(intArg(a, 0), intArg(a, 1), intArg(a, 2)) }
	case "seq":
		return func(a []reflect.Value) int { return 16 * seqCount(a) }
	case "replace":
		return func(a []reflect.Value) int { return replaced(strLen(a, 2), strLen(a, 0), strLen(a, 1)) }
	case "regexReplaceAll", "regexReplaceAllLiteral":
		return func(a []reflect.Value) int { return replaced(strLen(a, 1), 1, strLen(a, 2)) }
	case "printf":
		return func(a []reflect.Value) int { return formatWidths(strArg(a, 0)) }
	}
	return nil
}

// replaced bounds the length of replacing old (length o; 0: between every
// byte) by a new text of length n in a text of length s.
func replaced(s, o, n int) int {
	if o == 0 {
		o = 1
		s++
	}
	return s + (s/o)*n
}

func stepCount(start, stop, step int) int {
	if step == 0 {
		return 0
	}
	n := (stop - start) / step
	if n < 0 {
		return 0
	}
	return n
}

// seqCount is the length of sprig's seq with these arguments (1 to 3
// integers, as strings or numbers).
func seqCount(a []reflect.Value) int {
	if len(a) == 0 {
		return 0
	}
	args := a[0]
	var n []int
	for i := 0; i < args.Len(); i++ {
		n = append(n, toInt(args.Index(i)))
	}
	switch len(n) {
	case 1:
		return abs(n[0])
	case 2:
		return abs(n[1]-n[0]) + 1
	case 3:
		if n[1] == 0 {
			return 0
		}
		return abs((n[2]-n[0])/n[1]) + 1
	}
	return 0
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// formatWidths bounds the output of a printf format: the sum of its
// explicit widths and precisions (a '*' one counts as fmt's largest,
// 1e6).
func formatWidths(f string) int {
	total := len(f)
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		for i++; i < len(f); i++ {
			c := f[i]
			switch {
			case c == '*':
				total += 1000000
			case c >= '0' && c <= '9':
				n := 0
				for i < len(f) && f[i] >= '0' && f[i] <= '9' {
					if n < 1e7 {
						n = n*10 + int(f[i]-'0')
					}
					i++
				}
				i--
				total += n
			case c == '.' || c == '+' || c == '-' || c == '#' || c == ' ' || c == '[' || c == ']':
			default:
				goto next
			}
		}
	next:
	}
	return total
}

func arg(a []reflect.Value, i int) (reflect.Value, bool) {
	if i >= len(a) {
		return reflect.Value{}, false
	}
	v := a[i]
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	return v, true
}

func intArg(a []reflect.Value, i int) int {
	v, ok := arg(a, i)
	if !ok {
		return 0
	}
	return toInt(v)
}

// toInt reads an integer argument as sprig would (numbers and numeric
// strings), saturating.
func toInt(v reflect.Value) int {
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return clampInt(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if v.Uint() > 1<<40 {
			return 1 << 40
		}
		return int(v.Uint())
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if f > 1<<40 || f < -(1<<40) || f != f {
			return 1 << 40
		}
		return int(f)
	case reflect.String:
		var n int64
		if _, err := fmt.Sscan(v.String(), &n); err == nil {
			return clampInt(n)
		}
	}
	return 0
}

func clampInt(n int64) int {
	switch {
	case n > 1<<40:
		return 1 << 40
	case n < -(1 << 40):
		return -(1 << 40)
	}
	return int(n)
}

func strArg(a []reflect.Value, i int) string {
	v, ok := arg(a, i)
	if !ok || v.Kind() != reflect.String {
		if ok && v.IsValid() {
			return fmt.Sprint(v.Interface())
		}
		return ""
	}
	return v.String()
}

func strLen(a []reflect.Value, i int) int { return len(strArg(a, i)) }

// ErrBadText is matched by a rendered value that is not text: invalid
// UTF-8 or a NUL byte.
var ErrBadText = errors.New("the rendered text is not valid")

// checkText refuses rendered text with invalid UTF-8 or a NUL byte (JSON
// would change the first silently and the store refuses the second).
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrBadText, Trunc63(s))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %q holds a NUL byte", ErrBadText, Trunc63(s))
	}
	return nil
}
