package collector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/scheduler/collector"
	"github.com/no8s/no8s/services/store/litestore"
	"github.com/no8s/no8s/services/store/storage"
)

// storeReader and storeWriter run the collector straight on a real store
// (the embedded one): the rules, without the gateway and the fence that
// the scheduler puts between them.
type storeReader struct{ s storage.Store }

func (r storeReader) Dependents(ctx context.Context, uid string, after int64, limit int) ([]*resource.Resource, error) {
	return r.s.ListDependents(ctx, storage.ListDependentsRequest{OwnerUID: uid, AfterID: after, Limit: limit})
}

func (r storeReader) Dangling(ctx context.Context, after int64, limit int) ([]collector.Dangling, int64, error) {
	p, err := r.s.ListDangling(ctx, storage.ListDanglingRequest{AfterID: after, Limit: limit})
	if err != nil {
		return nil, 0, err
	}
	out := make([]collector.Dangling, 0, len(p.Items))
	for _, d := range p.Items {
		out = append(out, collector.Dangling{Resource: d.Resource, Refs: d.Refs})
	}
	return out, p.Next, nil
}

// storeWriter writes to the store; deny, when set, stands for a
// validating webhook: a write to a resource it names is refused; before,
// when set, runs before every write (another writer racing the collector).
type storeWriter struct {
	s      storage.Store
	deny   func(r *resource.Resource) bool
	before func(r *resource.Resource)
}

func (w storeWriter) refuse(r *resource.Resource) error {
	if w.before != nil {
		w.before(r)
	}
	if w.deny != nil && w.deny(r) {
		return fmt.Errorf("%w: admission webhook \"guard\" denied the request: %s is protected", collector.ErrDenied, r.Name)
	}
	return nil
}

func skip(err error) error {
	switch {
	case errors.Is(err, storage.ErrConflict):
		return errors.Join(collector.ErrConflict, err)
	case errors.Is(err, storage.ErrNotFound):
		return errors.Join(collector.ErrSkip, err)
	}
	return err
}

func (w storeWriter) Delete(ctx context.Context, r *resource.Resource, p lifecycle.Propagation) error {
	if err := w.refuse(r); err != nil {
		return err
	}
	_, err := w.s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID, ExpectedResourceVersion: r.ResourceVersion, Propagation: p})
	return skip(err)
}

func (w storeWriter) SetOwnerReferences(ctx context.Context, r *resource.Resource, refs []resource.OwnerReference) error {
	if err := w.refuse(r); err != nil {
		return err
	}
	_, err := w.s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, SetOwnerReferences: true, OwnerReferences: refs, ExpectedResourceVersion: r.ResourceVersion})
	return skip(err)
}

func (w storeWriter) RemoveFinalizer(ctx context.Context, r *resource.Resource, f string) error {
	if w.before != nil {
		w.before(r)
	}
	_, err := w.s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Remove: []string{f}})
	return skip(err)
}

func (w storeWriter) Warn(ctx context.Context, r *resource.Resource, reason, message string) error {
	_, err := w.s.RecordEvent(ctx, storage.RecordEventRequest{ResourceID: r.ID,
		Event: storage.EventInput{Type: names.EventWarning, Reason: reason, Message: message, Source: "garbage-collector"}})
	return err
}

type fixture struct {
	t *testing.T
	s storage.Store
	c *collector.Collector
}

