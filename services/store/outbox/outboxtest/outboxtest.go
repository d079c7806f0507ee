// Package outboxtest holds the checks shared by the relay's tests and the
// end-to-end kill -9 tests: random writes, and the assertion that the event
// stream holds exactly the committed changes, once each, in revision order.
package outboxtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/pgstore"
)

// WriteOnce does one random write to the resource name; failures (name
// taken, not found, injected rollbacks) are part of the test.
func WriteOnce(ctx context.Context, s *pgstore.Store, name string, rng func(int) int) {
	r, err := s.GetResource(ctx, pgstore.ResourceKey{ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: name})
	if err != nil {
		var fins []string
		if rng(2) == 0 {
			fins = []string{"example.com/hold"}
		}
		_, _ = s.CreateResource(ctx, pgstore.CreateResourceRequest{Resource: resource.Resource{
			Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
			Spec: json.RawMessage(fmt.Sprintf(`{"n":%d}`, rng(1000))), Finalizers: fins}})
		return
	}
	switch rng(5) {
	case 0, 1:
		_, _ = s.UpdateResource(ctx, pgstore.UpdateResourceRequest{ID: r.ID, Spec: []byte(fmt.Sprintf(`{"n":%d}`, rng(1000)))})
	case 2:
		_, _ = s.UpdateResource(ctx, pgstore.UpdateResourceRequest{ID: r.ID, SetLabels: true, Labels: map[string]string{"v": fmt.Sprint(rng(9))}})
	case 3:
		_, _ = s.DeleteResource(ctx, r.ID, 0, false)
	case 4:
		_, _ = s.UpdateFinalizers(ctx, pgstore.UpdateFinalizersRequest{ID: r.ID, Remove: []string{"example.com/hold"}})
	}
}

// CheckStreamMatchesOutbox asserts that the stream holds exactly the outbox's
// committed events, each once, in strictly increasing revision order, and
// that each remaining resource's last event carries its current revision.
func CheckStreamMatchesOutbox(t testing.TB, ctx context.Context, pool *pgxpool.Pool, stream jetstream.Stream) {
	t.Helper()
	type ev struct {
		kind       string
		resourceID int64
	}
	committed := map[int64]ev{}
	rows, err := pool.Query(ctx, `SELECT revision, event_type, resource_id FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var rev, id int64
		var kind string
		if err := rows.Scan(&rev, &kind, &id); err != nil {
			t.Fatal(err)
		}
		committed[rev] = ev{kind, id}
	}
	rows.Close()

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
	rrows, err := pool.Query(ctx, `SELECT id, resource_version FROM resources`)
	if err != nil {
		t.Fatal(err)
	}
	defer rrows.Close()
	for rrows.Next() {
		var id, rv int64
		if err := rrows.Scan(&id, &rv); err != nil {
			t.Fatal(err)
		}
		if lastByResource[id] != rv {
			t.Fatalf("resource %d is at revision %d, its last event is %d", id, rv, lastByResource[id])
		}
	}
}
