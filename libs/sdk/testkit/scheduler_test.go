package testkit_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/testkit"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// With the scheduler in the loop: nothing is dispatched by hand.

func startScheduled(t *testing.T, policy testkit.Policy) (*testkit.Env, *probe) {
	t.Helper()
	env := testkit.Start(t)
	env.CreateType(t, widget.Name, widget.Version, widgetSchema, testkit.WithPolicy(policy))
	p := newProbe()
	env.RunReconciler(t, p.engine("widgets"), widget)
	return env, p
}

func TestScheduledLifecycle(t *testing.T) {
	env, p := startScheduled(t, testkit.Policy{})
	w := env.CreateResource(t, widget, "w1", map[string]any{"size": 1})
	if !w.HasFinalizer(names.ReconcilerFinalizer("widgets")) {
		t.Fatalf("a new resource must carry its reconciler's finalizer from creation: %v", w.Finalizers)
	}
	env.WaitFor(t, w, testkit.All(testkit.Ready(), testkit.ObservedGeneration(1)), wait)
	w = env.UpdateSpec(t, w, map[string]any{"size": 2})
	w = env.WaitFor(t, w, testkit.All(testkit.Ready(), testkit.ObservedGeneration(2)), wait)
	if w.Generation != 2 || string(w.Outputs) != `{"size":2}` {
		t.Fatalf("generation %d outputs %s", w.Generation, w.Outputs)
	}
	env.Delete(t, w)
	env.WaitFor(t, w, testkit.Gone(), wait)
	if calls := p.callsFor("w1"); !slices.Equal(calls[len(calls)-3:], []string{"cleanup-b", "cleanup-a", "post-b"}) {
		t.Fatalf("calls %v", calls)
	}
}

func TestScheduledDeleteBeforeFirstReconcileRunsCleanup(t *testing.T) {
	env, p := startScheduled(t, testkit.Policy{})
	w := env.CreateResource(t, widget, "early", map[string]any{})
	env.Delete(t, w)
	env.WaitFor(t, w, testkit.Gone(), wait)
	if calls := p.callsFor("early"); !slices.Contains(calls, "cleanup-a") {
		t.Fatalf("cleanup did not run: %v", calls)
	}
}

func TestNoLiveReconcilerRefusesCreation(t *testing.T) {
	env := testkit.Start(t)
	env.CreateType(t, "Orphan", "v1", `{"type":"object"}`)
	_, err := env.TryCreateResource(sdk.Type("Orphan", "v1"), "o1", map[string]any{})
	var ae *testkit.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "no_reconciler" {
		t.Fatalf("err %v", err)
	}
}

func TestBackoffGrowsBetweenFailures(t *testing.T) {
	env, _ := startScheduled(t, testkit.Policy{BackoffBaseSeconds: 1, BackoffMaxSeconds: 60})
	w := env.CreateResource(t, widget, "flaky", map[string]any{"mode": "fail"})
	deadline := time.Now().Add(30 * time.Second)
	var h []*reconcilev1.HistoryEntry
	for len(h) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d attempts in 30s", len(h))
		}
		time.Sleep(200 * time.Millisecond)
		h = env.History(t, w)
	}
	slices.Reverse(h) // oldest first
	var gaps []time.Duration
	for i := 1; i < len(h); i++ {
		gaps = append(gaps, h[i].GetStartedAt().AsTime().Sub(h[i-1].GetReconcileTime().AsTime()))
	}
	// base 1 s doubling, ±10 % jitter: about 1 s, 2 s, 4 s.
	for i, g := range gaps[:3] {
		want := time.Second << i
		if g < want*8/10 || g > want*13/10+300*time.Millisecond {
			t.Fatalf("gap %d is %s, want about %s (gaps %v)", i, g, want, gaps)
		}
	}
	for _, e := range h {
		if e.GetSuccess() {
			t.Fatalf("a failing attempt succeeded: %v", e)
		}
	}
}

func TestTerminalErrorIsNotRetried(t *testing.T) {
	env, p := startScheduled(t, testkit.Policy{BackoffBaseSeconds: 1})
	w := env.CreateResource(t, widget, "doomed", map[string]any{"mode": "terminal"})
	env.WaitFor(t, w, testkit.Status(client.StatusFailed), wait)
	time.Sleep(3 * time.Second)
	if n := len(env.History(t, w)); n != 1 {
		t.Fatalf("%d attempts after a terminal error", n)
	}
	// A spec change brings it back.
	w = env.UpdateSpec(t, w, map[string]any{"mode": "ok"})
	env.WaitFor(t, w, testkit.All(testkit.Ready(), testkit.ObservedGeneration(2)), wait)
	_ = p
}

func TestScheduledOperationAnnotations(t *testing.T) {
	env, p := startScheduled(t, testkit.Policy{})
	ignored := env.CreateResource(t, widget, "ignored", map[string]any{}, testkit.WithAnnotations(map[string]string{names.OperationAnnotation: names.OperationIgnore}))
	w := env.CreateResource(t, widget, "w", map[string]any{})
	w = env.WaitFor(t, w, testkit.Ready(), wait)
	time.Sleep(time.Second)
	if n := len(env.History(t, ignored)); n != 0 || len(p.callsFor("ignored")) != 0 {
		t.Fatalf("ignored resource attempted %d times", n)
	}
	before := len(env.History(t, w))
	env.Annotate(t, w, map[string]string{names.OperationAnnotation: names.OperationReconcile})
	w = env.WaitFor(t, w, testkit.Match("annotation removed", func(r *sdk.Resource) bool {
		_, ok := r.Annotations[names.OperationAnnotation]
		return !ok
	}), wait)
	time.Sleep(500 * time.Millisecond)
	if n := len(env.History(t, w)); n != before+1 {
		t.Fatalf("%d attempts for one reconcile annotation", n-before)
	}
	p.mu.Lock()
	forced := p.forced["w"]
	p.mu.Unlock()
	if forced != 1 {
		t.Fatalf("forced %d", forced)
	}
	// The manual trigger: one more attempt.
	env.Trigger(t, w)
	deadline := time.Now().Add(wait)
	for len(env.History(t, w)) != before+2 {
		if time.Now().After(deadline) {
			t.Fatal("the manual trigger was not followed by an attempt")
		}
		time.Sleep(50 * time.Millisecond)
	}
	h := env.History(t, w)
	if h[0].GetReason() != reconcilev1.Reason_REASON_MANUAL {
		t.Fatalf("reason %s", h[0].GetReason())
	}
}

func TestReconcilerGoneIsShownInACondition(t *testing.T) {
	env := testkit.Start(t)
	env.CreateType(t, widget.Name, widget.Version, widgetSchema)
	p := newProbe()
	run := env.RunReconciler(t, p.engine("widgets"), widget)
	w := env.CreateResource(t, widget, "w", map[string]any{})
	env.WaitFor(t, w, testkit.Ready(), wait)
	_ = run.Stop()
	w = env.WaitFor(t, w, testkit.Condition("ReconcilerAvailable", conditions.False), 30*time.Second)
	if w.Phase == conditions.PhaseReady {
		t.Fatalf("phase %s with the reconciler gone", w.Phase)
	}
	// It comes back: the condition turns True again and the resource is ready.
	env.RunReconciler(t, p.engine("widgets"), widget)
	env.Trigger(t, w)
	w = env.WaitFor(t, w, testkit.All(testkit.Ready(), testkit.Condition("ReconcilerAvailable", conditions.True)), 30*time.Second)
	if !strings.HasPrefix(w.StatusMessage, "reconciled") {
		t.Fatalf("message %q", w.StatusMessage)
	}
}
