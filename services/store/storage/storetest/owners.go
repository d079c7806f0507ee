package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// testDeletePropagation: a delete's propagation policy adds its finalizer
// in the transaction that marks the resource deleting (Foreground:
// foregroundDeletion, Orphan: orphan), so that a resource with no other
// finalizer is held instead of purged; Background adds none; a bad policy
// writes nothing; a second delete of a deleting resource changes nothing
// whatever its policy.
func testDeletePropagation(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")

	for _, c := range []struct {
		policy lifecycle.Propagation
		want   string
	}{{"Foreground", lifecycle.FinalizerForeground}, {"orphan", lifecycle.FinalizerOrphan}} {
		r := mustCreate(t, s, "held-"+strings.ToLower(c.want))
		before := countEvents(t, el)
		dry, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID, Propagation: c.policy, DryRun: true})
		if err != nil || !slices.Contains(dry.Resource.Finalizers, c.want) || dry.Purged {
			t.Fatalf("%s dry run: %+v %v", c.policy, dry, err)
		}
		if cur, err := s.GetResource(ctx, storage.ResourceKey{ID: r.ID}); err != nil || cur.DeletedAt != nil || len(cur.Finalizers) != 0 || countEvents(t, el) != before {
			t.Fatalf("%s dry run wrote: %+v %v", c.policy, cur, err)
		}
		del, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID, Propagation: c.policy})
		if err != nil || del.Purged || !slices.Equal(del.Resource.Finalizers, []string{c.want}) || del.Resource.Status != resource.StatusDeleting {
			t.Fatalf("%s delete: %+v %v", c.policy, del, err)
		}
		read, err := s.GetResource(ctx, storage.ResourceKey{ID: r.ID})
		if err != nil || !slices.Equal(read.Finalizers, []string{c.want}) || read.DeletedAt == nil {
			t.Fatalf("%s delete, read back: %+v %v", c.policy, read, err)
		}
		if got := events(t, el, r.ID); !slices.Equal(got, []string{"CREATED", "DELETED"}) {
			t.Fatalf("%s delete events %v, want CREATED, DELETED", c.policy, got)
		}
		// Another policy on a deleting resource changes nothing.
		again, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID, Propagation: lifecycle.PropagationOrphan})
		if err != nil || again.Resource.ResourceVersion != read.ResourceVersion || !slices.Equal(again.Resource.Finalizers, []string{c.want}) {
			t.Fatalf("%s: a second delete wrote: %+v %v", c.policy, again, err)
		}
		// Removing the propagation finalizer purges it.
		fin, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Remove: []string{c.want}})
		if err != nil || !fin.Purged {
			t.Fatalf("%s: removing %s did not purge: %+v %v", c.policy, c.want, fin, err)
		}
	}

	// A finalizer already there is kept once, beside the policy's.
	kept := mustCreate(t, s, "kept", "example.com/hold")
	del, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: kept.ID, Propagation: lifecycle.PropagationForeground})
	if err != nil || !slices.Equal(del.Resource.Finalizers, []string{"example.com/hold", lifecycle.FinalizerForeground}) {
		t.Fatalf("foreground delete of a resource with a finalizer: %+v %v", del, err)
	}

	// Background adds nothing: no finalizer, purged at once.
	bg := mustCreate(t, s, "background")
	if del, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: bg.ID, Propagation: lifecycle.PropagationBackground}); err != nil || !del.Purged {
		t.Fatalf("background delete: %+v %v", del, err)
	}

	// A bad policy writes nothing.
	bad := mustCreate(t, s, "bad")
	before := countEvents(t, el)
	_, err = s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: bad.ID, Propagation: "Cascade"})
	wantErr(t, err, storage.ErrInvalid)
	if cur, err := s.GetResource(ctx, storage.ResourceKey{ID: bad.ID}); err != nil || cur.DeletedAt != nil || cur.ResourceVersion != bad.ResourceVersion || countEvents(t, el) != before {
		t.Fatalf("a bad policy wrote: %+v %v", cur, err)
	}
}

