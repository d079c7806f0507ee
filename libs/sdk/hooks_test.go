package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/action"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

type hookKey struct{}

// The attempt's StartStep wraps every step's Do and Post, and StartAction
// every action plugin call: the step (and the plugin) run with the
// context the hook returned, and each end is told the error the call
// returned. This is where the worker runtime hangs its spans and metrics.
func TestAttemptHooksWrapStepsAndActions(t *testing.T) {
	var seen []string
	failing := &scripted{err: errors.New("runner down")}
	reg, err := action.NewRegistry(failing)
	if err != nil {
		t.Fatal(err)
	}
	e := sdk.New(name, sdk.Func[spec](func(ctx context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
		seen = append(seen, fmt.Sprintf("step sees %v", ctx.Value(hookKey{})))
		return req.RunAction(ctx, "ci_runs", map[string]any{})
	})).WithActions(reg)
	var calls []string
	rec := &recorder{calls: &calls}
	res := resource()
	res.Finalizers = append(res.Finalizers, "ci_runs")
	hook := func(kind string) func(ctx context.Context, n, stage string) (context.Context, func(error)) {
		return func(ctx context.Context, n, stage string) (context.Context, func(error)) {
			label := kind + " " + n + " " + stage
			seen = append(seen, "start "+label)
			return context.WithValue(ctx, hookKey{}, label), func(err error) { seen = append(seen, fmt.Sprintf("end %s: %v", label, err)) }
		}
	}
	rep := e.Reconcile(t.Context(), &wire.Attempt{Resource: res, Client: rec, StartStep: hook("step"), StartAction: hook("action")})
	if rep.Outcome != lifecycle.OutcomeError {
		t.Fatalf("outcome %v (%v)", rep.Outcome, rep.Err)
	}
	want := []string{
		"start step reconcile do",
		"step sees step reconcile do",
		"start action ci_runs apply",
		"end action ci_runs apply: runner down",
		"end step reconcile do: runner down",
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("hooks\n got %q\nwant %q", seen, want)
	}
}
