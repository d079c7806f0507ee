package storetest

// The outbox relay (services/store/outbox) on the backend's EventLog:
// moved here from the relay's own tests, so that every backend runs them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/outbox/outboxtest"
	"github.com/no8s/no8s/services/store/storage"
)

// relayEnv is a fresh backend with a Widget type, an embedded JetStream and
// a relay that can be run until it has published everything.
type relayEnv struct {
	t   *testing.T
	db  storage.Backend
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger
	// chaos turns on the delays and rollbacks of the backend's
	// before-commit hook, when the test gave one.
	chaos *atomic.Bool
}

// newRelayEnv opens a backend with o (its hooks run only while chaos is
// on) and creates the Widget type.
func newRelayEnv(t *testing.T, open Opener, o storage.Options) *relayEnv {
	ctx := t.Context()
	chaos := &atomic.Bool{}
	if before := o.BeforeCommit; before != nil {
		o.BeforeCommit = func(ctx context.Context) error {
			if !chaos.Load() {
				return nil
			}
			return before(ctx)
		}
	}
	db := open(t, o)
	nc := testenv.Connect(t, testenv.NATS(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Store.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	return &relayEnv{t: t, db: db, nc: nc, js: js, log: slog.New(slog.NewTextHandler(io.Discard, nil)), chaos: chaos}
}

func (e *relayEnv) write(n int) {
	for i := range n {
		outboxtest.WriteOnce(e.t.Context(), e.db.Store, fmt.Sprintf("w-%d", i%7), func(k int) int { return (i * 7) % k })
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
	e.waitPublished(20 * time.Second)
}

// waitPublished waits until the cursor reaches the newest revision.
func (e *relayEnv) waitPublished(d time.Duration) {
	e.t.Helper()
	eventually(e.t, d, "relay publishes everything", func(ctx context.Context) bool {
		st, err := e.db.Log.State(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		return st.Cursor >= st.Revision
	})
}

func (e *relayEnv) stream() jetstream.Stream {
	s, err := e.js.Stream(e.t.Context(), eventstream.StreamName)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// testRelayRepublishesALostTail: the broker acknowledged events and lost
// them (it syncs to disk only every two minutes by default). The stream is
// rebuilt here holding only its first half; the next relay republishes the
// rest from the outbox, each once, in order.
func testRelayRepublishesALostTail(t *testing.T, open Opener) {
	e := newRelayEnv(t, open, storage.Options{})
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

// testRelayRebasesWhenTheOutboxNoLongerHoldsTheLostTail: as above, but the
// outbox rows the stream lost were pruned: the relay cannot fill the gap, so
// it empties the stream and bases it at the pruned revision; resumes before
// it are refused (the watch's rule) and everything after it is published.
func testRelayRebasesWhenTheOutboxNoLongerHoldsTheLostTail(t *testing.T, open Opener) {
	e := newRelayEnv(t, open, storage.Options{})
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
	// Prune every published row, as a relay past retention does.
	pruned := e.pruneAll()
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

var errInjected = errors.New("injected rollback")

// testRelayPublishesExactlyTheCommittedChanges runs 16 writers whose
// transactions sleep at random and roll back one time in five, while relays
// are stopped and started at random moments (two at a time for a while).
// Afterwards the stream must hold exactly the committed changes, each once,
// in revision order.
func testRelayPublishesExactlyTheCommittedChanges(t *testing.T, open Opener) {
	ctx := t.Context()
	var mu sync.Mutex
	var current *outbox.Relay
	hint := func() {
		mu.Lock()
		r := current
		mu.Unlock()
		if r != nil {
			r.Hint()
		}
	}
	rng := func(n int) int { return rand.IntN(n) }
	e := newRelayEnv(t, open, storage.Options{AfterCommit: hint, BeforeCommit: func(ctx context.Context) error {
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
	e.chaos.Store(true)
	store, nc, js, log := e.db.Store, e.nc, e.js, e.log
	stream, err := eventstream.Ensure(ctx, js, eventstream.DefaultStreamConfig(), eventstream.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := outbox.Config{BatchSize: 64, PollInterval: 20 * time.Millisecond, LeaderRetry: 20 * time.Millisecond}

	relays := map[int]context.CancelFunc{}
	var relayWG sync.WaitGroup
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

	e.waitPublished(30 * time.Second)
	mu.Lock()
	for _, cancel := range relays {
		cancel()
	}
	mu.Unlock()
	relayWG.Wait()

	outboxtest.CheckStreamMatchesOutbox(t, ctx, e.db, stream)
}

// pruneAll deletes every published outbox row under a relay's lock, as a
// relay past its retention does, and returns the pruned revision.
func (e *relayEnv) pruneAll() int64 {
	e.t.Helper()
	ctx := e.t.Context()
	lock, epoch, cursor := leadRelay(e.t, e.db.Log)
	defer lock.Release()
	n, err := e.db.Log.Prune(ctx, epoch, cursor, 0)
	if err != nil || n == 0 {
		e.t.Fatalf("prune: %d rows, %v", n, err)
	}
	st, err := e.db.Log.State(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if st.Pruned != cursor || countEvents(e.t, e.db.Log) != 0 {
		e.t.Fatalf("pruned up to %d with the cursor at %d, %d rows left", st.Pruned, cursor, countEvents(e.t, e.db.Log))
	}
	return st.Pruned
}

// testRelayReportsARowCommittedBelowItsCursor: a row that shows up below
// the cursor after the relay passed its revision as absent (what a wrong
// settled revision would let happen: its event is never published) is
// reported at ERROR with its revision and counted by Late. The EventLog
// here hides the row from the relay's first read of it, as if it had not
// committed yet.
func testRelayReportsARowCommittedBelowItsCursor(t *testing.T, open Opener) {
	ctx := t.Context()
	e := newRelayEnv(t, open, storage.Options{})
	e.write(20)
	st, err := e.db.Log.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := e.db.Log.ReadOutbox(ctx, 0, st.Revision, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 3 {
		t.Fatalf("only %d events written", len(rows))
	}
	hidden := rows[len(rows)/2].Revision
	el := &hidingLog{EventLog: e.db.Log, hide: hidden}
	var logs testenv.LogBuffer
	r := outbox.New(el, e.nc, e.js, eventstream.DefaultStreamConfig(),
		outbox.Config{PollInterval: 10 * time.Millisecond, LeaderRetry: 20 * time.Millisecond, GapCheckAfter: 50 * time.Millisecond},
		slog.New(slog.NewTextHandler(&logs, nil)))
	reg := prometheus.NewRegistry()
	r.RegisterMetrics(reg)
	if n := lateCounter(t, reg); n != 0 {
		t.Fatalf("no8s_store_relay_late_total is %v before the relay ran", n)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("relay: %v", err)
		}
	}()
	eventually(t, 20*time.Second, "the relay reports the row that showed up below its cursor", func(context.Context) bool {
		return r.Late() == 1
	})
	// The scraped counter says what Late says.
	if n := lateCounter(t, reg); n != 1 {
		t.Fatalf("no8s_store_relay_late_total is %v, Late() 1", n)
	}
	if !el.hid.Load() {
		t.Fatal("the relay never read the hidden row's revision")
	}
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "were not published") || !strings.Contains(out, fmt.Sprint(hidden)) {
		t.Fatalf("no ERROR naming revision %d in the relay's log:\n%s", hidden, out)
	}
	// Every other row was published, the hidden one was not.
	if r.Cursor() < rows[len(rows)-1].Revision || r.Published() != int64(len(rows)-1) {
		t.Fatalf("cursor %d, %d published; want past %d with %d published", r.Cursor(), r.Published(), rows[len(rows)-1].Revision, len(rows)-1)
	}
}

// lateCounter gathers reg and returns no8s_store_relay_late_total.
func lateCounter(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "no8s_store_relay_late_total" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no no8s_store_relay_late_total gathered")
	return 0
}

// hidingLog is an EventLog that leaves the row of revision hide out of the
// first ReadOutbox that would return it.
type hidingLog struct {
	storage.EventLog
	hide int64
	hid  atomic.Bool
}

func (h *hidingLog) ReadOutbox(ctx context.Context, after, upTo int64, limit int) ([]storage.OutboxRow, error) {
	rows, err := h.EventLog.ReadOutbox(ctx, after, upTo, limit)
	if err != nil || h.hid.Load() {
		return rows, err
	}
	for i, x := range rows {
		if x.Revision == h.hide {
			h.hid.Store(true)
			return append(rows[:i:i], rows[i+1:]...), nil
		}
	}
	return rows, nil
}
