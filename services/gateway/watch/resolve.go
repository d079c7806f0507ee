package watch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/eventstream"
)

// GoneError means a resume point is older than the retained history: events
// after it may have expired, and the client must list again.
type GoneError struct {
	// Since is the refused resume point.
	Since int64
	// Oldest is the oldest resumable revision now.
	Oldest int64
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("resume point %d is older than the retained event history (the oldest resumable revision is %d)", e.Since, e.Oldest)
}

// TooNewError means a resume point is beyond the newest revision published:
// no such revision exists (yet), so waiting for it could take forever. The
// client must list again.
type TooNewError struct {
	// Since is the refused resume point.
	Since int64
	// Newest is the newest published revision.
	Newest int64
}

func (e *TooNewError) Error() string {
	return fmt.Sprintf("resume point %d is ahead of the newest revision (the newest revision is %d)", e.Since, e.Newest)
}

// tooNewPoll is how often the published revision is read meanwhile.
const tooNewPoll = 50 * time.Millisecond

// Start is where a watch begins, from Resolve.
type Start struct {
	now bool
	seq uint64 // the first stream sequence to read
	rev int64  // only revisions above rev are sent
}

// Now is a watch of new events only.
func Now() Start { return Start{now: true} }

// Resolve finds where a watch that resumes after revision since starts. It
// answers a *GoneError when since is older than the retained history, and a
// *TooNewError when since is ahead of the newest published revision (after
// waiting briefly for the relay to catch up).
func (h *Hub) Resolve(ctx context.Context, since int64) (Start, error) {
	if since < 0 {
		since = 0
	}
	stream := h.streamRef()
	if stream == nil {
		return Start{}, ErrNotReady
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return Start{}, fmt.Errorf("stream info: %w", err)
	}
	// A stream rebuilt after a database restore (or rebuilt from the outbox)
	// holds nothing before its base: older resume points must list again.
	if id, ok := eventstream.IdentityOf(info.Config); ok && since < id.Base {
		return Start{}, &GoneError{Since: since, Oldest: id.Base}
	}
	if since > h.position().rev {
		if err := h.checkNotAhead(ctx, since); err != nil {
			return Start{}, err
		}
	}
	// Fast path: at or past the hub's position, nothing stored is needed.
	if pos := h.position(); pos.rev > 0 && since >= pos.rev {
		return Start{seq: pos.seq + 1, rev: since}, nil
	}
	var lastErr error
	for range 5 {
		st, err := h.resolve(ctx, stream, since)
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return st, err
		}
		lastErr = err // a message expired under us: look again
	}
	return Start{}, fmt.Errorf("resolve resume point %d: %w", since, lastErr)
}

func (h *Hub) resolve(ctx context.Context, stream jetstream.Stream, since int64) (Start, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return Start{}, fmt.Errorf("stream info: %w", err)
	}
	st := info.State
	if st.Msgs == 0 {
		if st.LastSeq == 0 {
			return Start{seq: 1, rev: since}, nil // nothing was ever published
		}
		// Every event expired. The store's published revision bounds them
		// all: resuming at or after it misses nothing.
		var published int64
		if h.published != nil {
			if published, err = h.published(ctx); err != nil {
				return Start{}, fmt.Errorf("read the published revision: %w", err)
			}
		}
		if h.published == nil || since < published {
			return Start{}, &GoneError{Since: since, Oldest: published}
		}
		return Start{seq: st.LastSeq + 1, rev: since}, nil
	}
	// FirstSeq 1 (or, for a rebuilt stream, right after the rebuild):
	// nothing was removed from the stream since, so every revision since
	// any resume point Resolve let through is here. Otherwise events before
	// the first retained one expired, and revisions are sparse: whether any
	// event lay between since and the first retained revision is unknown
	// unless since is right before it.
	id, _ := eventstream.IdentityOf(info.Config)
	if st.FirstSeq > id.BaseSeq+1 {
		firstRev, _, err := ownAtOrAfter(ctx, stream, st.FirstSeq, st.LastSeq, id.StoreID)
		if err != nil {
			return Start{}, err
		}
		if since < firstRev-1 {
			return Start{}, &GoneError{Since: since, Oldest: firstRev - 1}
		}
	}
	// The first sequence whose revision is above since: revisions increase
	// with sequence, so binary search over [first, last+1].
	lo, hi := st.FirstSeq, st.LastSeq+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		rev, seq, err := ownAtOrAfter(ctx, stream, mid, hi-1, id.StoreID)
		if errors.Is(err, jetstream.ErrMsgNotFound) && mid > st.FirstSeq {
			// No event at or after mid (a concurrent purge, deletes, or
			// only foreign messages).
			hi = mid
			continue
		}
		if err != nil {
			return Start{}, err
		}
		if rev > since {
			hi = mid
		} else {
			lo = seq + 1
		}
	}
	return Start{seq: lo, rev: since}, nil
}

// checkNotAhead returns a *TooNewError when since stays ahead of the
// store's published revision for Config.TooNewWait. Without a PublishedFunc it
// cannot tell and lets the watch wait.
func (h *Hub) checkNotAhead(ctx context.Context, since int64) error {
	if h.published == nil {
		return nil
	}
	deadline := time.Now().Add(h.cfg.TooNewWait)
	for {
		published, err := h.published(ctx)
		if err != nil {
			return fmt.Errorf("read the published revision: %w", err)
		}
		if since <= published {
			return nil
		}
		if time.Now().After(deadline) {
			return &TooNewError{Since: since, Newest: published}
		}
		t := time.NewTimer(tooNewPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// ownAtOrAfter finds the store's first event at or after seq and at or
// before last, passing over foreign messages (at most
// eventstream.MaxWalk); it returns its revision and sequence, or an error
// wrapping jetstream.ErrMsgNotFound when there is none.
func ownAtOrAfter(ctx context.Context, stream jetstream.Stream, seq, last uint64, storeID string) (int64, uint64, error) {
	for walked := 0; seq <= last && walked < eventstream.MaxWalk; walked++ {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subjects.EventsAll))
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return 0, 0, err
			}
			return 0, 0, fmt.Errorf("read stream sequence %d: %w", seq, err)
		}
		if m.Sequence > last {
			break
		}
		rev, err := revisionOf(m, storeID)
		if err == nil {
			return rev, m.Sequence, nil
		}
		if !errors.Is(err, eventstream.ErrForeign) {
			return 0, 0, err
		}
		seq = m.Sequence + 1
	}
	return 0, 0, fmt.Errorf("no event of the store in stream sequences up to %d: %w", last, jetstream.ErrMsgNotFound)
}
