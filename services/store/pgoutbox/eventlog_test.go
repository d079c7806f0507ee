package pgoutbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store/pgoutbox"
)

// TestSettledRevisionIsSettled: when SettledRevision returns V, every
// revision up to V that will ever commit has committed (the relay publishes
// up to V and moves its cursor there), and V is no later than the last
// revision taken. Writers take revisions as every store write does (the
// transaction id first) and record them, as fast as they can, while readers
// check both after each call. make bench's reconcile scenario once saw the
// relay move its cursor past revisions that committed after it settled.
func TestSettledRevisionIsSettled(t *testing.T) {
	ctx := t.Context()
	pool := testenv.MigratedPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE settle_probe (revision bigint PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	var before int64 // the migrations' revisions
	if err := pool.QueryRow(ctx, `SELECT coalesce(pg_sequence_last_value('revision_seq'), 0)`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	log := pgoutbox.New(pool)

	// More connections than cores: a reader preempted between reading the
	// sequence's page and its value is what hits the race.
	const writers, readers = 12, 4
	wctx, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	var wg sync.WaitGroup
	var taken, reads, bad atomic.Int64
	for range writers {
		wg.Go(func() {
			for wctx.Err() == nil {
				// As every store write does: the transaction id first, then
				// the revision (pgstore's takeRevisionsSQL).
				if _, err := pool.Exec(ctx, `WITH x AS MATERIALIZED (SELECT pg_current_xact_id())
					INSERT INTO settle_probe SELECT nextval('revision_seq') FROM x, generate_series(1, 4)`); err != nil {
					t.Error(err)
					return
				}
				taken.Add(4)
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for wctx.Err() == nil {
				v, err := log.SettledRevision(ctx, 0)
				if err != nil {
					t.Error(err)
					return
				}
				// The sequence read with its lock, after: V cannot be past it.
				var now, recorded int64
				if err := pool.QueryRow(ctx, `SELECT coalesce(pg_sequence_last_value('revision_seq'), 0),
					(SELECT count(*) FROM settle_probe WHERE revision > $1 AND revision <= $2)`, before, v).Scan(&now, &recorded); err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				if v > now && bad.Add(1) <= 5 {
					t.Errorf("settled revision %d, past the last revision taken (%d)", v, now)
				}
				if want := v - before; recorded != want && bad.Add(1) <= 5 {
					t.Errorf("settled revision %d, but only %d of the %d revisions up to it have committed", v, recorded, want)
				}
			}
		})
	}
	wg.Wait()
	if taken.Load() < 1000 || reads.Load() < 100 {
		t.Fatalf("only %d revisions taken and %d reads: the test exercised too little", taken.Load(), reads.Load())
	}
	t.Logf("%d revisions taken by %d writers, %d settled reads by %d readers; %d wrong", taken.Load(), writers, reads.Load(), readers, bad.Load())
}
