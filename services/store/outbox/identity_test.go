package outbox_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/outbox/outboxtest"
	"github.com/no8s/no8s/services/store/pgoutbox"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
)

// relayEnv is a migrated database, an embedded JetStream and a relay that
// can be run until it has published everything.
type relayEnv struct {
	t     *testing.T
	pool  *pgxpool.Pool
	db    storage.Backend
	nc    *nats.Conn
	js    jetstream.JetStream
	store *pgstore.Store
	log   *slog.Logger
}

func newRelayEnv(t *testing.T) *relayEnv {
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool, err := pgxpool.New(ctx, testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := migrate.Up(ctx, pool, log); err != nil {
		t.Fatal(err)
	}
	nc := testenv.Connect(t, testenv.NATS(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := pgstore.New(pool, storage.Options{})
	if _, err := s.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	return &relayEnv{t: t, pool: pool, db: storage.Backend{Store: s, Log: pgoutbox.New(pool), Name: "postgres", Close: func() {}}, nc: nc, js: js, store: s, log: log}
}

func (e *relayEnv) write(n int) {
	for i := range n {
		outboxtest.WriteOnce(e.t.Context(), e.store, fmt.Sprintf("w-%d", i%7), func(k int) int { return (i * 7) % k })
	}
}

// drain runs a relay until the cursor reaches the newest revision.
func (e *relayEnv) drain() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	r := outbox.New(e.db.Log, e.nc, e.js, eventstream.DefaultStreamConfig(), outbox.Config{PollInterval: 10 * time.Millisecond, LeaderRetry: 20 * time.Millisecond}, e.log)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Fatalf("relay: %v", err)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var last, published int64
		if err := e.pool.QueryRow(e.t.Context(), `SELECT s.last_value, r.published_revision FROM revision_seq s, relay_state r`).Scan(&last, &published); err != nil {
			e.t.Fatal(err)
		}
		if published >= last {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("relay stuck at %d of %d", published, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *relayEnv) stream() jetstream.Stream {
	s, err := e.js.Stream(e.t.Context(), eventstream.StreamName)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// TestRelayRepublishesALostTail: the broker acknowledged events and lost
// them (it syncs to disk only every two minutes by default). The stream is
// rebuilt here holding only its first half; the next relay republishes the
// rest from the outbox, each once, in order.
func TestRelayRepublishesALostTail(t *testing.T) {
	e := newRelayEnv(t)
	e.write(200)
	e.drain()
	old := e.stream()
	info, err := old.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var kept []*jetstream.RawStreamMsg
	for seq := uint64(1); seq <= info.State.LastSeq/2; seq++ {
		m, err := old.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, m)
	}
	// The same stream, identity included, holding only the first half.
	if err := e.js.DeleteStream(t.Context(), eventstream.StreamName); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(t.Context(), info.Config); err != nil {
		t.Fatal(err)
	}
	for _, m := range kept {
		if _, err := e.js.PublishMsg(t.Context(), &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}); err != nil {
			t.Fatal(err)
		}
	}
	e.write(250)
	e.drain()
	outboxtest.CheckStreamMatchesOutbox(t, t.Context(), e.db, e.stream())
}

// TestRelayRebasesWhenTheOutboxNoLongerHoldsTheLostTail: as above, but the
// outbox rows the stream lost were pruned: the relay cannot fill the gap, so
// it empties the stream and bases it at the pruned revision; resumes before
// it are refused (the watch's rule) and everything after it is published.
func TestRelayRebasesWhenTheOutboxNoLongerHoldsTheLostTail(t *testing.T) {
	e := newRelayEnv(t)
	e.write(40)
	e.drain()
	old := e.stream()
	info, err := old.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	first, err := old.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var pruned int64
	if err := e.pool.QueryRow(t.Context(), `WITH d AS (DELETE FROM outbox RETURNING revision)
		UPDATE relay_state SET pruned_revision = (SELECT max(revision) FROM d) RETURNING pruned_revision`).Scan(&pruned); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteStream(t.Context(), eventstream.StreamName); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(t.Context(), info.Config); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.PublishMsg(t.Context(), &nats.Msg{Subject: first.Subject, Header: first.Header, Data: first.Data}); err != nil {
		t.Fatal(err)
	}
	e.write(250)
	e.drain()
	s := e.stream()
	si, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	id, ok := eventstream.IdentityOf(si.Config)
	if !ok || id.Base != pruned {
		t.Fatalf("stream identity %+v (ok %v), want base %d", id, ok, pruned)
	}
	outboxtest.CheckStreamMatchesOutbox(t, t.Context(), e.db, s)
}
