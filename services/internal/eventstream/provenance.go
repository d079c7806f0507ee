package eventstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Provenance: a message in NO8S_EVENTS is the store's own event when it
// carries the store's identity (StoreIDHeader, equal to the stream's
// no8s_store_id) and its revision as Nats-Msg-Id. Anything else reached the
// stream from another publisher (a foreign message): the relay never takes
// it for its position and readers never deliver it as a change. Headers can
// be copied, so this is robustness, not authenticity: NATS permissions keep
// other publishers off the stream (docs/design/outbox.md, "Foreign
// messages").

// ErrForeign marks a stream message that is not one of the store's events.
var ErrForeign = errors.New("foreign message: not published by this store")

// Own checks a message's headers: it must name storeID in StoreIDHeader
// and carry a positive revision as Nats-Msg-Id. An empty storeID (a stream
// made before stream identities) accepts any store id that is present. It
// returns the revision, or an error wrapping ErrForeign that says why not.
func Own(h nats.Header, storeID string) (int64, error) {
	sid := h.Get(StoreIDHeader)
	switch {
	case sid == "":
		return 0, fmt.Errorf("%w: no %s header", ErrForeign, StoreIDHeader)
	case storeID != "" && sid != storeID:
		return 0, fmt.Errorf("%w: %s %q is not the stream's store %q", ErrForeign, StoreIDHeader, excerpt([]byte(sid), 64), storeID)
	}
	id := h.Get(jetstream.MsgIDHeader)
	rev, err := strconv.ParseInt(id, 10, 64)
	if err != nil || rev <= 0 {
		return 0, fmt.Errorf("%w: %s %q is not a revision", ErrForeign, jetstream.MsgIDHeader, excerpt([]byte(id), 64))
	}
	return rev, nil
}

// Check is Own plus what a reader can check of a decoded event: the
// envelope's revision (the Revision of its Decoded or Head) must be the
// message's, and above after, the last revision the reader accepted
// (revisions only grow along the stream).
func Check(h nats.Header, storeID string, envelopeRevision, after int64) error {
	rev, err := Own(h, storeID)
	if err != nil {
		return err
	}
	if envelopeRevision != rev {
		return fmt.Errorf("%w: envelope revision %d under %s %d", ErrForeign, envelopeRevision, jetstream.MsgIDHeader, rev)
	}
	if rev <= after {
		return fmt.Errorf("%w: revision %d is not after %d, the stream's last event before it", ErrForeign, rev, after)
	}
	return nil
}

// Describe names a stream message for a log line: its sequence, subject,
// headers and a short excerpt of its body, never more.
func Describe(m *jetstream.RawStreamMsg) []any {
	hdr := make(map[string]string, len(m.Header))
	for k, v := range m.Header {
		if len(v) > 0 {
			hdr[k] = excerpt([]byte(v[0]), 64)
		}
	}
	return []any{"seq", m.Sequence, "subject", m.Subject, "headers", hdr, "bytes", len(m.Data), "excerpt", excerpt(m.Data, 32)}
}

// excerpt is at most n bytes of b, printable ASCII only.
func excerpt(b []byte, n int) string {
	out := make([]byte, 0, min(len(b), n)+3)
	for i, c := range b {
		if i == n {
			return string(out) + "..."
		}
		if c < 0x20 || c > 0x7e {
			c = '.'
		}
		out = append(out, c)
	}
	return string(out)
}

// MaxWalk bounds how many messages NewestOwn reads back from the stream's
// end before it gives up: a longer run of foreign messages is an error the
// caller retries, not a reason to trust one of them.
const MaxWalk = 100_000

// NewestOwn walks the stream back from its last message (lastSeq) to the
// newest message own accepts, reading no message at or below floor. own
// returns the message's revision, or an error wrapping ErrForeign for a
// message to pass over (any other error ends the walk). It returns that
// message and its revision (nil and 0 when none is left above floor) and
// the foreign messages passed, newest first.
func NewestOwn(ctx context.Context, s jetstream.Stream, lastSeq, floor uint64, own func(*jetstream.RawStreamMsg) (int64, error)) (int64, *jetstream.RawStreamMsg, []*jetstream.RawStreamMsg, error) {
	var passed []*jetstream.RawStreamMsg
	for seq := lastSeq; seq > floor; seq-- {
		if len(passed) >= MaxWalk {
			return 0, nil, passed, fmt.Errorf("the last %d messages of %s are foreign: giving up the walk back to the store's newest event", MaxWalk, StreamName)
		}
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted, or expired under us
		}
		if err != nil {
			return 0, nil, passed, fmt.Errorf("read stream sequence %d: %w", seq, err)
		}
		rev, err := own(m)
		if errors.Is(err, ErrForeign) {
			passed = append(passed, m)
			continue
		}
		if err != nil {
			return 0, nil, passed, err
		}
		return rev, m, passed, nil
	}
	return 0, nil, passed, nil
}

// StoreIDs is a reader's view of the store id its stream belongs to. A
// rebuilt stream belongs to a new database: when a message names a store
// other than the one known, Adopt reads the stream's identity again (at
// most once per RefreshEvery, so that a flood of foreign messages costs a
// read a second) and takes the new id if the stream has it now.
type StoreIDs struct {
	stream func(ctx context.Context) (string, error)

	mu     sync.Mutex
	id     string
	readAt time.Time
}

// RefreshEvery bounds how often StoreIDs reads the stream's identity.
const RefreshEvery = time.Second

// NewStoreIDs starts from id; stream returns the stream's store id now.
func NewStoreIDs(id string, stream func(ctx context.Context) (string, error)) *StoreIDs {
	return &StoreIDs{id: id, stream: stream}
}

// ID is the store id known now.
func (s *StoreIDs) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Adopt reports whether h names a store other than the one known that the
// stream now belongs to; the known id is then that store's.
func (s *StoreIDs) Adopt(ctx context.Context, h nats.Header) bool {
	named := h.Get(StoreIDHeader)
	s.mu.Lock()
	defer s.mu.Unlock()
	if named == "" || named == s.id || time.Since(s.readAt) < RefreshEvery {
		return false
	}
	s.readAt = time.Now()
	id, err := s.stream(ctx)
	if err != nil || id != named {
		return false
	}
	s.id = id
	return true
}

// StreamStoreID reads the store id in a stream's identity ("" when it has
// none).
func StreamStoreID(s jetstream.Stream) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		info, err := s.Info(ctx)
		if err != nil {
			return "", fmt.Errorf("stream info: %w", err)
		}
		id, _ := IdentityOf(info.Config)
		return id.StoreID, nil
	}
}
