package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/eventstream"
)

// Defaults of Config.
const (
	DefaultHeartbeat    = 15 * time.Second
	DefaultBookmark     = 30 * time.Second
	DefaultBuffer       = 256
	DefaultStallTimeout = 30 * time.Second
	DefaultWriteTimeout = 2 * time.Minute
	DefaultRetry        = 2 * time.Second
	DefaultCatchUpBatch = 64
	// DefaultTooNewWait is how long a resume point ahead of the newest
	// published revision waits for the relay to catch up before it is
	// refused.
	DefaultTooNewWait = 10 * time.Second
	// DefaultFlushInterval is the longest rest a live watcher takes after
	// a write (Config.FlushInterval).
	DefaultFlushInterval = 20 * time.Millisecond
	// DefaultWriteRate is how many writes a second the live watchers
	// together aim at before they rest (Config.WriteRate).
	DefaultWriteRate = 20000
	// minRest is the shortest rest worth a timer: below it a watcher
	// writes again at once.
	minRest = time.Millisecond
)

// Config tunes watches. Zero fields take the defaults above.
type Config struct {
	// Heartbeat is how long a watch may stay silent before a comment line
	// keeps the connection alive.
	Heartbeat time.Duration
	// Bookmark is the interval of BOOKMARK events.
	Bookmark time.Duration
	// Buffer is how many events the hub queues for one live watcher before
	// it sends that watcher back to catch up from the stream.
	Buffer int
	// StallTimeout: a single write to a client blocked longer than this ends
	// the watch with a too_slow ERROR event once the write completes.
	StallTimeout time.Duration
	// WriteTimeout: a single write blocked longer than this closes the
	// connection without a final event.
	WriteTimeout time.Duration
	// Retry is the reconnection delay advertised to EventSource clients.
	Retry time.Duration
	// CatchUpBatch is how many messages a catching-up watcher's consumer
	// buffers.
	CatchUpBatch int
	// FlushInterval is the longest rest a live watcher takes after each
	// write, so that the events of a burst go out together: an event waits
	// at most this long, and an event after a quiet spell goes out at once.
	// Negative turns resting off.
	FlushInterval time.Duration
	// WriteRate sizes the rest: a live watcher rests (live watchers) /
	// WriteRate seconds after a write, up to FlushInterval, so that many
	// watchers coalesce their writes (at 1,000 watchers, 20 ms) while a
	// few write each event at once (below 20 watchers the rest is under a
	// millisecond, and none is taken).
	WriteRate int
	// TooNewWait is how long a resume point ahead of the newest published
	// revision may wait for the store's relay to catch up with it (a
	// revision just committed, not yet published), as Kubernetes waits for
	// its cache, before it is refused with a *TooNewError.
	TooNewWait time.Duration
}

