package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/registry"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// register registers reconciler name serving typ and owning owns, and
// heartbeats it until ctx ends; deregistering is the caller's.
func (e *env) register(ctx context.Context, name, typ string, owns ...sdk.TypeRef) *registry.Registration {
	e.t.Helper()
	reg, err := registry.Register(ctx, e.kv, registry.Replica{Name: name, ID: "replica-1", Types: []sdk.TypeRef{{Name: typ, Version: "v1"}}, Owns: owns})
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				_ = reg.Refresh(ctx)
			}
		}
	}()
	return reg
}

// child creates a Child owned by owner, its controller when controller.
func (e *env) child(owner *resource.Resource, name string, controller bool) *resource.Resource {
	e.t.Helper()
	r, err := e.store.CreateResource(e.t.Context(), storage.CreateResourceRequest{Resource: resource.Resource{
		Name: name, ResourceTypeName: "Child", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"n":1}`), Finalizers: []string{finalizer},
		OwnerReferences: []resource.OwnerReference{{UID: owner.UID, ResourceTypeName: owner.ResourceTypeName,
			ResourceTypeVersion: owner.ResourceTypeVersion, Name: owner.Name, Controller: controller}},
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// dependencyAttempts counts the attempts on id of reason dependency.
func dependencyAttempts(w *worker, id int64) int {
	n := 0
	for _, a := range w.attempts(id) {
		if a.reason == reconcilev1.Reason_REASON_DEPENDENCY {
			n++
		}
	}
	return n
}

// A reconciler that owns Child is dispatched (reason dependency) when a
// Child it controls is created, changes spec or finishes a reconcile, or
// goes, or stops naming it as controller, with resync an hour away; a Child
// it owns without being its controller, and a change of a Child of a type
// it does not own, do not.
// With its reconciler gone while 100 children change, the owner is
// reconciled at most twice once the reconciler is back (coalesced).
func TestOwnsReconcilesTheOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hour := resource.ReconcilePolicy{ResyncSeconds: 3600}
	e.typ("Child", hour)
	e.typ("Other", hour)
	if _, err := e.store.CreateType(t.Context(), storage.CreateTypeRequest{Name: "Parent", Version: "v1", Schema: []byte(`{"type":"object"}`), ReconcilePolicy: hour}); err != nil {
		t.Fatal(err)
	}
	regCtx, stopReg := context.WithCancel(t.Context())
	reg := e.register(regCtx, "parents", "Parent", sdk.Type("Child", "v1"))
	w := e.worker(nil)
	e.scheduler(testConfig("sched"), nil)

	p := e.create("Parent", "p")
	waitFor(t, 5*time.Second, "the parent ready", and(w, p.ID, 0, e.ready(p.ID, 1)))

	c := e.child(p, "c", true)
	waitFor(t, 5*time.Second, "the child ready", e.ready(c.ID, 1))
	waitFor(t, 5*time.Second, "the parent reconciled for its new child", func() bool { return dependencyAttempts(w, p.ID) >= 1 })
	// settle waits until the parent's attempts stop coming (none for
	// 300 ms) and returns their number.
	settle := func() int {
		t.Helper()
		n, since := len(w.attempts(p.ID)), time.Now()
		waitFor(t, 5*time.Second, "the parent's attempts to stop", func() bool {
			if now := len(w.attempts(p.ID)); now != n {
				n, since = now, time.Now()
			}
			return time.Since(since) >= 300*time.Millisecond
		})
		return n
	}
	n := settle()
	e.setSpec(c.ID, 2)
	waitFor(t, 5*time.Second, "the parent reconciled for its child's spec change", func() bool { return len(w.attempts(p.ID)) > n })
	if got := lastReason(w, p.ID); got != reconcilev1.Reason_REASON_DEPENDENCY {
		t.Fatalf("reason %v, want dependency", got)
	}

	// Not its controller; not an owned type.
	n = settle()
	loose := e.child(p, "loose", false)
	other, err := e.store.CreateResource(t.Context(), storage.CreateResourceRequest{Resource: resource.Resource{
		Name: "other", ResourceTypeName: "Other", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{}`), Finalizers: []string{finalizer},
		OwnerReferences: []resource.OwnerReference{{UID: p.UID, ResourceTypeName: "Parent", ResourceTypeVersion: "v1", Name: "p", Controller: true}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the loose children ready", func() bool { return e.ready(loose.ID, 1)() && e.ready(other.ID, 1)() })
	quiet(t, time.Second, "the parent was reconciled for a child it does not control or own", func() bool { return len(w.attempts(p.ID)) > n })

	// Released: a child whose controller reference is dropped tells the
	// owner it no longer controls it.
	freed := e.child(p, "freed", true)
	waitFor(t, 5*time.Second, "the child to free ready", e.ready(freed.ID, 1))
	n = settle()
	if _, err := e.store.UpdateResource(t.Context(), storage.UpdateResourceRequest{ID: freed.ID, SetOwnerReferences: true,
		OwnerReferences: []resource.OwnerReference{}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the parent reconciled for a child it no longer controls", func() bool { return len(w.attempts(p.ID)) > n })

	// Deleted: the child's cleanup and purge reach the parent.
	if _, err := e.store.DeleteResource(t.Context(), storage.DeleteResourceRequest{ID: c.ID}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the child purged", e.gone(c.ID))
	waitFor(t, 5*time.Second, "the parent reconciled for its child's deletion", func() bool { return len(w.attempts(p.ID)) > n })

	// Coalesced: the parents' reconciler goes, 100 children are created
	// and reconciled, it comes back.
	stopReg()
	if err := reg.Deregister(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the scheduler to see no live reconciler for Parent", func() bool {
		return e.reconcilerAvailable(p.ID).Status == resource.ConditionFalse
	})
	n = len(w.attempts(p.ID))
	var kids []*resource.Resource
	for i := range 100 {
		kids = append(kids, e.child(p, fmt.Sprintf("kid-%d", i), true))
	}
	waitFor(t, 20*time.Second, "100 children ready", func() bool {
		for _, k := range kids {
			if !e.ready(k.ID, 1)() {
				return false
			}
		}
		return true
	})
	if got := len(w.attempts(p.ID)); got != n {
		t.Fatalf("the parent was reconciled %d times with no live reconciler", got-n)
	}
	e.register(t.Context(), "parents", "Parent", sdk.Type("Child", "v1"))
	waitFor(t, 5*time.Second, "the parent reconciled once its reconciler is back", func() bool { return len(w.attempts(p.ID)) > n })
	quiet(t, time.Second, "the parent was reconciled more than twice for 100 children's changes", func() bool { return len(w.attempts(p.ID))-n > 2 })
	got := len(w.attempts(p.ID)) - n
	t.Logf("the parent was reconciled %d times for 100 children's changes", got)
	if got > 2 {
		t.Fatalf("the parent was reconciled %d times for 100 children's changes, want at most 2", got)
	}
}

// Changes of an owner's children published while its dispatch waits in the
// queue (its worker takes 600 ms to start it) are read by that attempt and
// ask for no other: three children edited then give the owner one attempt,
// not two. A change published after the attempt began still asks for one.
func TestChangesWhileQueuedAreAnswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hour := resource.ReconcilePolicy{ResyncSeconds: 3600}
	e.typ("Child", hour)
	if _, err := e.store.CreateType(t.Context(), storage.CreateTypeRequest{Name: "Parent", Version: "v1", Schema: []byte(`{"type":"object"}`), ReconcilePolicy: hour}); err != nil {
		t.Fatal(err)
	}
	e.register(t.Context(), "parents", "Parent", sdk.Type("Child", "v1"))
	var p *resource.Resource
	var late atomic.Int64 // a child to edit while the parent's next attempt runs
	w := e.worker(func(_ *reconcilev1.AcquireLeaseResponse, it *reconcilev1.WorkItem) outcome {
		if it.GetResourceId() != p.ID {
			return outcome{}
		}
		if id := late.Swap(0); id != 0 {
			e.setSpec(id, 9)
			return outcome{sleep: 300 * time.Millisecond}
		}
		return outcome{}
	})
	w.delay = func(it *reconcilev1.WorkItem) time.Duration {
		if it.GetReason() == reconcilev1.Reason_REASON_DEPENDENCY {
			return 600 * time.Millisecond
		}
		return 0
	}
	e.scheduler(testConfig("sched"), nil)

	p = e.create("Parent", "p")
	var children []*resource.Resource
	for i := range 3 {
		children = append(children, e.child(p, fmt.Sprintf("c%d", i), true))
	}
	for _, c := range append(children, p) {
		waitFor(t, 10*time.Second, "ready", e.ready(c.ID, 1))
	}
	// settle waits for the parent's attempts to reach least and then stop
	// for a second, and returns how many it had: a quiet second alone could
	// end before a delayed attempt (600 ms in the queue, 300 ms running) is
	// recorded on a busy machine.
	settle := func(least int) int {
		t.Helper()
		n, since := len(w.attempts(p.ID)), time.Now()
		waitFor(t, 20*time.Second, fmt.Sprintf("the parent's attempts to reach %d and stop", least), func() bool {
			if now := len(w.attempts(p.ID)); now != n {
				n, since = now, time.Now()
			}
			return n >= least && time.Since(since) >= time.Second
		})
		return n
	}
	n := settle(1)
	dispatched := e.dispatchID(p.ID)
	for i, c := range children {
		e.setSpec(c.ID, 2)
		if i == 0 {
			waitFor(t, 5*time.Second, "the parent's dispatch for the first change recorded (queued now)", func() bool {
				return e.dispatchID(p.ID) != dispatched
			})
		}
	}
	if got := settle(n + 1); got != n+1 {
		t.Fatalf("the parent had %d attempts for three children edited while its dispatch was queued, want 1", got-n)
	}
	// One edited while the parent's attempt runs, after it began.
	n = len(w.attempts(p.ID))
	late.Store(children[0].ID)
	e.setSpec(children[1].ID, 3)
	if got := settle(n + 2); got != n+2 {
		t.Fatalf("the parent had %d attempts for a change made while its attempt ran, want 2", got-n)
	}
}

// dispatchID is the last dispatch the scheduler recorded for id.
func (e *env) dispatchID(id int64) string {
	e.t.Helper()
	res, err := e.store.ListReconcileState(e.t.Context(), storage.ListReconcileStateRequest{IDs: []int64{id}})
	if err != nil || len(res.States) != 1 {
		e.t.Fatalf("reconcile state of %d: %v", id, err)
	}
	return res.States[0].DispatchID
}