// mustOwned creates a Widget named name owned by refs.
func mustOwned(t *testing.T, s storage.Store, name string, refs []resource.OwnerReference, finalizers ...string) *resource.Resource {
	t.Helper()
	r, err := s.CreateResource(t.Context(), storage.CreateResourceRequest{Resource: resource.Resource{
		Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: json.RawMessage(`{"size":1}`),
		OwnerReferences: refs, Finalizers: finalizers,
	}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return r
}

// refTo is an owner reference to r.
func refTo(r *resource.Resource) resource.OwnerReference {
	return resource.OwnerReference{UID: r.UID, ResourceTypeName: r.ResourceTypeName, ResourceTypeVersion: r.ResourceTypeVersion, Name: r.Name}
}

func idsOf(rs []*resource.Resource) []int64 {
	out := make([]int64, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// testListDependents: the dependents of an owner uid, by ascending id, in
// pages, following creates, owner-reference updates and purges.
func testListDependents(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	a, b := mustCreate(t, s, "owner-a"), mustCreate(t, s, "owner-b")
	c1 := mustOwned(t, s, "child-1", []resource.OwnerReference{refTo(a)})
	c2 := mustOwned(t, s, "child-2", []resource.OwnerReference{refTo(b), refTo(a)})
	c3 := mustOwned(t, s, "child-3", []resource.OwnerReference{refTo(b)})
	mustOwned(t, s, "grandchild", []resource.OwnerReference{refTo(c1)})
	mustCreate(t, s, "unrelated")

	list := func(uid string, after int64, limit int) []int64 {
		t.Helper()
		rs, err := s.ListDependents(ctx, storage.ListDependentsRequest{OwnerUID: uid, AfterID: after, Limit: limit})
		if err != nil {
			t.Fatalf("dependents of %s: %v", uid, err)
		}
		return idsOf(rs)
	}
	if got := list(a.UID, 0, 0); !slices.Equal(got, []int64{c1.ID, c2.ID}) {
		t.Fatalf("dependents of a: %v, want %v", got, []int64{c1.ID, c2.ID})
	}
	if got := list(b.UID, 0, 0); !slices.Equal(got, []int64{c2.ID, c3.ID}) {
		t.Fatalf("dependents of b: %v", got)
	}
	// Pages of one.
	var paged []int64
	for after := int64(0); ; {
		page := list(a.UID, after, 1)
		if len(page) == 0 {
			break
		}
		if len(page) != 1 {
			t.Fatalf("a page of %d, asked 1", len(page))
		}
		paged = append(paged, page...)
		after = page[0]
	}
	if !slices.Equal(paged, []int64{c1.ID, c2.ID}) {
		t.Fatalf("paged dependents of a: %v", paged)
	}
	if got := list(uuid.NewString(), 0, 0); len(got) != 0 {
		t.Fatalf("dependents of nobody: %v", got)
	}

	// An update of the owner references moves the dependent.
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: c2.ID, SetOwnerReferences: true, OwnerReferences: []resource.OwnerReference{refTo(b)}}); err != nil {
		t.Fatal(err)
	}
	if got := list(a.UID, 0, 0); !slices.Equal(got, []int64{c1.ID}) {
		t.Fatalf("dependents of a after c2 dropped it: %v", got)
	}
	// A purged dependent is no one's any more.
	if res, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: c1.ID}); err != nil || !res.Purged {
		t.Fatalf("purge c1: %+v %v", res, err)
	}
	if got := list(a.UID, 0, 0); len(got) != 0 {
		t.Fatalf("dependents of a after c1's purge: %v", got)
	}
	if got := list(b.UID, 0, 0); !slices.Equal(got, []int64{c2.ID, c3.ID}) {
		t.Fatalf("dependents of b at the end: %v", got)
	}
}

