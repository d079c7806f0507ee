package pgstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
)

// TestGroupCommitKeepsEachWritesOutcome drives creates (two writers per
// name), lease acquisitions and completions (eight workers on ten
// resources) at once, so that they share transactions, and checks that each
// write answered as it would alone: one create per name and NameTaken for
// the other; leases exclusive with growing epochs; one history row and one
// event per successful completion; no event for a refused write.
func TestGroupCommitKeepsEachWritesOutcome(t *testing.T) {
	pool := newPool(t)
	ctx := t.Context()
	s := pgstore.New(pool, storage.Options{})
	typ, err := s.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string) (*resource.Resource, error) {
		return s.CreateResource(ctx, storage.CreateResourceRequest{SchemaRevision: typ.ResourceVersion, Resource: resource.Resource{
			Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: []byte(`{}`), Labels: map[string]string{"a": "b"}}})
	}
	var ids []int64
	for i := range 10 {
		r, err := create(fmt.Sprintf("busy-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}

	const names, workers, rounds = 200, 8, 60
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := map[string]int{}
	taken := map[string]int{}
	completions := map[int64]int{}
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		t.Errorf(format, args...)
	}
	for w := range 2 {
		wg.Go(func() {
			for i := range names {
				name := fmt.Sprintf("n-%d", (i+w*7)%names)
				_, err := create(name)
				mu.Lock()
				switch {
				case err == nil:
					created[name]++
				case errors.Is(err, storage.ErrNameTaken):
					taken[name]++
				default:
					t.Errorf("create %s: %v", name, err)
				}
				mu.Unlock()
			}
		})
	}
	// Writes refused on their own rules, at the same time: a lease of a
	// resource that does not exist, a create of an unknown type, a create
	// against an old schema revision. They fail alone; the writes batched
	// with them go on.
	wg.Go(func() {
		for range rounds {
			if _, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: 999999, Holder: "w/x"}); !errors.Is(err, storage.ErrNotFound) {
				fail("lease of a missing resource: %v", err)
			}
			if _, err := s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
				Name: "x", ResourceTypeName: "Nope", ResourceTypeVersion: "v1", Spec: []byte(`{}`)}}); err == nil {
				fail("create of an unknown type succeeded")
			}
			if _, err := s.CreateResource(ctx, storage.CreateResourceRequest{SchemaRevision: typ.ResourceVersion - 1, Resource: resource.Resource{
				Name: "stale", ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: []byte(`{}`)}}); !errors.Is(err, storage.ErrSchemaChanged) {
				fail("create against an old schema: %v", err)
			}
		}
	})
	for w := range workers {
		wg.Go(func() {
			holder := fmt.Sprintf("w/%d", w)
			for i := range rounds {
				id := ids[(i*3+w)%len(ids)]
				l, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: id, Holder: holder, Lease: time.Minute})
				if errors.Is(err, storage.ErrLeaseHeld) {
					continue
				}
				if err != nil {
					fail("acquire %d: %v", id, err)
					return
				}
				if l.Resource.Status != resource.StatusReconciling {
					fail("resource %d acquired as %s", id, l.Resource.Status)
				}
				now := time.Now()
				if _, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: id, LeaseEpoch: l.Epoch,
					Outcome: lifecycle.OutcomeSuccess, History: storage.HistoryEntry{StartedAt: &now}}); err != nil {
					fail("complete %d epoch %d: %v", id, l.Epoch, err)
					return
				}
				// A second completion of the same lease is refused.
				if _, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{ResourceID: id, LeaseEpoch: l.Epoch,
					Outcome: lifecycle.OutcomeSuccess}); !errors.Is(err, storage.ErrStaleEpoch) {
					fail("second completion of %d epoch %d: %v", id, l.Epoch, err)
				}
				mu.Lock()
				completions[id]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	shared, retried := pgstore.GroupStats(s)
	t.Logf("%d writes shared a transaction, %d of them ran again alone", shared, retried)
	if shared == 0 {
		t.Error("no two writes shared a transaction")
	}

	for i := range names {
		name := fmt.Sprintf("n-%d", i)
		if created[name] != 1 || taken[name] != 1 {
			t.Errorf("%s: created %d times, refused %d times", name, created[name], taken[name])
		}
	}
	total := 0
	for _, id := range ids {
		h, err := s.ListHistory(ctx, storage.ListHistoryRequest{ResourceID: id, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		total += len(h)
		if len(h) != completions[id] {
			t.Errorf("resource %d: %d history rows, %d completions", id, len(h), completions[id])
		}
		for i := 1; i < len(h); i++ { // newest first
			if h[i].LeaseEpoch >= h[i-1].LeaseEpoch {
				t.Errorf("resource %d: epochs %d then %d", id, h[i].LeaseEpoch, h[i-1].LeaseEpoch)
			}
		}
	}
	if total == 0 {
		t.Fatal("no completion")
	}
	// Events: 10 + 200 creates, and per completion one RECONCILED plus
	// one MODIFIED for its lease (ready → reconciling, or pending before
	// the first).
	var events int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if want := 10 + names + 2*total; events != want {
		t.Errorf("%d events, want %d", events, want)
	}
}