func (c Config) withDefaults() Config {
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Bookmark <= 0 {
		c.Bookmark = DefaultBookmark
	}
	if c.Buffer <= 0 {
		c.Buffer = DefaultBuffer
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.WriteTimeout < c.StallTimeout {
		c.WriteTimeout = 2 * c.StallTimeout
	}
	if c.Retry <= 0 {
		c.Retry = DefaultRetry
	}
	if c.TooNewWait <= 0 {
		c.TooNewWait = DefaultTooNewWait
	}
	if c.CatchUpBatch <= 0 {
		c.CatchUpBatch = DefaultCatchUpBatch
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.WriteRate <= 0 {
		c.WriteRate = DefaultWriteRate
	}
	return c
}

// ErrNotReady means the hub does not follow the event stream (yet).
var ErrNotReady = errors.New("the event stream is not available yet")

// PublishedFunc returns the store's published revision: every event up to it
// has been published to the stream.
type PublishedFunc func(ctx context.Context) (int64, error)

// Hub follows the event stream and fans events out to the live watchers.
type Hub struct {
	js        jetstream.JetStream
	cfg       Config
	published PublishedFunc
	log       *slog.Logger

	ready     chan struct{} // closed once the hub follows the stream
	done      chan struct{} // closed when Run returns
	readyOnce sync.Once

	mu      sync.Mutex
	stream  jetstream.Stream
	created time.Time // the stream's creation time: another one is a new stream
	lastSeq uint64    // every message up to lastSeq has been fanned out
	// lastRev is the newest revision passed: every event at or below it is
	// at or below lastSeq (the newest event's revision, or the store's
	// published revision once the hub has read all the stream: passPublished).
	lastRev int64
	// base is the stream's base revision (eventstream.Identity): when an
	// event carries a newer one, the store rebuilt the stream and live
	// watchers may have missed compacted changes.
	base int64
	// storeIDs knows the stream's store (eventstream.Identity): messages
	// without it are foreign and dropped.
	storeIDs *eventstream.StoreIDs
	subs     map[*sub]struct{}
	closed   bool

	stats counters
}

// sub is one live watcher's registration with the hub.
type sub struct {
	f  Filter
	ch chan *event
	// resume is set before ch is closed: the first sequence the hub did not
	// deliver; gone, when set, says why the registration ended because
	// history was lost (the text of the watch's ERROR gone).
	resume uint64
	gone   string
}

// Why a hub ends every live watch with ERROR gone.
const (
	goneReset   = "the event stream was reset (a broker that lost its storage, or a deleted stream): events may be missing"
	goneBehind  = "events expired from the retained history before the gateway read them"
	goneRebuilt = "the event stream was rebuilt at revision %d (a restored or replaced database): changes up to it have no events"
)

type counters struct {
	watchers  atomic.Int64
	overflows atomic.Int64
	catchUps  atomic.Int64
	tooSlow   atomic.Int64
	gone      atomic.Int64
	events    atomic.Int64
	foreign   atomic.Int64
	// live is len(Hub.subs), kept with every change of it under the hub's
	// lock, so that the watchers' rest (Hub.rest) and Stats read it
	// without the lock.
	live atomic.Int64
}

// Stats is a snapshot of the hub's counters.
type Stats struct {
	// Watchers is the number of open watches; Live of those in the fan-out.
	Watchers, Live int
	// Overflows counts watchers sent back to the stream for being slow;
	// CatchUps the catch-up consumers created (resumes and overflows).
	Overflows, CatchUps int64
	// TooSlow counts watches ended for a stalled client; Gone those ended
	// because their resume point expired.
	TooSlow, Gone int64
	// Events counts the events the hub has fanned out; Foreign the
	// messages it dropped as not the store's (eventstream.Check).
	Events, Foreign int64
	// Seq and Revision are the hub's position in the stream.
	Seq      uint64
	Revision int64
}

// NewHub returns a hub over js. published may be nil; it is consulted only
// when every event in the stream has expired, and when a resume point is
// ahead of every event the hub has seen (to refuse one that is ahead of the
// newest revision).
func NewHub(js jetstream.JetStream, cfg Config, published PublishedFunc, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{
		js: js, cfg: cfg.withDefaults(), published: published, log: log,
		ready: make(chan struct{}), done: make(chan struct{}), subs: map[*sub]struct{}{},
	}
}

// Config returns the effective configuration.
func (h *Hub) Config() Config { return h.cfg }

// Stats returns the hub's counters.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{
		Watchers: int(h.stats.watchers.Load()), Live: int(h.stats.live.Load()),
		Overflows: h.stats.overflows.Load(), CatchUps: h.stats.catchUps.Load(),
		TooSlow: h.stats.tooSlow.Load(), Gone: h.stats.gone.Load(), Events: h.stats.events.Load(), Foreign: h.stats.foreign.Load(),
		Seq: h.lastSeq, Revision: h.lastRev,
	}
}

