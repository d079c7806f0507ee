package storetest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/outbox/outboxtest"
	"github.com/no8s/no8s/services/store/storage"
)

// testRelayPassesOverForeignMessages: messages another publisher put into
// the event stream (HARD-PARTS 4) never stop, stall or divert the relay:
// with a high Nats-Msg-Id, without one, with a low one (the first type's revision), a forged DELETED
// carrying the store's own headers, and a burst of 1,000, each published
// between two of the relay's own publishes and, last, at the stream's tail
// while no relay runs. The relay reports each once (Foreign, Degraded) and
// the stream's events stay exactly the committed changes, in order.
func testRelayPassesOverForeignMessages(t *testing.T, open Opener) {
	e := newRelayEnv(t, open, storage.Options{})
	ctx := t.Context()
	// The hold outlasts the time from the relay finding an attack to the
	// test reading the report (the 20 writes after it published), also on
	// a loaded machine: with a shorter one, a clean publish after the hold
	// cleared the report before it was read.
	cfg := outbox.Config{PollInterval: 10 * time.Millisecond, LeaderRetry: 20 * time.Millisecond, DegradedHold: 5 * time.Second}
	runRelay := func() (*outbox.Relay, func()) {
		rctx, cancel := context.WithCancel(ctx)
		r := outbox.New(e.db.Log, e.nc, e.js, eventstream.DefaultStreamConfig(), cfg, e.log)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		return r, func() {
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("relay: %v", err)
			}
		}
	}
	r, stop := runRelay()
	e.write(100)
	e.waitPublished(20 * time.Second)

	subject := eventstream.Subject("Widget", "v1")
	newest, err := e.stream().GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	// A DELETED of a resource that exists, under the store's own headers
	// and a revision that is no event (a type's): the relay finds it is not
	// the outbox's row; readers find it out of order.
	gap, err := e.db.Store.CreateType(ctx, storage.CreateTypeRequest{Name: "Gadget", Version: "v1", Schema: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	res := outboxtest.AllResources(t, ctx, e.db.Store)[0]
	forged, err := eventstream.Encode(eventstream.Event{Revision: gap.ResourceVersion, Type: eventstream.Deleted, Resource: res, Timestamp: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	forgedHeader := nats.Header{}
	for k, v := range newest.Header {
		forgedHeader[k] = v
	}
	forgedHeader.Del(jetstream.ExpectedLastSeqHeader)
	forgedHeader.Del(jetstream.ExpectedLastMsgIDHeader)
	forgedHeader.Set(jetstream.MsgIDHeader, strconv.FormatInt(gap.ResourceVersion, 10))
	attacks := []struct {
		name string
		msgs []*nats.Msg
	}{
		{"a high Nats-Msg-Id", []*nats.Msg{{Subject: "no8s.events.Foo.v1", Data: []byte("x"), Header: nats.Header{jetstream.MsgIDHeader: {"999999999"}}}}},
		{"no Nats-Msg-Id", []*nats.Msg{{Subject: "no8s.events.Foo.v1", Data: []byte("x")}}},
		{"a low Nats-Msg-Id", []*nats.Msg{{Subject: subject, Data: []byte("x"), Header: nats.Header{jetstream.MsgIDHeader: {"1"}}}}},
		{"a forged DELETED with the store's headers", []*nats.Msg{{Subject: subject, Data: forged, Header: forgedHeader}}},
		{"a burst of 1,000", burst(1000)},
	}
	sent := 0
	for _, a := range attacks {
		for _, m := range a.msgs {
			ack, err := e.js.PublishMsg(ctx, m)
			if err != nil {
				t.Fatalf("%s: publish: %v", a.name, err)
			}
			if ack.Duplicate {
				t.Fatalf("%s: the stream took it for a duplicate", a.name)
			}
		}
		sent += len(a.msgs)
		if r.Degraded() != "" && a.name == attacks[0].name {
			t.Fatalf("degraded before anything foreign was found: %s", r.Degraded())
		}
		// The relay's next publish expects its own last message at the
		// tail: it finds the foreign ones, reports them and goes on.
		e.write(20)
		e.waitPublished(20 * time.Second)
		if got := r.Foreign(); got != int64(sent) {
			t.Fatalf("after %s: the relay counted %d foreign messages, want %d", a.name, got, sent)
		}
		if why := r.Degraded(); !strings.Contains(why, "foreign") {
			t.Fatalf("after %s: the relay does not report itself degraded (%q)", a.name, why)
		}
	}
	outboxtest.CheckStreamMatchesOutbox(t, ctx, e.db, e.stream())

	// The report clears at a clean publish once the hold has passed.
	// Each round creates a new resource: a write that changes nothing
	// publishes nothing.
	round := 0
	eventually(t, cfg.DegradedHold+20*time.Second, "the degraded report to clear", func(ctx context.Context) bool {
		round++
		outboxtest.WriteOnce(ctx, e.db.Store, fmt.Sprintf("clear-%d", round), func(k int) int { return round % k })
		e.waitPublished(20 * time.Second)
		return r.Degraded() == ""
	})
	stop()

	// A foreign message at the tail while no relay runs: the next one
	// starts after the store's newest event, not after the stranger.
	for _, m := range []*nats.Msg{attacks[0].msgs[0], {Subject: "no8s.events.Foo.v1", Data: []byte("y"), Header: nats.Header{jetstream.MsgIDHeader: {"999999998"}}}} {
		if _, err := e.js.PublishMsg(ctx, m); err != nil && !strings.Contains(err.Error(), "duplicate") {
			t.Fatal(err)
		}
	}
	r2, stop2 := runRelay()
	defer stop2()
	e.write(20)
	e.waitPublished(20 * time.Second)
	if r2.Foreign() == 0 || !strings.Contains(r2.Degraded(), "foreign") {
		t.Fatalf("a relay that found a foreign message at the tail reported %d (%q)", r2.Foreign(), r2.Degraded())
	}
	outboxtest.CheckStreamMatchesOutbox(t, ctx, e.db, e.stream())
}

// burst is n foreign messages, half with ids far above any revision.
func burst(n int) []*nats.Msg {
	out := make([]*nats.Msg, n)
	for i := range out {
		m := &nats.Msg{Subject: "no8s.events.Widget.v1", Data: []byte(`{"forged":true}`), Header: nats.Header{}}
		if i%2 == 0 {
			m.Header.Set(jetstream.MsgIDHeader, strconv.Itoa(5_000_000+i))
		}
		out[i] = m
	}
	return out
}
