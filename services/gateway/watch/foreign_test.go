package watch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/resource"
)

// publishForeign puts a message into the stream as another publisher
// could: any subject, any headers, any body.
func (f *fixture) publishForeign(t *testing.T, subject string, header nats.Header, data []byte) {
	t.Helper()
	if _, err := f.js.PublishMsg(t.Context(), &nats.Msg{Subject: subject, Header: header, Data: data}); err != nil {
		t.Fatal(err)
	}
}

// TestForeignMessagesNeverReachWatchers: messages the store did not publish
// — no store id, another store's id, no revision, a revision at or below
// one already passed (a forged DELETED of an existing resource under the
// store's own headers), a forged stream base — are dropped and counted by
// the hub, never sent to a live or a resuming watcher, never end a watch,
// and never move a resume point; the store's events around them arrive
// exactly once, in order.
func TestForeignMessagesNeverReachWatchers(t *testing.T) {
	f := newFixture(t)
	f.start(t)
	for i := int64(1); i <= 10; i++ {
		f.publish(t, 10*i, "A", i, nil)
	}
	// A DELETED of resource 5 (at revision 50); forged45 claims revision
	// 45, which no event has (so JetStream does not drop it as a
	// duplicate) and which lies below what the hub has passed.
	deleted := func(rev int64) []byte {
		b, err := eventstream.Encode(eventstream.Event{Revision: rev, Type: eventstream.Deleted,
			Resource: &resource.Resource{ID: 5, Name: "r5", ResourceTypeName: "A", ResourceTypeVersion: "v1", ResourceVersion: rev, Spec: []byte(`{}`)}, Timestamp: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	forged, forged45 := deleted(50), deleted(45)
	own := func(rev string) nats.Header {
		return nats.Header{jetstream.MsgIDHeader: {rev}, eventstream.StoreIDHeader: {testStoreID}}
	}
	subject := subjects.Event("A", "v1")
	foreign := []struct {
		header nats.Header
		data   []byte
	}{
		{nats.Header{jetstream.MsgIDHeader: {"999999"}}, forged}, // no store id
		{nil, forged}, // no headers at all
		{nats.Header{jetstream.MsgIDHeader: {"999998"}, eventstream.StoreIDHeader: {"another-store"}}, forged}, // another store
		{nats.Header{eventstream.StoreIDHeader: {testStoreID}}, forged},                                        // no revision
		{nats.Header{jetstream.MsgIDHeader: {"55"}, eventstream.StoreIDHeader: {testStoreID}}, forged},         // envelope revision is not the id
		{own("45"), forged45}, // a revision already passed
		{nats.Header{jetstream.MsgIDHeader: {"999997"}, eventstream.BaseHeader: {"999999"}}, []byte("x")}, // a forged rebuild
		{own("abc"), []byte("x")}, // not a revision
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
		st, err := f.hub.Resolve(r.Context(), since)
		if err != nil {
			http.Error(w, err.Error(), http.StatusGone)
			return
		}
		_ = f.hub.Stream(r.Context(), w, Filter{}, st)
	}))
	t.Cleanup(srv.Close) // after the watches' cleanups
	watch := func(since int64) <-chan int64 {
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"?since="+strconv.FormatInt(since, 10), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		if resp.StatusCode != 200 {
			t.Fatalf("watch since %d: %d", since, resp.StatusCode)
		}
		ids := make(chan int64, 1000)
		go readIDs(resp, ids)
		return ids
	}
	live := watch(100)
	for i, m := range foreign {
		f.publishForeign(t, subject, m.header, m.data)
		f.publish(t, 100+10*int64(i+1), "A", 100+int64(i), nil) // the store's own, after each
	}
	f.sync(t)
	if got := f.hub.Stats().Foreign; got != int64(len(foreign)) {
		t.Fatalf("the hub counted %d foreign messages, want %d", got, len(foreign))
	}
	var want []int64
	for i := range foreign {
		want = append(want, 100+10*int64(i+1))
	}
	expect := func(name string, ids <-chan int64, want []int64) {
		t.Helper()
		for n, w := range want {
			select {
			case got := <-ids:
				if got != w {
					t.Fatalf("%s: event %d is revision %d, want %d (a foreign message got through?)", name, n, got, w)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: event %d (revision %d) did not arrive", name, n, w)
			}
		}
		select {
		case got := <-ids:
			t.Fatalf("%s: an extra event, revision %d", name, got)
		case <-time.After(200 * time.Millisecond):
		}
	}
	expect("live", live, want)
	// A watcher resuming before them reads them from the stream.
	expect("resumed", watch(95), append([]int64{100}, want...))
	// The resume point search passes over them.
	st, err := f.hub.Resolve(t.Context(), 110)
	if err != nil {
		t.Fatal(err)
	}
	if rev, seq, err := ownAtOrAfter(t.Context(), f.stream, st.seq, mustInfo(t, f.stream).State.LastSeq, testStoreID); err != nil || rev != 120 {
		t.Fatalf("resume after 110 starts at sequence %d, whose first event is revision %d at %d (%v), want 120", st.seq, rev, seq, err)
	}
	// A foreign message at the tail is not the newest revision.
	f.publishForeign(t, subject, nats.Header{jetstream.MsgIDHeader: {"888888"}}, []byte("x"))
	f.sync(t)
	if rev, err := lastRevision(t.Context(), f.stream, mustInfo(t, f.stream), testStoreID); err != nil || rev != want[len(want)-1] {
		t.Fatalf("newest revision %d (%v), want %d", rev, err, want[len(want)-1])
	}
}

func mustInfo(t *testing.T, s jetstream.Stream) *jetstream.StreamInfo {
	t.Helper()
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}
