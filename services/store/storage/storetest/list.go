package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// testListStableAcrossWrites pages through a list while resources are
// created, changed and deleted between pages: the pages come by ascending
// id, no resource appears twice, every resource that lived through the
// whole list appears once, later pages keep the first page's
// ResourceVersion (the relay's published revision at the first read), and
// the default and bad limits, a status filter and malformed tokens behave.
func testListStableAcrossWrites(t *testing.T, open Opener) {
	s, el := newStore(t, open)
	ctx := t.Context()
	mustType(t, s, "Widget", "v1")
	var rs []*resource.Resource
	for i := range 10 {
		rs = append(rs, mustCreate(t, s, fmt.Sprintf("r%02d", i)))
	}
	// Publish up to the fifth: the first page reads that revision.
	lock, epoch, _ := leadRelay(t, el)
	if err := el.AdvanceCursor(ctx, epoch, rs[4].ResourceVersion, rs[4].ResourceVersion); err != nil {
		t.Fatal(err)
	}
	lock.Release()

	first, err := s.ListResources(ctx, storage.ListResourcesRequest{Limit: 3, LabelSelector: "app=web"})
	if err != nil || len(first.Resources) != 3 || first.Continue == "" || first.ResourceVersion != rs[4].ResourceVersion {
		t.Fatalf("first page: %d resources, continue %q, resource_version %d (%v); want 3, a token, %d",
			len(first.Resources), first.Continue, first.ResourceVersion, err, rs[4].ResourceVersion)
	}
	seen := map[int64]int{}
	var lastID int64
	take := func(page *storage.ListResourcesResult) {
		for _, r := range page.Resources {
			if r.ID <= lastID {
				t.Fatalf("resource %d after %d: not by ascending id", r.ID, lastID)
			}
			lastID = r.ID
			seen[r.ID]++
		}
	}
	take(first)
	// Between pages: a change to a listed resource, one to a later one, a
	// deletion of a later one, and a new resource.
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: rs[0].ID, Spec: []byte(`{"size":7}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: rs[6].ID, Spec: []byte(`{"size":7}`)}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: rs[8].ID}); err != nil || !res.Purged {
		t.Fatalf("delete: %+v %v", res, err)
	}
	late := mustCreate(t, s, "late")
	tok := first.Continue
	pages := 1
	for tok != "" {
		page, err := s.ListResources(ctx, storage.ListResourcesRequest{Limit: 3, LabelSelector: "app=web", Continue: tok})
		if err != nil {
			t.Fatal(err)
		}
		if page.ResourceVersion != first.ResourceVersion {
			t.Fatalf("page %d at resource_version %d, the first at %d", pages, page.ResourceVersion, first.ResourceVersion)
		}
		take(page)
		tok, pages = page.Continue, pages+1
	}
	for i, r := range rs {
		if want := map[bool]int{true: 0, false: 1}[i == 8]; seen[r.ID] != want {
			t.Errorf("resource %s seen %d times, want %d", r.Name, seen[r.ID], want)
		}
	}
	if seen[late.ID] != 1 || pages != 4 {
		t.Errorf("new resource seen %d times over %d pages, want once over 4", seen[late.ID], pages)
	}

	all, err := s.ListResources(ctx, storage.ListResourcesRequest{})
	if err != nil || len(all.Resources) != 10 || all.Continue != "" {
		t.Fatalf("default limit: %d resources, continue %q (%v)", len(all.Resources), all.Continue, err)
	}
	pending, err := s.ListResources(ctx, storage.ListResourcesRequest{Status: resource.StatusPending})
	if err != nil || len(pending.Resources) != 10 {
		t.Fatalf("status filter: %d (%v)", len(pending.Resources), err)
	}
	for _, bad := range []storage.ListResourcesRequest{
		{Continue: "not a token"}, {Limit: -1}, {Status: "sleeping"}, {LabelSelector: "a in ("},
	} {
		if _, err := s.ListResources(ctx, bad); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("list %+v: %v, want invalid", bad, err)
		}
	}
}
