package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/action"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// scripted is an action plugin that answers what the test says and
// remembers the tasks it was given.
type scripted struct {
	status action.Status
	err    error
	tasks  []action.Task
	ops    []string
}

func (p *scripted) Name() string { return "ci_runs" }
func (p *scripted) Apply(_ context.Context, t action.Task) (action.Status, error) {
	p.tasks, p.ops = append(p.tasks, t), append(p.ops, "apply")
	return p.status, p.err
}
func (p *scripted) Destroy(_ context.Context, t action.Task) (action.Status, error) {
	p.tasks, p.ops = append(p.tasks, t), append(p.ops, "destroy")
	return p.status, p.err
}

func actionEngine(t *testing.T, p action.Plugin) *sdk.Engine[spec] {
	t.Helper()
	reg, err := action.NewRegistry(p)
	if err != nil {
		t.Fatal(err)
	}
	return sdk.New(name, sdk.Func[spec](func(ctx context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
		return req.RunAction(ctx, "ci_runs", map[string]any{"size": req.Spec.Size})
	})).WithActions(reg).WithConditions(action.ConditionSucceeded)
}

func TestRunAction(t *testing.T) {
	ctx := context.Background()
	t.Run("running: finalizer first, outputs saved, requeue", func(t *testing.T) {
		var calls []string
		rec := &recorder{calls: &calls}
		p := &scripted{status: action.Status{RequeueAfter: 5 * time.Second, Reason: "InProgress", Message: "run 1",
			Outputs: map[string]any{"run": map[string]any{"id": 1}, "stale": nil}}}
		res := resource()
		res.Outputs = json.RawMessage(`{"stale": true, "kept": 1}`)
		e := actionEngine(t, p)
		if got := e.OwnedFinalizers(); fmt.Sprint(got) != "[ci_runs]" {
			t.Fatalf("owned finalizers %v", got)
		}
		rep := e.Reconcile(ctx, &wire.Attempt{Resource: res, Client: rec, LeaseEpoch: 9})
		if rep.Outcome != lifecycle.OutcomeRequeue || rep.RequeueAfter != 5*time.Second {
			t.Fatalf("outcome %v after %v (%v)", rep.Outcome, rep.RequeueAfter, rep.Err)
		}
		if fmt.Sprint(calls) != "[finalizers +[ci_runs] -[] complete requeue]" {
			t.Fatalf("calls %v", calls)
		}
		tk := p.tasks[0]
		if tk.Epoch != 9 || tk.Resource.Generation != 3 || tk.Resource.Type != "Widget/v1" || string(tk.Params) != `{"size":2}` || tk.Outputs["kept"] != float64(1) {
			t.Fatalf("task %+v", tk)
		}
		var out map[string]any
		_ = json.Unmarshal(rec.completed[0].Outputs, &out)
		if _, ok := out["stale"]; ok || out["kept"] != float64(1) || out["run"] == nil {
			t.Fatalf("outputs %v", out)
		}
		c, _ := conditions.Find(rec.completed[0].Conditions, action.ConditionSucceeded)
		if c.Status != conditions.False || c.Reason != "InProgress" || c.Message != "run 1" {
			t.Fatalf("condition %+v", c)
		}
	})
	t.Run("done: ready, finalizer already there", func(t *testing.T) {
		var calls []string
		rec := &recorder{calls: &calls}
		res := resource()
		res.Finalizers = append(res.Finalizers, "ci_runs")
		rep := actionEngine(t, &scripted{status: action.Status{Done: true}}).Reconcile(ctx, &wire.Attempt{Resource: res, Client: rec})
		if rep.Outcome != lifecycle.OutcomeSuccess || fmt.Sprint(calls) != "[complete success]" || rec.completed[0].Phase != "Ready" {
			t.Fatalf("%v %v %v", rep.Outcome, calls, rep.Err)
		}
	})
	t.Run("failed and terminal", func(t *testing.T) {
		for _, terminal := range []bool{false, true} {
			var calls []string
			rec := &recorder{calls: &calls}
			err := errors.New("run concluded failure")
			if terminal {
				err = action.Terminal(err)
			}
			res := resource()
			res.Finalizers = append(res.Finalizers, "ci_runs")
			p := &scripted{status: action.Status{Reason: "RunFailed", Outputs: map[string]any{"run": "x"}}, err: err}
			rep := actionEngine(t, p).Reconcile(ctx, &wire.Attempt{Resource: res, Client: rec})
			want := lifecycle.OutcomeError
			if terminal {
				want = lifecycle.OutcomeTerminal
			}
			if rep.Outcome != want || !strings.Contains(rep.Err.Error(), "run concluded failure") || rec.completed[0].Outputs == nil {
				t.Fatalf("terminal %v: %v %v outputs %s", terminal, rep.Outcome, rep.Err, rec.completed[0].Outputs)
			}
			c, _ := conditions.Find(rec.completed[0].Conditions, action.ConditionSucceeded)
			if c.Reason != "RunFailed" {
				t.Fatalf("condition %+v", c)
			}
		}
	})
	t.Run("destroy: the finalizer goes once it succeeded", func(t *testing.T) {
		for _, done := range []bool{false, true} {
			var calls []string
			rec := &recorder{calls: &calls}
			res := deleting(resource())
			res.Finalizers = append(res.Finalizers, "ci_runs")
			p := &scripted{status: action.Status{Done: done, RequeueAfter: time.Second}}
			actionEngine(t, p).Reconcile(ctx, &wire.Attempt{Resource: res, Client: rec})
			got := rec.completed[0].RemoveFinalizers
			if p.ops[0] != "destroy" || done != slices.Contains(got, "ci_runs") || done != slices.Contains(got, fin) {
				t.Fatalf("done %v: ops %v, removed %v", done, p.ops, got)
			}
		}
	})
	t.Run("deleted without the plugin's finalizer: no destroy", func(t *testing.T) {
		var calls []string
		rec := &recorder{calls: &calls}
		p := &scripted{}
		rep := actionEngine(t, p).Reconcile(ctx, &wire.Attempt{Resource: deleting(resource()), Client: rec})
		if len(p.ops) != 0 || rep.Outcome != lifecycle.OutcomeSuccess {
			t.Fatalf("ops %v, outcome %v", p.ops, rep.Outcome)
		}
	})
	t.Run("unknown plugin is terminal", func(t *testing.T) {
		var calls []string
		rec := &recorder{calls: &calls}
		e := sdk.New(name, sdk.Func[spec](func(ctx context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
			return req.RunAction(ctx, "gitlab_pipelines", nil)
		}))
		rep := e.Reconcile(ctx, &wire.Attempt{Resource: resource(), Client: rec})
		if rep.Outcome != lifecycle.OutcomeTerminal || !errors.Is(rep.Err, action.ErrUnknown) {
			t.Fatalf("%v %v", rep.Outcome, rep.Err)
		}
	})
}

func TestActionRegistry(t *testing.T) {
	if _, err := action.NewRegistry(&scripted{}, &scripted{}); !errors.Is(err, action.ErrInvalid) {
		t.Fatalf("two plugins of one name: %v", err)
	}
	reg, err := action.NewRegistry(&scripted{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Get("nope"); !errors.Is(err, action.ErrUnknown) || !strings.Contains(err.Error(), "ci_runs") {
		t.Fatalf("unknown: %v", err)
	}
	if p, err := reg.Get("ci_runs"); err != nil || p.Name() != "ci_runs" {
		t.Fatalf("get: %v %v", p, err)
	}
}