// WaitReady waits until the hub follows the stream, ctx ends or the hub
// stops.
func (h *Hub) WaitReady(ctx context.Context) error {
	select {
	case <-h.ready:
		return nil
	case <-h.done:
		return ErrNotReady
	case <-ctx.Done():
		return ErrNotReady
	}
}

// Run follows the stream until ctx ends; then every watch ends.
func (h *Hub) Run(ctx context.Context) error {
	defer func() {
		h.mu.Lock()
		h.closed = true
		h.subs = map[*sub]struct{}{}
		h.stats.live.Store(0)
		h.mu.Unlock()
		close(h.done)
	}()
	// A restarted broker may have lost the hub's consumer (memory storage)
	// or the whole stream: follow again when the connection comes back.
	nc := h.js.Conn()
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	for {
		err := h.follow(ctx, reconnected)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errResync) {
			h.log.Debug("event hub: a message was dropped; reading again", "from_seq", h.position().seq+1)
			continue
		}
		if errors.Is(err, errReconnected) {
			h.log.Info("event hub: nats reconnected; following the stream again", "from_seq", h.position().seq+1)
			continue
		}
		h.log.Warn("event hub: following the stream failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// errReconnected ends a follow when the NATS connection is re-established.
var errReconnected = errors.New("nats reconnected")

// follow reads the stream from the hub's position until ctx ends, an error
// occurs or the connection is re-established.
func (h *Hub) follow(ctx context.Context, reconnected <-chan nats.Status) error {
	stream, err := h.js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		return fmt.Errorf("open stream %s: %w", subjects.EventsStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream info: %w", err)
	}
	id, _ := eventstream.IdentityOf(info.Config)
	h.mu.Lock()
	started := h.stream != nil
	recreated := started && !info.Created.Equal(h.created)
	h.created = info.Created
	h.mu.Unlock()
	if !started || recreated || info.State.LastSeq < h.position().seq {
		// First start, or the stream was recreated (a broker that lost
		// its storage, a deleted stream): begin at its end.
		rev, err := lastRevision(ctx, stream, info, id.StoreID)
		if err != nil {
			return err
		}
		h.mu.Lock()
		if started {
			h.log.Warn("event stream was reset; ending every watch", "last_seq", info.State.LastSeq, "hub_seq", h.lastSeq)
			h.endAllLocked(goneReset)
		}
		h.lastSeq, h.lastRev = info.State.LastSeq, rev
		h.base = id.Base
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.stream = stream
	h.storeIDs = eventstream.NewStoreIDs(id.StoreID, eventstream.StreamStoreID(stream))
	if id.Base > h.base {
		if started {
			h.log.Warn("event stream was rebuilt; ending every watch", "base_revision", id.Base)
			h.endAllLocked(fmt.Sprintf(goneRebuilt, id.Base))
		}
		h.base = id.Base
	}
	start := h.lastSeq + 1
	h.mu.Unlock()
	// Pass the revisions without events (types, webhooks, namespaces) up to
	// the store's published revision before the first watch starts, so
	// that its bookmark names where the control plane is, also when no
	// event was ever published.
	pctx, cancel := context.WithTimeout(ctx, passPublishedWait)
	if err := h.passPublished(pctx, stream); err != nil {
		h.log.Debug("event hub: the published revision is not known yet", "err", err)
	}
	cancel()
	h.readyOnce.Do(func() { close(h.ready) })

	cons, err := stream.CreateConsumer(ctx, replayConsumer("no8s gateway event hub", start))
	if err != nil {
		return fmt.Errorf("create hub consumer: %w", err)
	}
	defer deleteConsumer(ctx, stream, cons)
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(256, 8<<20))
	if err != nil {
		return fmt.Errorf("hub consumer: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	h.log.Info("event hub follows the stream", "from_seq", start)

	nextBookmark := time.Now().Add(h.cfg.Bookmark)
	var delivered uint64
	for {
		select {
		case <-reconnected:
			return errReconnected
		default:
		}
		wait := min(max(time.Until(nextBookmark), 5*time.Millisecond), time.Second)
		msg, err := it.Next(jetstream.NextMaxWait(wait))
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, nats.ErrTimeout):
		case err != nil:
			return fmt.Errorf("read stream: %w", err)
		default:
			md, err := msg.Metadata()
			if err != nil {
				return fmt.Errorf("read stream: %w", err)
			}
			// The client library drops messages when its buffer is
			// full: a gap in the delivery sequence means one is missing.
			if md.Sequence.Consumer != delivered+1 {
				return errResync
			}
			delivered = md.Sequence.Consumer
			h.dispatch(ctx, msg)
		}
		if now := time.Now(); !now.Before(nextBookmark) {
			pctx, cancel := context.WithTimeout(ctx, passPublishedWait)
			if err := h.passPublished(pctx, stream); err != nil && ctx.Err() == nil {
				h.log.Debug("event hub: reading the published revision failed; bookmarking the newest event", "err", err)
			}
			cancel()
			h.bookmark()
			nextBookmark = now.Add(h.cfg.Bookmark)
		}
	}
}

// dispatch fans one message out to the matching live watchers.
func (h *Hub) dispatch(ctx context.Context, msg jetstream.Msg) {
	ev, err := h.decode(ctx, msg)
	switch {
	case ev != nil && ev.foreign:
		h.stats.foreign.Add(1)
		h.log.Warn("event hub: a message the store did not publish; dropped", "err", err)
	case err != nil:
		h.log.Error("event hub: undecodable message; skipped", "err", err)
		if ev == nil {
			return
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.seq <= h.lastSeq {
		return // already seen (a recreated consumer)
	}
	if !ev.skip && ev.revision <= h.lastRev {
		// The store's events only grow in revision along the stream.
		ev.skip, ev.foreign = true, true
		h.stats.foreign.Add(1)
		h.log.Warn("event hub: a message out of revision order; dropped as not the store's", "seq", ev.seq, "revision", ev.revision, "after_revision", h.lastRev)
	}
	if ev.seq > h.lastSeq+1 {
		// Messages between expired before the hub read them: the live
		// watchers cannot know whether they missed events.
		h.log.Warn("event hub fell behind the stream's retention; ending every watch", "expected_seq", h.lastSeq+1, "got_seq", ev.seq)
		h.endAllLocked(goneBehind)
	}
	if ev.base > h.base {
		// The store rebuilt the stream at a new base: changes at or below
		// it were compacted without events, so live watchers must list again.
		h.log.Warn("event stream was rebuilt; ending every watch", "base_revision", ev.base)
		h.endAllLocked(fmt.Sprintf(goneRebuilt, ev.base))
		h.base = ev.base
	}
	h.lastSeq = ev.seq
	if ev.revision > h.lastRev {
		h.lastRev = ev.revision
	}
	h.stats.events.Add(1)
	for s := range h.subs {
		if !s.f.match(ev) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			// The watcher is behind: it catches up from the stream from here.
			delete(h.subs, s)
			h.stats.live.Add(-1)
			s.resume = ev.seq
			close(s.ch)
			h.stats.overflows.Add(1)
		}
	}
}

// passPublishedWait bounds reading the published revision and the stream's
// state for passPublished.
const passPublishedWait = 2 * time.Second

// passPublished moves the hub's revision up to the store's published
// revision when the hub has read every message of the stream. Revisions
// without events (types, webhooks, namespaces, rolled-back transactions)
// are then passed too, so bookmarks name where the control plane is, also
// on a fresh cluster whose stream is still empty. The order makes it safe:
// every event at or below the published revision is in the stream before
// that revision is read, so when the stream read afterwards ends at or
// below the hub's position (and is the same stream), the hub has fanned
// them all out.
func (h *Hub) passPublished(ctx context.Context, stream jetstream.Stream) error {
	if h.published == nil {
		return nil
	}
	published, err := h.published(ctx)
	if err != nil {
		return fmt.Errorf("read the published revision: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream info: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if info.Created.Equal(h.created) && info.State.LastSeq <= h.lastSeq && published > h.lastRev {
		h.lastRev = published
	}
	return nil
}

// bookmark queues a bookmark with the hub's position to every live watcher
// that has room for it.
func (h *Hub) bookmark() {
	h.mu.Lock()
	defer h.mu.Unlock()
	bm := &event{bookmark: true, seq: h.lastSeq, revision: h.lastRev}
	for s := range h.subs {
		select {
		case s.ch <- bm:
		default:
		}
	}
}

// endAllLocked ends every live registration; a non-empty gone ends them
// with ERROR gone, saying why.
func (h *Hub) endAllLocked(gone string) {
	for s := range h.subs {
		delete(h.subs, s)
		h.stats.live.Add(-1)
		s.gone = gone
		s.resume = h.lastSeq + 1
		close(s.ch)
	}
}

type position struct {
	seq uint64
	rev int64
}

func (h *Hub) position() position {
	h.mu.Lock()
	defer h.mu.Unlock()
	return position{h.lastSeq, h.lastRev}
}

func (h *Hub) streamRef() jetstream.Stream {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stream
}

// errShutdown ends watches when the hub stops.
var errShutdown = errors.New("the gateway is shutting down")

// subscribe registers a live watcher; events after the returned position
// reach it through its channel.
func (h *Hub) subscribe(f Filter) (*sub, position, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, position{}, errShutdown
	}
	s := &sub{f: f, ch: make(chan *event, h.cfg.Buffer)}
	h.subs[s] = struct{}{}
	h.stats.live.Add(1)
	return s, position{h.lastSeq, h.lastRev}, nil
}

func (h *Hub) unsubscribe(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		h.stats.live.Add(-1)
	}
}

// rest is how long a live watcher rests after a write (Config.WriteRate):
// zero when resting is off or the rest would be under a millisecond.
func (h *Hub) rest() time.Duration {
	if h.cfg.FlushInterval <= 0 {
		return 0
	}
	d := time.Duration(h.stats.live.Load()) * time.Second / time.Duration(h.cfg.WriteRate)
	if d < minRest {
		return 0
	}
	return min(d, h.cfg.FlushInterval)
}

// lastRevision is the revision of the store's newest event in the stream,
// 0 if none: foreign messages after it are passed over.
func lastRevision(ctx context.Context, stream jetstream.Stream, info *jetstream.StreamInfo, storeID string) (int64, error) {
	if info.State.Msgs == 0 {
		return 0, nil
	}
	rev, _, _, err := eventstream.NewestOwn(ctx, stream, info.State.LastSeq, eventstream.Floor(info.State), func(m *jetstream.RawStreamMsg) (int64, error) {
		return revisionOf(m, storeID)
	})
	if err != nil {
		return 0, fmt.Errorf("read the newest event: %w", err)
	}
	return rev, nil
}

// decode decodes a message of the stream the hub follows as an event of
// its store; a message that names another store is decoded again when the
// stream turns out to belong to that store now (rebuilt for another
// database).
func (h *Hub) decode(ctx context.Context, msg jetstream.Msg) (*event, error) {
	h.mu.Lock()
	ids := h.storeIDs
	h.mu.Unlock()
	ev, err := decode(msg, ids.ID())
	if ev != nil && ev.foreign && ids.Adopt(ctx, msg.Headers()) {
		h.log.Info("event hub: the stream belongs to another store now", "store_id", ids.ID())
		ev, err = decode(msg, ids.ID())
	}
	return ev, err
}

// deleteConsumer removes an ephemeral consumer now rather than after its
// inactivity threshold.
func deleteConsumer(ctx context.Context, stream jetstream.Stream, cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = stream.DeleteConsumer(ctx, cons.CachedInfo().Name)
}
