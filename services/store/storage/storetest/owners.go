package storetest

import (
	"slices"
	"strings"
	"testing"

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
