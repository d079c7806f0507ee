package storetest

// The EventLog's contract: what the outbox relay relies on.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/storage"
)

// committed is what a successful write answered: one event of that type
// about that resource at that revision.
type committed struct {
	event string
	id    int64
}

// testOutboxExactlyOnceInOrder is HARD-PARTS 1 at the EventLog: 8 writers,
// each on resources of its own, write while their transactions sleep at
// random and one in five rolls back (the before-commit hook), and a reader
// follows the log as the relay does (SettledRevision, ReadOutbox,
// AdvanceCursor) while they run. The reader must see every committed change
// exactly once, in strictly increasing revision order, and no rolled-back
// one; every write's answer carries its event's revision, strictly above
// the resource's previous one.
func testOutboxExactlyOnceInOrder(t *testing.T, open Opener) {
	ctx := t.Context()
	chaos := make(chan struct{})
	b := open(t, storage.Options{BeforeCommit: func(ctx context.Context) error {
		select {
		case <-chaos:
		default:
			return nil
		}
		select {
		case <-time.After(time.Duration(rand.IntN(3000)) * time.Microsecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		if rand.IntN(5) == 0 {
			return errInjected
		}
		return nil
	}})
	s, el := b.Store, b.Log
	mustType(t, s, "Widget", "v1")
	close(chaos)

	var mu sync.Mutex
	want := map[int64]committed{}
	rolledBack := 0
	record := func(rev int64, c committed) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := want[rev]; ok {
			t.Errorf("revision %d answered twice: %+v and %+v", rev, prev, c)
		}
		want[rev] = c
	}

	// The reader, as a relay.
	lock, epoch, cursor := leadRelay(t, el)
	defer lock.Release()
	var seen []storage.OutboxRow
	readerDone := make(chan error, 1)
	writersDone := make(chan struct{})
	go func() {
		readerDone <- func() error {
			for {
				next, err := el.SettledRevision(ctx, cursor)
				if err != nil {
					return err
				}
				if next == 0 {
					select {
					case <-writersDone:
						if st, err := el.State(ctx); err != nil || st.Revision <= cursor {
							return err
						}
					case <-time.After(time.Millisecond):
					}
					continue
				}
				for next > cursor {
					rows, err := el.ReadOutbox(ctx, cursor, next, 50)
					if err != nil {
						return err
					}
					moved, last := next, int64(0)
					if len(rows) == 50 {
						moved = rows[len(rows)-1].Revision
					}
					if len(rows) > 0 {
						last = rows[len(rows)-1].Revision
					}
					seen = append(seen, rows...)
					if err := el.AdvanceCursor(ctx, epoch, moved, last); err != nil {
						return err
					}
					cursor = moved
				}
			}
		}()
	}()

	const writers, ops = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			type state struct {
				r        *resource.Resource
				deleting bool
			}
			mine := map[string]*state{}
			for i := range ops {
				name := fmt.Sprintf("w%d-%d", w, rand.IntN(3))
				st := mine[name]
				var (
					out   *resource.Resource
					event string
					err   error
				)
				switch {
				case st == nil:
					event = envelope.Created
					out, err = s.CreateResource(ctx, storage.CreateResourceRequest{Resource: resource.Resource{
						Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1",
						Spec: fmt.Appendf(nil, `{"n":%d}`, i), Finalizers: []string{"example.com/hold"}}})
				case st.deleting:
					event = envelope.Purged
					var res *storage.DeleteResult
					if res, err = s.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{ID: st.r.ID, Remove: []string{"example.com/hold"}}); err == nil {
						if !res.Purged {
							t.Errorf("%s: the last finalizer went, not purged", name)
						}
						out = res.Resource
					}
				default:
					switch rand.IntN(4) {
					case 0:
						event = envelope.Deleted
						var res *storage.DeleteResult
						if res, err = s.DeleteResource(ctx, storage.DeleteResourceRequest{ID: st.r.ID, ExpectedResourceVersion: st.r.ResourceVersion}); err == nil {
							out = res.Resource
						}
					case 1:
						event = envelope.Modified
						out, err = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: st.r.ID, SetLabels: true,
							Labels: map[string]string{"op": fmt.Sprint(i)}, ExpectedResourceVersion: st.r.ResourceVersion})
					default:
						event = envelope.Modified
						out, err = s.UpdateResource(ctx, storage.UpdateResourceRequest{ID: st.r.ID, Spec: fmt.Appendf(nil, `{"n":%d}`, i),
							ExpectedResourceVersion: st.r.ResourceVersion})
					}
				}
				if errors.Is(err, errInjected) {
					mu.Lock()
					rolledBack++
					mu.Unlock()
					continue
				}
				if err != nil {
					t.Errorf("%s: %s: %v", name, event, err)
					continue
				}
				if st != nil && out.ResourceVersion <= st.r.ResourceVersion {
					t.Errorf("%s: %s at revision %d, not above the previous %d", name, event, out.ResourceVersion, st.r.ResourceVersion)
				}
				record(out.ResourceVersion, committed{event: event, id: out.ID})
				switch event {
				case envelope.Created:
					mine[name] = &state{r: out}
				case envelope.Purged:
					delete(mine, name)
				default:
					st.r, st.deleting = out, st.deleting || event == envelope.Deleted
				}
			}
		}()
	}
	wg.Wait()
	close(writersDone)
	if err := <-readerDone; err != nil {
		t.Fatalf("reader: %v", err)
	}
	if rolledBack == 0 || len(want) < 100 {
		t.Fatalf("%d changes committed, %d rolled back: the test exercised too little", len(want), rolledBack)
	}

	var prev int64
	got := map[int64]bool{}
	for _, row := range seen {
		if row.Revision <= prev {
			t.Fatalf("revision %d read after %d: out of order or repeated", row.Revision, prev)
		}
		prev = row.Revision
		c, ok := want[row.Revision]
		if !ok {
			t.Fatalf("revision %d (%s of resource %d) was never answered to a writer: a rolled-back change?", row.Revision, row.EventType, row.ResourceID)
		}
		if c.event != row.EventType || c.id != row.ResourceID {
			t.Fatalf("revision %d: the log has %s of %d, the writer was answered %s of %d", row.Revision, row.EventType, row.ResourceID, c.event, c.id)
		}
		ev, err := eventstream.Decode(row.Payload)
		if err != nil || ev.Revision != row.Revision || ev.Type != row.EventType || ev.ResourceID != row.ResourceID {
			t.Fatalf("revision %d: payload holds %+v (%v)", row.Revision, ev, err)
		}
		got[row.Revision] = true
	}
	for rev, c := range want {
		if !got[rev] {
			t.Errorf("committed revision %d (%s of resource %d) never read", rev, c.event, c.id)
		}
	}
	if all := outboxRows(t, el); len(all) != len(seen) {
		t.Errorf("the log holds %d rows, the reader read %d", len(all), len(seen))
	}
	t.Logf("%d committed changes read once each in order; %d rolled back", len(seen), rolledBack)
}

