package testkit_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/client/interceptor"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
	"github.com/no8s/no8s/libs/sdk/testkit"
	"github.com/no8s/no8s/libs/sdk/worker"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// A stuck attempt (its step ignores the context) loses its lease after the
// per-reconcile timeout; the item comes back, a new attempt succeeds with a
// newer epoch, and the stuck attempt's late write is refused (Term).
func TestStalledAttemptLateWriteIsRefused(t *testing.T) {
	env, p := start(t, testkit.WithLease(3*time.Second))
	run := env.RunWorker(t, p.engine("widgets"), []sdk.TypeRef{widget}, worker.WithMaxTimeout(time.Second))
	w := env.CreateResource(t, widget, "stuck", map[string]any{"mode": "stall-once"})
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	<-p.started
	w = env.WaitFor(t, w, testkit.Ready(), 20*time.Second)
	h := env.History(t, w)
	if len(h) != 1 || h[0].GetLeaseEpoch() < 2 || !h[0].GetSuccess() {
		t.Fatalf("history %v", h)
	}
	close(p.release) // the stuck attempt finishes and tries to save
	deadline := time.Now().Add(wait)
	for run.Worker.Stats().Termed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stale attempt's item was not terminated")
		}
		time.Sleep(20 * time.Millisecond)
	}
	after, _ := env.Get(t, w)
	if len(env.History(t, w)) != 1 || after.Status != client.StatusReady || after.ResourceVersion != w.ResourceVersion {
		t.Fatalf("the stale attempt wrote: status %s, history %v", after.Status, env.History(t, w))
	}
	settled(t, env, "widgets")
}

// A lease held by someone else makes the worker nak with a delay; the item
// is attempted again once the lease expires.
func TestLeaseHeldIsRetriedLater(t *testing.T) {
	env, p := start(t)
	env.RunReconciler(t, p.engine("widgets"), widget)
	w := env.CreateResource(t, widget, "contended", map[string]any{})
	ctx := context.Background()
	// Another replica of the reconciler holds the lease: the store lets a
	// reconciler's connection act only as that reconciler.
	other := reconcilev1.NewWorkerServiceClient(env.DialWorkers(t, "widgets", widget))
	if _, err := other.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: w.ID, Holder: "widgets/someone-else", LeaseSeconds: 2}); err != nil {
		t.Fatal(err)
	}
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	w = env.WaitFor(t, w, testkit.Ready(), wait)
	h := env.History(t, w)
	if len(h) != 1 || !strings.HasPrefix(h[0].GetHolder(), "widgets/") || h[0].GetLeaseEpoch() != 2 {
		t.Fatalf("history %v", h)
	}
}

// Shutdown: an attempt that honours its context is interrupted after the
// grace period and saves a requeue (not a failure).
func TestShutdownInterruptsAndSavesRequeue(t *testing.T) {
	env, p := start(t)
	run := env.RunWorker(t, p.engine("widgets"), []sdk.TypeRef{widget}, worker.WithShutdownGrace(300*time.Millisecond, 2*time.Second))
	w := env.CreateResource(t, widget, "slow", map[string]any{"mode": "wait-ctx"})
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	<-p.started
	began := time.Now()
	if err := run.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("stop took %s", d)
	}
	w = env.WaitFor(t, w, testkit.Match("attempt saved", func(r *sdk.Resource) bool { return !r.LastReconcileTime.IsZero() }), wait)
	h := env.History(t, w)
	if w.Status != client.StatusReconciling || len(h) != 1 || h[0].GetSuccess() || !strings.Contains(h[0].GetErrorMessage(), "interrupted") {
		t.Fatalf("status %s history %v", w.Status, h)
	}
	if s := run.Worker.Stats(); s.Requeued.Load() != 1 || s.Acked.Load() != 1 {
		t.Fatalf("requeued %d acked %d", s.Requeued.Load(), s.Acked.Load())
	}
}

// Shutdown: an attempt that ignores its context is given up; its item is
// naked, and another replica finishes it once the lease expires.
func TestShutdownNaksWhatCannotFinish(t *testing.T) {
	env, p := start(t, testkit.WithLease(3*time.Second))
	first := env.RunWorker(t, p.engine("widgets"), []sdk.TypeRef{widget}, worker.WithReplicaID("first"), worker.WithShutdownGrace(200*time.Millisecond, 200*time.Millisecond))
	w := env.CreateResource(t, widget, "stuck", map[string]any{"mode": "stall-once"})
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	<-p.started
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	if s := first.Worker.Stats(); s.Naked.Load() != 1 {
		t.Fatalf("naked %d", s.Naked.Load())
	}
	env.RunWorker(t, p.engine("widgets"), []sdk.TypeRef{widget}, worker.WithReplicaID("second"))
	w = env.WaitFor(t, w, testkit.Ready(), 20*time.Second)
	h := env.History(t, w)
	if len(h) != 1 || h[0].GetHolder() != "widgets/second" {
		t.Fatalf("history %v", h)
	}
	close(p.release)
}

// Faults are injected by wrapping the real client: a save that fails once
// with the store unavailable is saved again a second later by the same
// attempt, under its own lease (the worker's saveAgain), and the item is
// acknowledged: no redelivery waiting for that lease to expire.
func TestFailedSaveIsRetried(t *testing.T) {
	env, p := start(t)
	var failed atomic.Bool
	wrap := func(c wire.Client) wire.Client {
		return interceptor.New(c, interceptor.Funcs{
			Complete: func(ctx context.Context, next wire.StatusWriter, c *wire.Completion) (*wire.Completed, error) {
				if failed.CompareAndSwap(false, true) {
					return nil, fmt.Errorf("injected: %w", wire.ErrUnavailable)
				}
				return next.Complete(ctx, c)
			},
		})
	}
	run := env.RunWorker(t, p.engine("widgets"), []sdk.TypeRef{widget}, worker.WithClientWrapper(wrap))
	w := env.CreateResource(t, widget, "flaky", map[string]any{})
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	w = env.WaitFor(t, w, testkit.Ready(), wait)
	if h := env.History(t, w); len(h) != 1 || h[0].GetLeaseEpoch() != 1 {
		t.Fatalf("history %v", h)
	}
	if !failed.Load() {
		t.Fatal("the fault was never injected")
	}
	if s := run.Worker.Stats(); s.Naked.Load() != 0 || s.Acked.Load() != 1 {
		t.Fatalf("naked %d acked %d", s.Naked.Load(), s.Acked.Load())
	}
	settled(t, env, "widgets")
}
