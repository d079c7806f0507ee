package tenancy

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// bombs are the probe's template bombs and their kin; each must stop on
// the budget it names (or one of several: a|b; a self-calling template
// recurses 100,000 deep, slowly, and may run out of time first on a busy
// machine).
var bombs = []struct{ name, text, budget string }{
	{"repeat", `{{ repeat 100000000 "x" }}`, BudgetValue},
	{"repeat in a range", `{{ range until 1000 }}{{ repeat 100000 "x" }}{{ end }}`, BudgetOutput},
	{"until", `{{ range until 100000000 }}{{ end }}`, BudgetValue},
	{"nested until", `{{ range until 16000 }}{{ range until 16000 }}{{ end }}{{ end }}`, BudgetSteps},
	{"range over an integer", `{{ range 1000000000 }}{{ end }}`, BudgetSteps},
	{"untilStep", `{{ range untilStep 0 1000000000 1 }}{{ end }}`, BudgetValue},
	{"seq", `{{ range seq 1 1000000000 }}{{ end }}`, BudgetValue},
	{"self-calling template", `{{ define "a" }}{{ template "a" . }}{{ template "a" . }}{{ end }}{{ template "a" . }}`, BudgetSteps + "|" + BudgetTime},
	{"doubling", `{{ $x := "ab" }}{{ range until 64 }}{{ $x = cat $x $x }}{{ end }}{{ $x }}`, BudgetValue},
	{"replace", `{{ $x := repeat 2000 "a" }}{{ replace "" $x $x }}`, BudgetValue},
	{"printf width", `{{ printf "%999999d%999999d%999999d" 1 2 3 }}`, BudgetValue},
	{"indent", `{{ indent 100000000 "x" }}`, BudgetValue},
}

func TestBudgetBombs(t *testing.T) {
	rd := NewRenderer()
	for _, b := range bombs {
		start := time.Now()
		_, err := rd.Render(t.Context(), TResource{NameTemplate: "x", Spec: json.RawMessage(`{"a":` + mustJSON(b.text) + `}`)}, SampleValues("r", "t", nil))
		took := time.Since(start)
		var be *BudgetError
		if !errors.As(err, &be) || !slices.Contains(strings.Split(b.budget, "|"), be.Budget) {
			t.Errorf("%s: %v, want the %s budget", b.name, err, b.budget)
			continue
		}
		if took > 2*time.Second {
			t.Errorf("%s: took %v", b.name, took)
		}
		t.Logf("%s: %v in %v", b.name, err, took.Round(time.Millisecond))
	}
}

func TestBudgetTime(t *testing.T) {
	rd := NewBoundedRenderer(Budget{Output: 1 << 20, Steps: 1 << 30, Time: 200 * time.Millisecond})
	start := time.Now()
	_, err := rd.Execute(t.Context(), "/x", `{{ $x := repeat 100000 "a" }}{{ range until 50000 }}{{ $y := sha1sum $x }}{{ end }}`, nil)
	var be *BudgetError
	if !errors.As(err, &be) || be.Budget != BudgetTime || time.Since(start) > time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}

func TestRenderedText(t *testing.T) {
	rd := NewRenderer()
	for _, c := range []struct {
		r    TResource
		path string
	}{
		{TResource{NameTemplate: "{{ .uid }}\x00"}, "/nameTemplate"},
		{TResource{NameTemplate: "a", Spec: json.RawMessage(`{"a":"{{ printf \"%c\" 0 }}"}`)}, "/spec/a"},
		{TResource{NameTemplate: "a", Spec: json.RawMessage(`{"a":"{{ \"\\xff\" }}"}`)}, "/spec/a"},
		{TResource{NameTemplate: "a", Spec: json.RawMessage(`{"\u0000":"x"}`)}, "/spec/\x00"},
		{TResource{NameTemplate: "Not_A_Name"}, "/nameTemplate"},
		{TResource{NameTemplate: "a", LabelsTemplate: map[string]string{"k": "{{ repeat 100 \"v\" }}"}}, "/labelsTemplate/k"},
	} {
		_, err := rd.Render(t.Context(), c.r, SampleValues("r", "t", nil))
		var re *RenderError
		if !errors.As(err, &re) || re.Path != c.path {
			t.Errorf("%+v: %v, want an error at %s", c.r, err, c.path)
		}
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzRenderBudget: any template text, rendered with a small budget,
// returns within a bounded time, writes no more than the budget and fails,
// if over budget, with a BudgetError naming it.
func FuzzRenderBudget(f *testing.F) {
	for _, b := range bombs {
		f.Add(b.text)
	}
	f.Add(`{{ .uid }}`)
	f.Add(`{{ range $i, $e := until 10 }}{{ $e }}{{ end }}`)
	budget := Budget{Output: 1 << 14, Steps: 2000, Time: 200 * time.Millisecond}
	rd := NewBoundedRenderer(budget)
	f.Fuzz(func(t *testing.T, text string) {
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := rd.Execute(t.Context(), "/x", text, SampleValues("r", "t", map[string]string{"plan": "p"}))
			done <- result{out, err}
		}()
		var res result
		select {
		case res = <-done:
		case <-time.After(budget.Time + 2*time.Second):
			// A render that does not return is the bug this target looks
			// for (until -100000000 allocated 800 MB before the first step).
			t.Fatalf("%q did not return within %v", text, budget.Time+2*time.Second)
		}
		out, err := res.out, res.err
		if len(out) > budget.Output {
			t.Fatalf("%q wrote %d bytes", text, len(out))
		}
		var be *BudgetError
		if errors.As(err, &be) && !strings.Contains(err.Error(), "render budget exceeded: "+be.Budget) {
			t.Fatalf("budget error not named: %v", err)
		}
	})
}

// Render reports every field that fails, in order, and stops at a budget
// exceeded (every later field would fail the same way).
func TestRenderReportsEveryField(t *testing.T) {
	r := TResource{NameTemplate: "{{ .uidd }}", LabelsTemplate: map[string]string{"tier": "{{ .tierr }}", "ok": "{{ .uid }}"},
		Spec: json.RawMessage(`{"image": "{{ .imag }}", "replicas": 1, "env": ["{{ .uid }}", "{{ .nope }}"]}`)}
	_, err := NewRenderer().Render(t.Context(), r, SampleValues("r", "t", nil))
	var paths []string
	for _, re := range RenderErrorList(err) {
		paths = append(paths, re.Path)
	}
	if want := []string{"/nameTemplate", "/labelsTemplate/tier", "/spec/env/1", "/spec/image"}; !slices.Equal(paths, want) {
		t.Fatalf("failed fields %q, want %q (%v)", paths, want, err)
	}
	var re *RenderError
	if !errors.As(err, &re) || re.Path != "/nameTemplate" {
		t.Fatalf("errors.As finds %v, want the first field", re)
	}

	r.Spec = json.RawMessage(`{"a": ` + mustJSON(`{{ repeat 100000000 "x" }}`) + `, "b": "{{ .nope }}"}`)
	r.NameTemplate, r.LabelsTemplate = "x", nil
	_, err = NewRenderer().Render(t.Context(), r, SampleValues("r", "t", nil))
	var be *BudgetError
	if list := RenderErrorList(err); len(list) != 1 || !errors.As(err, &be) {
		t.Fatalf("a budget exceeded goes on: %v", err)
	}
}
