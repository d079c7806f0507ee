package watch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
)

// errOverflow sends a watcher back to the stream: the hub dropped it.
var errOverflow = errors.New("the watcher fell behind the fan-out")

// errResync restarts reading the stream from the watcher's position: the
// client library dropped a message of its consumer (a gap in the consumer's
// delivery sequence).
var errResync = errors.New("a consumer message was dropped; reading again")

// errGone ends a watch whose start point expired while it caught up.
var errGone = errors.New("events after the resume point expired from the stream")

// goneError is errGone with the hub's reason, when the hub ended every
// watch (a reset, rebuilt or outrun stream).
type goneError struct{ why string }

func (e *goneError) Error() string { return e.why }
func (e *goneError) Unwrap() error { return errGone }

// Stream answers the request with the event stream of f from start until
// ctx ends, the hub stops, the client stalls or history is lost. It writes
// the response header itself; the error it returns is for logging only.
func (h *Hub) Stream(ctx context.Context, w http.ResponseWriter, f Filter, start Start) error {
	h.stats.watchers.Add(1)
	defer h.stats.watchers.Add(-1)
	wt := &watcher{h: h, f: f, out: newSSEWriter(w, h.cfg), next: start.seq, rev: start.rev, pos: start.rev}
	if err := wt.out.header(h.cfg.Retry); err != nil {
		return err
	}
	err := wt.run(ctx, start.now)
	switch {
	case errors.Is(err, errTooSlow):
		h.stats.tooSlow.Add(1)
		wt.out.final(errorFrame(CodeTooSlow, fmt.Sprintf(
			"the client did not read for more than %s; reconnect with Last-Event-ID to resume after the last event received", h.cfg.StallTimeout)))
	case errors.Is(err, errGone):
		h.stats.gone.Add(1)
		why := fmt.Sprintf("events after revision %d expired from the retained history before they could be sent", wt.rev)
		if ge := (*goneError)(nil); errors.As(err, &ge) {
			why = ge.why
		}
		wt.out.final(errorFrame(CodeGone, why+"; list the resources again and watch from the list's X-Resource-Version"))
	case errors.Is(err, errShutdown):
		wt.out.final([]byte(": the gateway is shutting down; reconnect with Last-Event-ID\n\n"))
		return nil
	case ctx.Err() != nil:
		return nil
	}
	return err
}

// watcher is one watch's position and output.
type watcher struct {
	h   *Hub
	f   Filter
	out *sseWriter
	// next is the first stream sequence not yet processed: every matching
	// event below it has been sent.
	next uint64
	// rev is the newest revision sent (or the resume point): only newer
	// revisions are sent.
	rev int64
	// pos is the newest revision passed, for bookmarks (>= rev).
	pos          int64
	lastBookmark time.Time
}

func (wt *watcher) run(ctx context.Context, now bool) error {
	wt.lastBookmark = time.Now()
	if now {
		s, p, err := wt.h.subscribe(wt.f)
		if err != nil {
			return err
		}
		wt.next = p.seq + 1
		if p.rev > wt.pos {
			wt.pos = p.rev
		}
		// An id from the start, so that a reconnect before the first event
		// resumes here rather than "now": the hub's revision, which passes
		// revisions without events too (0 only when nothing was ever
		// written, and resuming after 0 then misses nothing).
		if err := wt.bookmark(); err != nil {
			wt.h.unsubscribe(s)
			return err
		}
		if err := wt.out.flush(); err != nil {
			wt.h.unsubscribe(s)
			return err
		}
		err = wt.live(ctx, s)
		wt.h.unsubscribe(s)
		if !errors.Is(err, errOverflow) {
			return err
		}
	}
	retry := 100 * time.Millisecond
	for {
		err := wt.join(ctx)
		if !errors.Is(err, errOverflow) && !errors.Is(err, errStream) && !errors.Is(err, errResync) {
			return err
		}
		if errors.Is(err, errStream) {
			wt.h.log.Warn("watch: reading the stream failed; retrying", "err", err, "next_seq", wt.next)
			if err := wt.sleep(ctx, retry); err != nil {
				return err
			}
			retry = min(2*retry, 5*time.Second)
			continue
		}
		retry = 100 * time.Millisecond
	}
}

