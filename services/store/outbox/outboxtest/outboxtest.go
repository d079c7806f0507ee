// Package outboxtest holds the checks shared by the relay's tests and the
// end-to-end kill -9 tests: random writes, and the assertion that the event
// stream holds exactly the committed changes, once each, in revision order.
package outboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

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
		_, _ = s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: r.ID})
	case 4:
		_, _ = s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: r.ID, Remove: []string{"example.com/hold"}})
	}
}

// CheckStreamMatchesOutbox asserts that the stream holds exactly the outbox's
// committed events (read through the backend's EventLog), each once, in
// strictly increasing revision order, and that each resource's current
// revision was published as an event of that resource.
//
// The system may still be writing while it looks (a late duplicate dispatch
// takes a lease after everything is ready): it reads the resources first,
// then settles the revision V they are covered by, and compares the outbox
// and the stream up to V, waiting up to 30 s for the relay to get there.
// Anything past V is checked for order only.
func CheckStreamMatchesOutbox(t testing.TB, ctx context.Context, b storage.Backend, stream jetstream.Stream) {
	t.Helper()
	resources := AllResources(t, ctx, b.Store)
	settled, err := b.Log.SettledRevision(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		kind       string
		resourceID int64
	}
	committed := map[int64]ev{}
	payloads := map[int64][]byte{}
	var last int64
	rows, err := b.Log.ReadOutbox(ctx, 0, settled, math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		committed[row.Revision] = ev{row.EventType, row.ResourceID}
		payloads[row.Revision] = row.Payload
		last = max(last, row.Revision)
	}
	waitPublished(t, ctx, stream, last)

	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	published := map[int64]int64{} // revision → resource, up to the settled revision
	resourcesSeen := map[int64]bool{}
	id, _ := eventstream.IdentityOf(info.Config)
	var prev int64
	foreign := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted
		}
		if err != nil {
			t.Fatalf("get seq %d: %v", seq, err)
		}
		// Messages another publisher put there (the fail-safe tests do)
		// are no events: skipped, as the relay skips them.
		// The relay's rule (outbox.ownEvent): the store's headers, and the
		// outbox's row of that revision byte for byte (nothing is pruned
		// here).
		if rev, err := eventstream.Own(msg.Header, id.StoreID); err != nil || (rev <= settled && !bytes.Equal(payloads[rev], msg.Data)) {
			foreign++
			continue
		}
		e, err := eventstream.Decode(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		if e.Revision <= prev {
			t.Fatalf("stream out of order or duplicated: revision %d after %d", e.Revision, prev)
		}
		prev = e.Revision
		if e.Revision > settled {
			continue // written after the look began
		}
		want, ok := committed[e.Revision]
		if !ok {
			t.Fatalf("stream has revision %d (%s) that was never committed", e.Revision, e.Type)
		}
		if want.kind != e.Type || want.resourceID != e.ResourceID {
			t.Fatalf("revision %d: stream has %s of %d, outbox %s of %d", e.Revision, e.Type, e.ResourceID, want.kind, want.resourceID)
		}
		published[e.Revision] = e.ResourceID
		resourcesSeen[e.ResourceID] = true
	}
	if len(published) != len(committed) {
		var missing []string
		for rev, e := range committed {
			if _, ok := published[rev]; !ok {
				missing = append(missing, fmt.Sprintf("%d (%s of resource %d)", rev, e.kind, e.resourceID))
			}
		}
		t.Fatalf("stream holds %d events up to revision %d, %d were committed; missing: %v", len(published), settled, len(committed), missing)
	}
	t.Logf("%d committed events published in order, across %d resources (%d foreign messages passed over)", len(published), len(resourcesSeen), foreign)
	if len(published) < 100 {
		t.Fatalf("only %d events committed: the test exercised too little", len(published))
	}
	for _, r := range resources {
		if id, ok := published[r.ResourceVersion]; !ok || id != r.ID {
			t.Fatalf("resource %d is at revision %d, which the stream does not hold as its event (revision %d is of resource %d; settled at %d)",
				r.ID, r.ResourceVersion, r.ResourceVersion, id, settled)
		}
	}
}

// waitPublished waits up to 30 s for the stream's last event to reach
// revision rev.
func waitPublished(t testing.TB, ctx context.Context, stream jetstream.Stream, rev int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		at, err := eventstream.LastRevision(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if at >= rev {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream reached revision %d, not %d, within 30 s", at, rev)
		}
		time.Sleep(50 * time.Millisecond)
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