// testRelayLockAndEpochFencing: one holder of the relay lock at a time;
// each leadership bumps the epoch; the cursor moves only forward under the
// current epoch, and a deposed leader's cursor moves and prunes are
// refused; pruning records the pruned revision.
func testRelayLockAndEpochFencing(t *testing.T, open Opener) {
	ctx := t.Context()
	s, el := newStore(t, open)
	mustType(t, s, "Widget", "v1")
	var revs []int64
	for i := range 4 {
		revs = append(revs, mustCreate(t, s, fmt.Sprintf("r%d", i)).ResourceVersion)
	}

	first, err := el.LockRelay(ctx)
	if err != nil || first == nil {
		t.Fatalf("first lock: %v %v", first, err)
	}
	if again, err := el.LockRelay(ctx); err != nil || again != nil {
		t.Fatalf("a second holder got the lock: %v %v", again, err)
	}
	e1, c1, err := first.Lead(ctx)
	if err != nil || e1 < 1 || c1 != 0 {
		t.Fatalf("first leadership: epoch %d cursor %d %v", e1, c1, err)
	}
	if next, err := el.SettledRevision(ctx, 0); err != nil || next < revs[3] {
		t.Fatalf("settled revision %d (%v), want at least %d", next, err, revs[3])
	}
	if next, err := el.SettledRevision(ctx, lastRevision(t, el)); err != nil || next != 0 {
		t.Fatalf("settled revision after the newest: %d %v, want 0", next, err)
	}
	rows, err := el.ReadOutbox(ctx, revs[0], revs[3], 2)
	if err != nil || len(rows) != 2 || rows[0].Revision != revs[1] || rows[1].Revision != revs[2] {
		t.Fatalf("read (%d, %d] limit 2: %+v %v", revs[0], revs[3], rows, err)
	}
	if err := el.AdvanceCursor(ctx, e1, revs[1], revs[1]); err != nil {
		t.Fatal(err)
	}
	if err := el.AdvanceCursor(ctx, e1, revs[0], 0); err != nil { // backwards: nothing moves
		t.Fatal(err)
	}
	if st, err := el.State(ctx); err != nil || st.Cursor != revs[1] || st.LastEvent != revs[1] || !st.LastEventKnown || st.StoreID == "" {
		t.Fatalf("state after advance: %+v %v", st, err)
	}

	first.Release()
	second, err := el.LockRelay(ctx)
	if err != nil || second == nil {
		t.Fatalf("lock after release: %v %v", second, err)
	}
	defer second.Release()
	e2, c2, err := second.Lead(ctx)
	if err != nil || e2 != e1+1 || c2 != revs[1] {
		t.Fatalf("second leadership: epoch %d cursor %d %v, want %d %d", e2, c2, err, e1+1, revs[1])
	}
	// The deposed leader is refused.
	if err := el.AdvanceCursor(ctx, e1, revs[3], revs[3]); !errors.Is(err, storage.ErrLostLeadership) {
		t.Fatalf("deposed advance: %v", err)
	}
	if err := el.SetCursor(ctx, e1, revs[3], revs[3]); !errors.Is(err, storage.ErrLostLeadership) {
		t.Fatalf("deposed set: %v", err)
	}
	if n, err := el.Prune(ctx, e1, revs[1], 0); err != nil || n != 0 {
		t.Fatalf("deposed prune deleted %d rows (%v)", n, err)
	}
	// The leader prunes what was published, and knows it.
	if n, err := el.Prune(ctx, e2, revs[1], 0); err != nil || n != 2 {
		t.Fatalf("prune: %d rows %v, want 2", n, err)
	}
	st, err := el.State(ctx)
	if err != nil || st.Pruned != revs[1] || st.Cursor != revs[1] {
		t.Fatalf("state after prune: %+v %v", st, err)
	}
	if _, ok, err := el.Payload(ctx, revs[0]); err != nil || ok {
		t.Fatalf("pruned revision %d still readable: %v %v", revs[0], ok, err)
	}
	rows, err = el.ReadOutbox(ctx, 0, math.MaxInt64, math.MaxInt32)
	if err != nil || len(rows) != 2 || rows[0].Revision != revs[2] {
		t.Fatalf("outbox after prune: %+v %v", rows, err)
	}
	if p, ok, err := el.Payload(ctx, revs[2]); err != nil || !ok || !slices.Equal(p, rows[0].Payload) {
		t.Fatalf("payload of %d: %v %v", revs[2], ok, err)
	}
	// A relay that republishes sets the cursor back.
	if err := el.SetCursor(ctx, e2, revs[1]-1, revs[1]-1); err != nil {
		t.Fatal(err)
	}
	if st, err := el.State(ctx); err != nil || st.Cursor != revs[1]-1 || st.LastEvent != revs[1]-1 {
		t.Fatalf("state after set: %+v %v", st, err)
	}
}