// join catches up from the stream and then serves from the fan-out until
// the watcher overflows (errOverflow) or ends.
func (wt *watcher) join(ctx context.Context) error {
	// Far behind: catch up without a live registration first, so that the
	// fan-out does not fill a buffer the watcher cannot drain yet.
	for {
		p := wt.h.position()
		if p.seq < wt.next || p.seq-wt.next < uint64(wt.h.cfg.Buffer) {
			break
		}
		if err := wt.catchUp(ctx, p); err != nil {
			return err
		}
	}
	s, p, err := wt.h.subscribe(wt.f)
	if err != nil {
		return err
	}
	defer wt.h.unsubscribe(s)
	if p.seq >= wt.next {
		if err := wt.catchUp(ctx, p); err != nil {
			return err
		}
	}
	return wt.live(ctx, s)
}

// live serves events from the hub. It writes everything queued in one
// batch and then, when many watchers are live, rests before the next
// (Hub.rest), so that a burst costs one write (and one wake-up) per rest,
// not one per event, while an event after a quiet spell, or to one of a few
// watchers, goes out at once.
func (wt *watcher) live(ctx context.Context, s *sub) error {
	hb := time.NewTimer(wt.h.cfg.Heartbeat)
	defer hb.Stop()
	rest := time.NewTimer(time.Hour)
	rest.Stop()
	defer rest.Stop()
	for {
		select {
		case ev, ok := <-s.ch:
			if !ok {
				return wt.dropped(s)
			}
			if err := wt.deliverLive(ev); err != nil {
				return err
			}
		batch:
			for range wt.h.cfg.Buffer {
				select {
				case ev, ok := <-s.ch:
					if !ok {
						if err := wt.out.flush(); err != nil {
							return err
						}
						return wt.dropped(s)
					}
					if err := wt.deliverLive(ev); err != nil {
						return err
					}
				default:
					break batch
				}
			}
			if err := wt.out.flush(); err != nil {
				return err
			}
			hb.Reset(wt.h.cfg.Heartbeat)
			if d := wt.h.rest(); d > 0 {
				rest.Reset(d)
				select {
				case <-rest.C:
				case <-ctx.Done():
					return ctx.Err()
				case <-wt.h.done:
					return errShutdown
				}
			}
		case <-hb.C:
			if err := wt.out.heartbeat(wt.h.cfg.Heartbeat); err != nil {
				return err
			}
			hb.Reset(wt.h.cfg.Heartbeat)
		case <-ctx.Done():
			return ctx.Err()
		case <-wt.h.done:
			return errShutdown
		}
	}
}

// dropped handles a registration the hub ended.
func (wt *watcher) dropped(s *sub) error {
	select {
	case <-wt.h.done:
		return errShutdown
	default:
	}
	if s.gone != "" {
		return &goneError{why: s.gone}
	}
	if s.resume > wt.next {
		wt.next = s.resume
	}
	return errOverflow
}

func (wt *watcher) deliverLive(ev *event) error {
	if ev.bookmark {
		if ev.seq >= wt.next {
			wt.next = ev.seq + 1
		}
		if ev.revision > wt.pos {
			wt.pos = ev.revision
		}
		return wt.bookmark()
	}
	if ev.seq < wt.next {
		return nil // sent while catching up
	}
	wt.next = ev.seq + 1
	return wt.send(ev)
}

// send writes a matching event unless its revision was already sent.
func (wt *watcher) send(ev *event) error {
	if ev.revision > wt.pos {
		wt.pos = ev.revision
	}
	if ev.revision <= wt.rev {
		return nil
	}
	wt.rev = ev.revision
	return wt.out.write(ev.frame())
}

func (wt *watcher) bookmark() error {
	if wt.pos < wt.rev {
		wt.pos = wt.rev
	}
	wt.lastBookmark = time.Now()
	return wt.out.write(bookmarkFrame(wt.pos, wt.lastBookmark))
}