// testListDangling: the sweep finds, in pages, every resource with an
// owner reference that names no resource (never existed, purged) or a
// resource of another type, version or name, with exactly those
// references; an owner that is deleting is still an owner.
func testListDangling(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	mustType(t, s, "Gizmo", "v1")
	live := mustCreate(t, s, "live")
	leaving := mustCreate(t, s, "leaving", "example.com/hold")
	purged := mustCreate(t, s, "purged")

	never := resource.OwnerReference{UID: uuid.NewString(), ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: "never"}
	notUUID := resource.OwnerReference{UID: "not-a-uid", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: "odd"}
	renamed := refTo(live)
	renamed.Name = "someone-else"
	retyped := refTo(live)
	retyped.ResourceTypeName = "Gizmo"

	fine := mustOwned(t, s, "fine", []resource.OwnerReference{refTo(live)})
	heldOwner := mustOwned(t, s, "held-owner", []resource.OwnerReference{refTo(leaving)})
	orphan := mustOwned(t, s, "orphan", []resource.OwnerReference{never})
	mixed := mustOwned(t, s, "mixed", []resource.OwnerReference{never, refTo(live), notUUID})
	wrongName := mustOwned(t, s, "wrong-name", []resource.OwnerReference{renamed})
	wrongType := mustOwned(t, s, "wrong-type", []resource.OwnerReference{retyped})
	ofPurged := mustOwned(t, s, "of-purged", []resource.OwnerReference{refTo(purged)})
	mustCreate(t, s, "no-owners")

	if res, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: leaving.ID}); err != nil || res.Purged {
		t.Fatalf("delete leaving: %+v %v", res, err)
	}
	if res, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: purged.ID}); err != nil || !res.Purged {
		t.Fatalf("purge: %+v %v", res, err)
	}

	sweep := func(limit int) map[int64][]resource.OwnerReference {
		t.Helper()
		got := map[int64][]resource.OwnerReference{}
		after, pages := int64(0), 0
		for {
			page, err := s.ListDangling(ctx, storage.ListDanglingRequest{AfterID: after, Limit: limit})
			if err != nil {
				t.Fatalf("sweep after %d: %v", after, err)
			}
			for _, d := range page.Items {
				if _, dup := got[d.Resource.ID]; dup || d.Resource.ID <= after {
					t.Fatalf("resource %d twice or out of order (after %d)", d.Resource.ID, after)
				}
				got[d.Resource.ID] = d.Refs
			}
			if pages++; pages > 100 {
				t.Fatal("the sweep does not end")
			}
			if page.Next == 0 {
				return got
			}
			if page.Next <= after {
				t.Fatalf("the sweep went back: next %d after %d", page.Next, after)
			}
			after = page.Next
		}
	}
	want := map[int64][]resource.OwnerReference{
		orphan.ID:    {never},
		mixed.ID:     {never, notUUID},
		wrongName.ID: {renamed},
		wrongType.ID: {retyped},
		ofPurged.ID:  {refTo(purged)},
	}
	for _, limit := range []int{0, 1, 2, 3} {
		got := sweep(limit)
		if len(got) != len(want) {
			t.Fatalf("limit %d: dangling %v, want %v", limit, got, want)
		}
		for id, refs := range want {
			if !slices.Equal(got[id], refs) {
				t.Fatalf("limit %d: resource %d dangles by %+v, want %+v", limit, id, got[id], refs)
			}
		}
		for _, r := range []*resource.Resource{fine, heldOwner} {
			if _, ok := got[r.ID]; ok {
				t.Fatalf("limit %d: %s dangles", limit, r.Name)
			}
		}
	}
}

// testListPropagating: the deleting resources that carry a propagation
// finalizer, by ascending id, in pages; not the live ones, not those
// deleting without one.
func testListPropagating(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	fg, or := mustCreate(t, s, "fg"), mustCreate(t, s, "or", "example.com/hold")
	mustCreate(t, s, "live")
	plain := mustCreate(t, s, "plain", "example.com/hold")
	for _, d := range []struct {
		r *resource.Resource
		p lifecycle.Propagation
	}{{fg, lifecycle.PropagationForeground}, {or, lifecycle.PropagationOrphan}, {plain, lifecycle.PropagationBackground}} {
		if _, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: d.r.ID, Propagation: d.p}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListPropagating(ctx, 0, 0)
	if err != nil || !slices.Equal(idsOf(all), []int64{fg.ID, or.ID}) {
		t.Fatalf("propagating: %v %v, want %v", idsOf(all), err, []int64{fg.ID, or.ID})
	}
	first, err := s.ListPropagating(ctx, 0, 1)
	if err != nil || !slices.Equal(idsOf(first), []int64{fg.ID}) {
		t.Fatalf("first page: %v %v", idsOf(first), err)
	}
	rest, err := s.ListPropagating(ctx, fg.ID, 1)
	if err != nil || !slices.Equal(idsOf(rest), []int64{or.ID}) {
		t.Fatalf("second page: %v %v", idsOf(rest), err)
	}
	// The finalizer removed, the resource is purged and listed no more.
	if _, err := s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: fg.ID, Remove: []string{lifecycle.FinalizerForeground}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ListPropagating(ctx, 0, 0); err != nil || !slices.Equal(idsOf(got), []int64{or.ID}) {
		t.Fatalf("after foregroundDeletion went: %v %v", idsOf(got), err)
	}
}