func newFixture(t *testing.T) *fixture {
	s, err := litestore.Open(t.Context(), filepath.Join(t.TempDir(), "store.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(t.Context(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateType(t.Context(), storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	// Pages of 2 make every walk take several pages.
	return &fixture{t: t, s: s, c: collector.New(storeReader{s}, storeWriter{s: s}, 2, nil)}
}

func ref(owner *resource.Resource, block bool) resource.OwnerReference {
	return resource.OwnerReference{UID: owner.UID, ResourceTypeName: owner.ResourceTypeName, ResourceTypeVersion: owner.ResourceTypeVersion,
		Name: owner.Name, Controller: true, BlockOwnerDeletion: block}
}

func (f *fixture) create(name string, owners []resource.OwnerReference, finalizers ...string) *resource.Resource {
	f.t.Helper()
	r, err := f.s.CreateResource(f.t.Context(), storage.CreateResourceRequest{Resource: resource.Resource{
		Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{}`), OwnerReferences: owners, Finalizers: finalizers,
	}})
	if err != nil {
		f.t.Fatalf("create %s: %v", name, err)
	}
	return r
}

// get returns r as stored now, nil when it is gone.
func (f *fixture) get(r *resource.Resource) *resource.Resource {
	f.t.Helper()
	cur, err := f.s.GetResource(f.t.Context(), storage.ResourceKey{ID: r.ID})
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return cur
}

func (f *fixture) delete(r *resource.Resource, p lifecycle.Propagation) {
	f.t.Helper()
	if _, err := f.s.DeleteResource(f.t.Context(), storage.DeleteResourceRequest{ID: r.ID, Propagation: p}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) propagate(r *resource.Resource) collector.Stats {
	f.t.Helper()
	cur := f.get(r)
	if cur == nil {
		return collector.Stats{}
	}
	st, err := f.c.Propagate(f.t.Context(), cur)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// A dependent whose only owner never existed is deleted; one with a live
// owner and a dangling reference keeps only the live one; the second
// sweep finds nothing.
func TestSweepCollectsDangling(t *testing.T) {
	f := newFixture(t)
	live := f.create("live", nil)
	never := resource.OwnerReference{UID: uuid.NewString(), ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: "never"}
	orphan := f.create("orphan", []resource.OwnerReference{never})
	held := f.create("held", []resource.OwnerReference{never}, "example.com/hold")
	mixed := f.create("mixed", []resource.OwnerReference{never, ref(live, false)})
	fine := f.create("fine", []resource.OwnerReference{ref(live, true)})
	for i := range 3 {
		f.create("filler-"+string(rune('a'+i)), []resource.OwnerReference{ref(live, false)})
	}

	st, err := f.c.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted != 2 || st.RefsRemoved != 1 {
		t.Fatalf("sweep: %+v, want 2 deleted and 1 reference removed", st)
	}
	if f.get(orphan) != nil {
		t.Fatal("the dependent of an owner that never existed is still there")
	}
	if h := f.get(held); h == nil || h.DeletedAt == nil {
		t.Fatalf("a dependent with a finalizer is deleted through it, never purged: %+v", h)
	}
	if m := f.get(mixed); m == nil || !slices.Equal(m.OwnerReferences, []resource.OwnerReference{ref(live, false)}) {
		t.Fatalf("mixed: %+v, want only the live reference", m)
	}
	if r := f.get(fine); r == nil || len(r.OwnerReferences) != 1 {
		t.Fatalf("a dependent of a live owner was touched: %+v", r)
	}
	if st, err := f.c.Sweep(t.Context()); err != nil || st != (collector.Stats{}) {
		t.Fatalf("second sweep: %+v %v", st, err)
	}
}

// Background: the owner goes at once; its dependents go when the collector
// hears of the purge (or at the next sweep).
func TestBackground(t *testing.T) {
	f := newFixture(t)
	owner := f.create("owner", nil)
	var deps []*resource.Resource
	for _, n := range []string{"d1", "d2", "d3"} {
		deps = append(deps, f.create(n, []resource.OwnerReference{ref(owner, true)}))
	}
	other := f.create("other", nil)
	shared := f.create("shared", []resource.OwnerReference{ref(owner, false), ref(other, false)})
	f.delete(owner, lifecycle.PropagationBackground)
	if f.get(owner) != nil {
		t.Fatal("a background delete held the owner")
	}
	st, err := f.c.OwnerPurged(t.Context(), owner.UID)
	if err != nil || st.Deleted != 3 || st.RefsRemoved != 1 {
		t.Fatalf("owner purged: %+v %v", st, err)
	}
	for _, d := range deps {
		if f.get(d) != nil {
			t.Fatalf("%s survived its owner", d.Name)
		}
	}
	if s := f.get(shared); s == nil || !slices.Equal(s.OwnerReferences, []resource.OwnerReference{ref(other, false)}) {
		t.Fatalf("shared: %+v, want it kept with its live owner only", s)
	}
}

// Foreground, two levels: the owner stays deleting until its blocking
// dependents are gone, a dependent that owns others goes in the foreground
// too, and a dependent that does not block is not waited for.
func TestForeground(t *testing.T) {
	f := newFixture(t)
	owner := f.create("owner", nil)
	parent := f.create("parent", []resource.OwnerReference{ref(owner, true)})
	grand := f.create("grand", []resource.OwnerReference{ref(parent, true)}, "example.com/hold")
	loose := f.create("loose", []resource.OwnerReference{ref(owner, false)}, "example.com/hold")
	f.delete(owner, lifecycle.PropagationForeground)

	f.propagate(owner)
	if o := f.get(owner); o == nil || !slices.Contains(o.Finalizers, lifecycle.FinalizerForeground) {
		t.Fatalf("the owner went before its blocking dependent: %+v", o)
	}
	p := f.get(parent)
	if p == nil || p.DeletedAt == nil || !slices.Contains(p.Finalizers, lifecycle.FinalizerForeground) {
		t.Fatalf("a dependent that owns others is deleted in the foreground: %+v", p)
	}
	if l := f.get(loose); l == nil || l.DeletedAt == nil {
		t.Fatalf("loose: %+v, want deleting", l)
	}
	// The grandchild is deleted; its finalizer holds it, and so its parent
	// and the owner.
	f.propagate(parent)
	if g := f.get(grand); g == nil || g.DeletedAt == nil {
		t.Fatalf("grand: %+v", g)
	}
	f.propagate(parent)
	f.propagate(owner)
	if f.get(parent) == nil || f.get(owner) == nil {
		t.Fatal("the parent or the owner went while a blocking dependent remains")
	}
	// Its cleanup done, the grandchild goes; then the parent, then the
	// owner, while the non-blocking dependent may still be deleting.
	if _, err := f.s.UpdateFinalizers(t.Context(), storage.UpdateFinalizersRequest{ID: grand.ID, Remove: []string{"example.com/hold"}}); err != nil {
		t.Fatal(err)
	}
	if st := f.propagate(parent); st.FinalizersRemoved != 1 || f.get(parent) != nil {
		t.Fatalf("parent after its dependent went: %+v", st)
	}
	if st := f.propagate(owner); st.FinalizersRemoved != 1 || f.get(owner) != nil {
		t.Fatalf("owner after its blocking dependents went: %+v", st)
	}
	if l := f.get(loose); l == nil || l.DeletedAt == nil {
		t.Fatalf("loose: %+v, want still deleting (its own finalizer)", l)
	}
}

// Orphan: the dependents are kept without the reference, then the owner
// goes.
func TestOrphan(t *testing.T) {
	f := newFixture(t)
	owner := f.create("owner", nil)
	other := f.create("other", nil)
	var deps []*resource.Resource
	for _, n := range []string{"d1", "d2", "d3", "d4", "d5"} {
		deps = append(deps, f.create(n, []resource.OwnerReference{ref(owner, true)}))
	}
	both := f.create("both", []resource.OwnerReference{ref(other, false), ref(owner, true)})
	f.delete(owner, lifecycle.PropagationOrphan)
	if st := f.propagate(owner); st.RefsRemoved != 6 || st.FinalizersRemoved != 1 {
		t.Fatalf("orphan: %+v", st)
	}
	if f.get(owner) != nil {
		t.Fatal("the owner stayed")
	}
	for _, d := range deps {
		if cur := f.get(d); cur == nil || len(cur.OwnerReferences) != 0 || cur.DeletedAt != nil {
			t.Fatalf("%s: %+v, want kept without owners", d.Name, cur)
		}
	}
	if b := f.get(both); b == nil || !slices.Equal(b.OwnerReferences, []resource.OwnerReference{ref(other, false)}) {
		t.Fatalf("both: %+v", b)
	}
}

// A write a webhook denies leaves the dependent, records a
// GarbageCollectionDenied Warning Event on it, and is not tried again
// until its backoff has run out (twice as long after a second refusal);
// once allowed, the dependent is collected and forgotten.
func TestDeniedWritesBackOff(t *testing.T) {
	f := newFixture(t)
	denying := true
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.c = collector.New(storeReader{f.s}, storeWriter{s: f.s, deny: func(*resource.Resource) bool { return denying }}, 2, nil).
		WithClock(func() time.Time { return now })
	never := resource.OwnerReference{UID: uuid.NewString(), ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: "never"}
	guarded := f.create("guarded", []resource.OwnerReference{never})
	sweep := func() collector.Stats {
		t.Helper()
		st, err := f.c.Sweep(t.Context())
		if err != nil {
			t.Fatalf("a refusal is not the pass's error: %v", err)
		}
		return st
	}
	events := func() []storage.EventRecord {
		t.Helper()
		evs, err := f.s.ListEvents(t.Context(), storage.ListEventsRequest{ResourceID: guarded.ID, Reason: collector.EventDenied})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}

	if st := sweep(); st.Denied != 1 || st.Deleted != 0 {
		t.Fatalf("first sweep: %+v", st)
	}
	if g := f.get(guarded); g == nil || g.DeletedAt != nil {
		t.Fatalf("a denied delete changed the dependent: %+v", g)
	}
	evs := events()
	if len(evs) != 1 || evs[0].Type != names.EventWarning || !strings.Contains(evs[0].Message, "guarded is protected") {
		t.Fatalf("events: %+v", evs)
	}
	first, ok := f.c.NextRetry()
	if wait := first.Sub(now); !ok || wait < collector.DeniedBackoff*9/10 || wait > collector.DeniedBackoff*11/10 {
		t.Fatalf("first retry in %v (%v), want about %v", wait, ok, collector.DeniedBackoff)
	}
	if st := sweep(); st.Deferred != 1 || st.Denied != 0 {
		t.Fatalf("a sweep within the backoff asked again: %+v", st)
	}
	now = first
	if st := sweep(); st.Denied != 1 {
		t.Fatalf("after the backoff: %+v", st)
	}
	second, _ := f.c.NextRetry()
	if wait := second.Sub(now); wait < 2*collector.DeniedBackoff*9/10 || wait > 2*collector.DeniedBackoff*11/10 {
		t.Fatalf("second retry in %v, want about %v", wait, 2*collector.DeniedBackoff)
	}
	if n := len(events()); n < 1 {
		t.Fatalf("the second refusal left no Event (%d)", n)
	}

	denying = false
	now = second
	if st := sweep(); st.Deleted != 1 {
		t.Fatalf("once allowed: %+v", st)
	}
	if f.get(guarded) != nil {
		t.Fatal("the dependent was not collected once the webhook allowed it")
	}
	if at, ok := f.c.NextRetry(); ok {
		t.Fatalf("a collected dependent still waits for a retry at %v", at)
	}
}

// A write that meets a conflict (a reconciler wrote the dependent's status
// between the collector's read and its delete) is not a skip for good: the
// collector asks for a pass soon, and that pass, reading the dependent
// afresh, collects it. One that keeps changing waits twice as long each
// time.
func TestConflictsAreJudgedAgainSoon(t *testing.T) {
	f := newFixture(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	races := 2
	f.c = collector.New(storeReader{f.s}, storeWriter{s: f.s, before: func(r *resource.Resource) {
		if races == 0 {
			return
		}
		races--
		if _, err := f.s.UpdateResource(t.Context(), storage.UpdateResourceRequest{ID: r.ID, SetLabels: true, Labels: map[string]string{"race": strconv.Itoa(races)}}); err != nil {
			t.Fatal(err)
		}
	}}, 2, nil).WithClock(func() time.Time { return now })
	never := resource.OwnerReference{UID: uuid.NewString(), ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: "never"}
	busy := f.create("busy", []resource.OwnerReference{never})
	sweep := func() collector.Stats {
		t.Helper()
		st, err := f.c.Sweep(t.Context())
		if err != nil {
			t.Fatalf("a conflict is not the pass's error: %v", err)
		}
		return st
	}

	if st := sweep(); st.Conflicts != 1 || st.Deleted != 0 {
		t.Fatalf("first sweep: %+v", st)
	}
	first, ok := f.c.NextRetry()
	if wait := first.Sub(now); !ok || wait < collector.ConflictRetry*9/10 || wait > collector.ConflictRetry*11/10 {
		t.Fatalf("first retry in %v (%v), want about %v", wait, ok, collector.ConflictRetry)
	}
	now = first
	if st := sweep(); st.Conflicts != 1 {
		t.Fatalf("second sweep: %+v", st)
	}
	second, _ := f.c.NextRetry()
	if wait := second.Sub(now); wait < 2*collector.ConflictRetry*9/10 || wait > 2*collector.ConflictRetry*11/10 {
		t.Fatalf("second retry in %v, want about %v", wait, 2*collector.ConflictRetry)
	}
	now = second
	if st := sweep(); st.Deleted != 1 || st.Conflicts != 0 {
		t.Fatalf("once it holds still: %+v", st)
	}
	if f.get(busy) != nil {
		t.Fatal("the dependent was not collected once it held still")
	}
	if at, ok := f.c.NextRetry(); ok {
		t.Fatalf("a collected dependent still waits for a retry at %v", at)
	}
}