// errStream wraps failures to read the stream: the watcher retries them
// from its position.
var errStream = errors.New("event stream")

func streamErr(err error) error { return fmt.Errorf("%w: %w", errStream, err) }

// catchUp reads the stream from wt.next until it has covered position p:
// every matching event up to p.seq has been sent.
func (wt *watcher) catchUp(ctx context.Context, p position) error {
	stream := wt.h.streamRef()
	if stream == nil {
		return streamErr(ErrNotReady)
	}
	wt.h.stats.catchUps.Add(1)
	start := wt.next
	cons, err := wt.catchUpConsumer(ctx, stream, start)
	if err != nil {
		return err
	}
	defer deleteConsumer(ctx, stream, cons)
	info := cons.CachedInfo()
	if info.Delivered.Stream+1 > start {
		// The server moved the start to the first retained message: the
		// messages before it expired.
		return errGone
	}
	if info.NumPending == 0 {
		if done, err := wt.covered(ctx, stream, p); err != nil || done {
			return err
		}
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(wt.h.cfg.CatchUpBatch, 2<<20))
	if err != nil {
		return streamErr(err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	return wt.readCatchUp(ctx, stream, it, p, start, info.Delivered.Consumer)
}

// replayConsumer is the configuration of the gateway's ephemeral consumers
// of the event stream (the hub's and each catch-up's): read from stream
// sequence start, nothing acknowledged, kept in memory, gone a minute
// after its reader.
func replayConsumer(description string, start uint64) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Description:       description,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
		Replicas:          1,
	}
}

// catchUpConsumer creates the ephemeral consumer that a catch-up reads the
// watcher's subjects with, from stream sequence start.
func (wt *watcher) catchUpConsumer(ctx context.Context, stream jetstream.Stream, start uint64) (jetstream.Consumer, error) {
	cfg := replayConsumer("no8s gateway watch catch-up", start)
	if subj := wt.f.subject(); subj != subjects.EventsAll {
		cfg.FilterSubject = subj
	}
	cons, err := stream.CreateConsumer(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, streamErr(fmt.Errorf("create catch-up consumer: %w", err))
	}
	return cons, nil
}

// readCatchUp sends what the catch-up consumer delivers, from stream
// sequence start, until position p is covered; delivered is the consumer
// sequence of the last message delivered before it.
func (wt *watcher) readCatchUp(ctx context.Context, stream jetstream.Stream, it jetstream.MessagesContext, p position, start, delivered uint64) error {
	first := true
	unflushed := 0
	for {
		select {
		case <-wt.h.done:
			return errShutdown
		default:
		}
		wait := min(max(wt.h.cfg.Heartbeat-time.Since(wt.out.last), 5*time.Millisecond), time.Second)
		msg, err := it.Next(jetstream.NextMaxWait(wait))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, nats.ErrTimeout) {
			if err := wt.idle(); err != nil {
				return err
			}
			unflushed = 0
			if done, err := wt.covered(ctx, stream, p); err != nil || done {
				return err
			}
			continue
		}
		if err != nil {
			return streamErr(err)
		}
		ev, md, err := wt.catchUpEvent(ctx, msg, delivered)
		if err != nil {
			return err
		}
		delivered = md.Sequence.Consumer
		if first {
			first = false
			if err := expiredBefore(ctx, stream, ev.seq, start); err != nil {
				return err
			}
		}
		sent, err := wt.sendCaughtUp(ev)
		if err != nil {
			return err
		}
		if sent {
			unflushed++
		}
		if ev.seq >= p.seq {
			return wt.out.flush()
		}
		if done, err := wt.paceCatchUp(ctx, stream, p, md.NumPending, &unflushed); err != nil || done {
			return err
		}
	}
}

