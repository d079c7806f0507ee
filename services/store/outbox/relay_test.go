package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/outbox/outboxtest"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
)

var errInjected = errors.New("injected rollback")

// TestRelayPublishesExactlyTheCommittedChanges runs 16 writers whose
// transactions sleep at random and roll back one time in five, while relays
// are stopped and started at random moments (two at a time for a while).
// Afterwards the stream must hold exactly the committed changes, each once,
// in revision order.
func TestRelayPublishesExactlyTheCommittedChanges(t *testing.T) {
	ctx := t.Context()
	e := newRelayEnv(t)
	pool, nc, js, log := e.pool, e.nc, e.js, e.log
	stream, err := eventstream.Ensure(ctx, js, eventstream.DefaultStreamConfig(), eventstream.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := outbox.Config{BatchSize: 64, PollInterval: 20 * time.Millisecond, LeaderRetry: 20 * time.Millisecond}

	var mu sync.Mutex
	relays := map[int]context.CancelFunc{}
	var relayWG sync.WaitGroup
	var current *outbox.Relay
	startRelay := func(id int) {
		rctx, cancel := context.WithCancel(ctx)
		r := outbox.New(e.db.Log, nc, js, eventstream.DefaultStreamConfig(), cfg, log)
		mu.Lock()
		relays[id] = cancel
		current = r
		mu.Unlock()
		relayWG.Add(1)
		go func() {
			defer relayWG.Done()
			_ = r.Run(rctx)
		}()
	}
	hint := func() {
		mu.Lock()
		r := current
		mu.Unlock()
		if r != nil {
			r.Hint()
		}
	}
	rng := func(n int) int { return rand.IntN(n) }
	store := pgstore.New(pool, storage.Options{AfterCommit: hint, BeforeCommit: func(ctx context.Context) error {
		select {
		case <-time.After(time.Duration(rng(4000)) * time.Microsecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		if rng(5) == 0 {
			return errInjected
		}
		return nil
	}})

	startRelay(0)
	// A chaos loop stops and starts relays while the writers run.
	writersDone := make(chan struct{})
	go func() {
		next := 1
		for {
			select {
			case <-writersDone:
				return
			case <-time.After(time.Duration(20+rng(80)) * time.Millisecond):
			}
			mu.Lock()
			for id, cancel := range relays {
				if rng(2) == 0 {
					cancel()
					delete(relays, id)
				}
			}
			n := len(relays)
			mu.Unlock()
			if n < 2 {
				startRelay(next)
				next++
			}
		}
	}()

	const writers, opsPerWriter = 16, 60
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < opsPerWriter; i++ {
				name := fmt.Sprintf("w%d-%d", w, rng(8))
				outboxtest.WriteOnce(ctx, store, name, rng)
			}
		}()
	}
	wg.Wait()
	close(writersDone)
	// Leave one relay running to drain.
	mu.Lock()
	if len(relays) == 0 {
		mu.Unlock()
		startRelay(1000)
	} else {
		mu.Unlock()
	}
	hint()

	var last int64
	if err := pool.QueryRow(ctx, `SELECT last_value FROM revision_seq`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var published int64
		if err := pool.QueryRow(ctx, `SELECT published_revision FROM relay_state`).Scan(&published); err != nil {
			t.Fatal(err)
		}
		if published >= last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay stuck at %d, want %d", published, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	for _, cancel := range relays {
		cancel()
	}
	mu.Unlock()
	relayWG.Wait()

	outboxtest.CheckStreamMatchesOutbox(t, ctx, e.db, stream)
}
