package scheduler_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// secretDep names Secret name in the default namespace.
func secretDep(name string, wait bool) *reconcilev1.Dependency {
	return &reconcilev1.Dependency{TypeName: "Secret", TypeVersion: "v1", Namespace: "default", Name: name, Wait: wait}
}

// A Widget whose attempt waits for a missing Secret (WaitFor) is Failed
// with no backoff retry (base 1 s) and is reconciled, reason dependency,
// once the Secret is created; then it watches the Secret and is reconciled
// when the Secret changes or goes, and 50 Widgets depending on other
// Secrets are not. A Secret created while the attempt that first names it
// runs still reaches it, and so does one created while no scheduler leads.
// Resync is an hour away throughout.
func TestWatchesAndWaitFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	policy := resource.ReconcilePolicy{ResyncSeconds: 3600, BackoffBaseSeconds: 1, BackoffMaxSeconds: 2}
	e.typ("Secret", policy)
	e.typ("Widget", policy)
	// Widget "w-<secret>" depends on Secret <secret>: it waits while the
	// Secret is missing and watches it once it exists. slow makes its
	// next attempt create the Secret it looks for before it answers.
	var slow atomic.Pointer[string]
	w := e.worker(func(l *reconcilev1.AcquireLeaseResponse, _ *reconcilev1.WorkItem) outcome {
		r := l.GetResource()
		if r.GetResourceTypeName() != "Widget" {
			return outcome{}
		}
		name := r.GetName()[len("w-"):]
		_, err := e.store.GetResource(t.Context(), storage.ResourceKey{ResourceTypeName: "Secret", ResourceTypeVersion: "v1", Namespace: "default", Name: name})
		var sleep time.Duration
		if s := slow.Load(); s != nil && *s == name {
			// The scheduler hears of the Secret before the answer.
			slow.Store(nil)
			e.create("Secret", name)
			sleep = 500 * time.Millisecond
		}
		switch {
		case errors.Is(err, storage.ErrNotFound):
			return outcome{result: reconcilev1.Outcome_OUTCOME_TERMINAL, message: "waiting for Secret " + name,
				deps: []*reconcilev1.Dependency{secretDep(name, true)}, sleep: sleep}
		case err != nil:
			return outcome{result: reconcilev1.Outcome_OUTCOME_ERROR, message: err.Error()}
		}
		return outcome{deps: []*reconcilev1.Dependency{secretDep(name, false)}}
	})
	sched := e.scheduler(testConfig("sched"), nil)

	ref := e.create("Widget", "w-db")
	waitFor(t, 5*time.Second, "the widget failed, waiting", func() bool { return e.get(ref.ID).Status == resource.StatusFailed })
	quiet(t, 3*time.Second, "a waiting widget was retried", func() bool { return len(w.attempts(ref.ID)) > 1 })

	var others []*resource.Resource
	for i := range 50 {
		others = append(others, e.create("Widget", "w-other-"+string(rune('a'+i/26))+string(rune('a'+i%26))))
	}
	for _, o := range others {
		waitFor(t, 5*time.Second, "the other widgets failed, waiting", func() bool { return e.get(o.ID).Status == resource.StatusFailed })
	}
	counts := func() []int {
		var n []int
		for _, o := range others {
			n = append(n, len(w.attempts(o.ID)))
		}
		return n
	}
	before := counts()

	secret := e.create("Secret", "db")
	waitFor(t, 5*time.Second, "the widget ready once its secret exists", and(w, ref.ID, 1, e.ready(ref.ID, 1)))
	if got := lastReason(w, ref.ID); got != reconcilev1.Reason_REASON_DEPENDENCY {
		t.Fatalf("reason %v, want dependency", got)
	}
	n := len(w.attempts(ref.ID))
	e.setSpec(secret.ID, 2)
	waitFor(t, 5*time.Second, "the widget reconciled for its secret's change", func() bool { return len(w.attempts(ref.ID)) > n })
	if got := lastReason(w, ref.ID); got != reconcilev1.Reason_REASON_DEPENDENCY {
		t.Fatalf("reason %v, want dependency", got)
	}
	n = len(w.attempts(ref.ID))
	if _, err := e.store.DeleteResource(t.Context(), storage.DeleteResourceRequest{ID: secret.ID}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the secret gone", e.gone(secret.ID))
	waitFor(t, 5*time.Second, "the widget reconciled for its secret's going, and waiting again", func() bool {
		return len(w.attempts(ref.ID)) > n && e.get(ref.ID).Status == resource.StatusFailed
	})
	if after := counts(); !equalInts(before, after) {
		t.Fatalf("unrelated widgets were reconciled: attempts %v, then %v", before, after)
	}

	// The Secret comes while the attempt that first names it runs.
	name := "late"
	slow.Store(&name)
	late := e.create("Widget", "w-late")
	waitFor(t, 5*time.Second, "the widget ready though its secret came mid-attempt", and(w, late.ID, 1, e.ready(late.ID, 1)))

	// A Secret created while no scheduler leads: the next leader's first
	// listing tries each waiting Widget once.
	x := e.create("Widget", "w-x")
	waitFor(t, 5*time.Second, "w-x failed, waiting", func() bool { return e.get(x.ID).Status == resource.StatusFailed })
	sched.stop()
	e.create("Secret", "x")
	e.scheduler(testConfig("sched-2"), nil)
	waitFor(t, 10*time.Second, "w-x ready under the next leader", and(w, x.ID, 1, e.ready(x.ID, 1)))
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
