// Package outboxtest holds the checks shared by the relay's tests and the
// end-to-end kill -9 tests: random writes, and the assertion that the event
// stream holds exactly the committed changes, once each, in revision order.
package outboxtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"math"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// WriteOnce does one random write to the resource name; failures (name
// taken, not found, injected rollbacks) are part of the test.
func WriteOnce(ctx context.Context, s storage.Store, name string, rng func(int) int) {
	r, err := s.GetResource(ctx, storage.ResourceKey{ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: name})
	if err != nil {
		var fins []string
		if rng(2) == 0 {
			fins = []string{"example.com/hold"}
		}
		_, _ = s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
			Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
			Spec: json.RawMessage(fmt.Sprintf(`{"n":%d}`, rng(1000))), Finalizers: fins}})
		return
	}
	switch rng(5) {
	case 0, 1:
		_, _ = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, Spec: []byte(fmt.Sprintf(`{"n":%d}`, rng(1000)))})
	case 2:
		_, _ = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: r.ID, SetLabels: true, Labels: map[string]string{"v": fmt.Sprint(rng(9))}})
	case 3:
		_, _ = s.DeleteResource(ctx, r.ID, 0, false)
	case 4:
		_, _ = s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Remove: []string{"example.com/hold"}})
	}
}

// CheckStreamMatchesOutbox asserts that the stream holds exactly the outbox's
// committed events (read through the backend's EventLog), each once, in
// strictly increasing revision order, and that each remaining resource's
// last event carries its current revision.
func CheckStreamMatchesOutbox(t testing.TB, ctx context.Context, b storage.Backend, stream jetstream.Stream) {
	t.Helper()
	type ev struct {
		kind       string
		resourceID int64
	}
	committed := map[int64]ev{}
	rows, err := b.Log.ReadOutbox(ctx, 0, math.MaxInt64, math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		committed[row.Revision] = ev{row.EventType, row.ResourceID}
	}

	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lastByResource := map[int64]int64{}
	inStream := map[int64]bool{}
	var prev int64
	seen := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get seq %d: %v", seq, err)
		}
		e, err := eventstream.Decode(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		if e.Revision <= prev {
			t.Fatalf("stream out of order or duplicated: revision %d after %d", e.Revision, prev)
		}
		prev = e.Revision
		want, ok := committed[e.Revision]
		if !ok {
			t.Fatalf("stream has revision %d (%s) that was never committed", e.Revision, e.Type)
		}
		if want.kind != e.Type || want.resourceID != e.ResourceID {
			t.Fatalf("revision %d: stream has %s of %d, outbox %s of %d", e.Revision, e.Type, e.ResourceID, want.kind, want.resourceID)
		}
		lastByResource[e.ResourceID] = e.Revision
		inStream[e.Revision] = true
		seen++
	}
	if seen != len(committed) {
		var missing []string
		for rev, e := range committed {
			if !inStream[rev] {
				missing = append(missing, fmt.Sprintf("%d (%s of resource %d)", rev, e.kind, e.resourceID))
			}
		}
		t.Fatalf("stream holds %d events, %d were committed; missing: %v", seen, len(committed), missing)
	}
	t.Logf("%d committed events published in order, across %d resources", seen, len(lastByResource))
	if seen < 100 {
		t.Fatalf("only %d events committed: the test exercised too little", seen)
	}
	for _, r := range AllResources(t, ctx, b.Store) {
		if lastByResource[r.ID] != r.ResourceVersion {
			t.Fatalf("resource %d is at revision %d, its last event is %d", r.ID, r.ResourceVersion, lastByResource[r.ID])
		}
	}
}

// AllResources lists every resource of s, page by page.
func AllResources(t testing.TB, ctx context.Context, s storage.Store) []*resource.Resource {
	t.Helper()
	var out []*resource.Resource
	next := ""
	for {
		page, err := s.ListResources(ctx, storage.ListResourcesRequest{Limit: storage.MaxListLimit, Continue: next})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Resources...)
		if next = page.Continue; next == "" {
			return out
		}
	}
}