// catchUpEvent decodes msg, which must follow the consumer sequence
// delivered (else errResync: a message was skipped). A foreign or
// undecodable message that still yields an event is logged and kept.
func (wt *watcher) catchUpEvent(ctx context.Context, msg jetstream.Msg, delivered uint64) (*event, *jetstream.MsgMetadata, error) {
	md, err := msg.Metadata()
	if err != nil {
		return nil, nil, streamErr(err)
	}
	if md.Sequence.Consumer != delivered+1 {
		if err := wt.out.flush(); err != nil {
			return nil, nil, err
		}
		return nil, nil, errResync
	}
	ev, err := wt.h.decode(ctx, msg)
	switch {
	case ev != nil && ev.foreign:
		wt.h.log.Debug("watch: a message the store did not publish; dropped", "err", err)
	case err != nil:
		wt.h.log.Error("watch: undecodable message; skipped", "err", err)
		if ev == nil {
			return nil, nil, streamErr(err)
		}
	}
	return ev, md, nil
}

// expiredBefore is errGone when the first message a catch-up reads, at
// stream sequence seq, is past start and the stream no longer holds start:
// something before this message may have expired after the consumer was
// created.
func expiredBefore(ctx context.Context, stream jetstream.Stream, seq, start uint64) error {
	if seq <= start {
		return nil
	}
	si, err := stream.Info(ctx)
	if err != nil {
		return streamErr(err)
	}
	if si.State.FirstSeq > start {
		return errGone
	}
	return nil
}

// sendCaughtUp moves the watcher past ev and sends it when it matches;
// sent says whether it did.
func (wt *watcher) sendCaughtUp(ev *event) (sent bool, err error) {
	if ev.seq >= wt.next {
		wt.next = ev.seq + 1
	}
	if wt.f.match(ev) {
		return true, wt.send(ev)
	}
	if ev.revision > wt.pos {
		wt.pos = ev.revision
	}
	return false, nil
}

// paceCatchUp runs after each event a catch-up reads, pending messages
// before the stream's end: it flushes when the stream looks drained (and
// reports whether p is covered then) or every 32 unsent frames, and sends
// a bookmark when one is due.
func (wt *watcher) paceCatchUp(ctx context.Context, stream jetstream.Stream, p position, pending uint64, unflushed *int) (bool, error) {
	if pending == 0 {
		// Only a hint: the pending count can lag the stream.
		if err := wt.out.flush(); err != nil {
			return false, err
		}
		*unflushed = 0
		if done, err := wt.covered(ctx, stream, p); err != nil || done {
			return done, err
		}
	}
	if *unflushed >= 32 {
		if err := wt.out.flush(); err != nil {
			return false, err
		}
		*unflushed = 0
	}
	if time.Since(wt.lastBookmark) >= wt.h.cfg.Bookmark {
		if err := wt.bookmark(); err != nil {
			return false, err
		}
	}
	return false, nil
}

// covered checks with the stream whether a message of the watcher's
// subjects lies in [next, p.seq]; when none does, it moves the watcher past p
// and reports true.
func (wt *watcher) covered(ctx context.Context, stream jetstream.Stream, p position) (bool, error) {
	if wt.next <= p.seq {
		m, err := stream.GetMsg(ctx, wt.next, jetstream.WithGetMsgSubject(wt.f.subject()))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, streamErr(fmt.Errorf("look for the next event: %w", err))
		case m.Sequence <= p.seq:
			return false, nil
		}
	}
	wt.cover(p)
	return true, nil
}

// cover records that every matching event up to p has been sent.
func (wt *watcher) cover(p position) {
	if p.seq >= wt.next {
		wt.next = p.seq + 1
	}
	if p.rev > wt.pos {
		wt.pos = p.rev
	}
}

// idle flushes, and sends a heartbeat or bookmark when one is due.
func (wt *watcher) idle() error {
	if err := wt.out.flush(); err != nil {
		return err
	}
	if time.Since(wt.lastBookmark) >= wt.h.cfg.Bookmark {
		if err := wt.bookmark(); err != nil {
			return err
		}
		return wt.out.flush()
	}
	return wt.out.heartbeat(wt.h.cfg.Heartbeat)
}

// sleep waits d, keeping the connection alive.
func (wt *watcher) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-wt.h.done:
			return errShutdown
		case <-time.After(wt.h.cfg.Heartbeat):
			if err := wt.out.heartbeat(wt.h.cfg.Heartbeat); err != nil {
				return err
			}
		}
	}
}