// testIdentityAndRevisionBump: the database has one identity; a stream
// rebuild (outbox.Rebuild, the lost-events issue) moves every revision to B
// = max(database, stream) + margin, marks everything up to B published and
// pruned, empties the outbox up to B, and every later change takes a
// revision above B. It is refused while a relay holds the lock.
func testIdentityAndRevisionBump(t *testing.T, open Opener) {
	ctx := t.Context()
	e := newRelayEnv(t, open, storage.Options{})
	e.write(30)
	e.drain()
	before, err := e.db.Log.State(ctx)
	if err != nil || before.StoreID == "" || before.Revision == 0 || before.Cursor != before.Revision {
		t.Fatalf("state before: %+v %v", before, err)
	}

	held, err := e.db.Log.LockRelay(ctx)
	if err != nil || held == nil {
		t.Fatalf("relay lock: %v %v", held, err)
	}
	if _, err := outbox.Rebuild(ctx, e.db.Log, e.js, eventstream.DefaultStreamConfig(), 100, e.log); err == nil {
		t.Fatal("rebuild ran beside a relay")
	}
	held.Release()

	const margin = 1000
	bump, err := outbox.Rebuild(ctx, e.db.Log, e.js, eventstream.DefaultStreamConfig(), margin, e.log)
	if err != nil {
		t.Fatal(err)
	}
	if bump < before.Revision+margin {
		t.Fatalf("bumped to %d, want at least %d", bump, before.Revision+margin)
	}
	after, err := e.db.Log.State(ctx)
	if err != nil || after.StoreID != before.StoreID || after.Revision != bump || after.Cursor != bump ||
		after.LastEvent != bump || after.Pruned != bump {
		t.Fatalf("state after the bump to %d: %+v %v", bump, after, err)
	}
	if n := countEvents(t, e.db.Log); n != 0 {
		t.Fatalf("%d outbox rows at or below the bump remain", n)
	}
	r := mustCreate(t, e.db.Store, "after-bump")
	if r.ResourceVersion <= bump {
		t.Fatalf("a write after the bump took revision %d, not above %d", r.ResourceVersion, bump)
	}
	if err := outbox.Prepare(ctx, e.db.Log, e.js, eventstream.DefaultStreamConfig(), false, margin, e.log); err != nil {
		t.Fatalf("the rebuilt stream does not belong to the database: %v", err)
	}
	e.write(20)
	e.drain()
	for _, row := range outboxRows(t, e.db.Log) {
		if row.Revision <= bump {
			t.Fatalf("outbox row %d at or below the bump %d", row.Revision, bump)
		}
	}
}
