// Package eventstream is the contract of the NO8S_EVENTS JetStream stream:
// its configuration, subject names and the event envelope
// (no8s.events.v1.Event, encoded by package envelope and re-exported here).
// The store's outbox relay publishes through it and watchers read through
// it.
package eventstream

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
)

// Stream and subject names: libs/api/subjects holds them. These two names
// stay until services/store names subjects.EventsStream and
// subjects.WakeSubject itself.
const (
	StreamName    = subjects.EventsStream
	SubjectPrefix = envelope.SubjectPrefix
	// WakeSubject carries core-NATS hints that the outbox has new rows.
	WakeSubject = subjects.WakeSubject
)

// The envelope (package envelope), re-exported for the stream's readers.

// Event types, as the seed names them.
const (
	Created    = envelope.Created
	Modified   = envelope.Modified
	Deleted    = envelope.Deleted
	Reconciled = envelope.Reconciled
	Purged     = envelope.Purged
)

// Subject is the subject of events about resources of one type and version.
func Subject(typeName, version string) string { return envelope.Subject(typeName, version) }

// Event is one change to a resource.
type Event = envelope.Event

// Encode marshals an event into its wire form.
func Encode(ev Event) ([]byte, error) { return envelope.Encode(ev) }

// Decoded is an event read back from the stream.
type Decoded = envelope.Decoded

// Decode parses an event's wire form.
func Decode(data []byte) (*Decoded, error) { return envelope.Decode(data) }

// Head is envelope.Head: an event without its document, labels and
// timestamp.
type Head = envelope.Head

// DecodeHead is envelope.DecodeHead.
func DecodeHead(data []byte) (Head, error) { return envelope.DecodeHead(data) }

// MsgID is the Nats-Msg-Id of the event with the given revision: JetStream
// drops a republished revision as a duplicate.
func MsgID(revision int64) string {
	return strconv.FormatInt(revision, 10)
}

// StreamConfig sets the retention of the event stream.
type StreamConfig = subjects.StreamSettings

// DefaultStreamConfig is libs/api/subjects' event stream settings: a day of
// history with a 2-minute dedup window.
func DefaultStreamConfig() StreamConfig { return subjects.EventsSettings() }

// Identity ties the stream to the database whose changes it carries. It is
// kept in the stream's metadata (nats-server 2.10 or newer), and the store id
// also travels on every event in StoreIDHeader.
type Identity struct {
	// StoreID is the database's identity (relay_state.store_id), made once
	// when the database was created.
	StoreID string
	// Base is the revision the stream's history starts after: a watcher that
	// resumes before it must list again (410). 0 for a stream that holds
	// every revision since the database began.
	Base int64
	// BaseSeq is the stream sequence the history after Base follows: while
	// the stream's first sequence is at most BaseSeq+1, nothing after Base
	// has expired.
	BaseSeq uint64
}

// Stream metadata keys and the event header that carry the identity.
const (
	StoreIDHeader = "No8s-Store-Id"
	// BaseHeader carries the stream's base revision at publish time: a
	// reader that sees it grow knows the stream was rebuilt.
	BaseHeader    = "No8s-Stream-Base"
	metaStoreID   = "no8s_store_id"
	metaBase      = "no8s_base_revision"
	metaBaseSeq   = "no8s_base_sequence"
	minServerNote = "stream metadata needs nats-server 2.10 or newer"
)

// IdentityOf reads the identity from a stream's configuration; ok is false
// for a stream created without one (by a release before identities).
func IdentityOf(cfg jetstream.StreamConfig) (id Identity, ok bool) {
	sid := cfg.Metadata[metaStoreID]
	if sid == "" {
		return Identity{}, false
	}
	base, _ := strconv.ParseInt(cfg.Metadata[metaBase], 10, 64)
	seq, _ := strconv.ParseUint(cfg.Metadata[metaBaseSeq], 10, 64)
	return Identity{StoreID: sid, Base: base, BaseSeq: seq}, true
}

// BaseOf reads the base revision an event was published under (0 when the
// header is absent).
func BaseOf(h nats.Header) int64 {
	b, _ := strconv.ParseInt(h.Get(BaseHeader), 10, 64)
	return b
}

// streamConfig is the event stream's configuration under c, with id in its
// metadata when set.
func streamConfig(c StreamConfig, id Identity) jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if c.Memory {
		storage = jetstream.MemoryStorage
	}
	if c.Replicas < 1 {
		c.Replicas = 1
	}
	cfg := jetstream.StreamConfig{
		Name:        StreamName,
		Description: "no8s resource events, one per committed change, in revision order",
		Subjects:    []string{subjects.EventsAll},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      c.MaxAge,
		Duplicates:  c.Duplicates,
		Storage:     storage,
		Replicas:    c.Replicas,
		MaxMsgSize:  1 << 20,
		Discard:     jetstream.DiscardOld,
	}
	if id.StoreID != "" {
		cfg.Metadata = map[string]string{metaStoreID: id.StoreID, metaBase: strconv.FormatInt(id.Base, 10), metaBaseSeq: strconv.FormatUint(id.BaseSeq, 10)}
	}
	return cfg
}

// Ensure creates the stream or updates its configuration, recording id in
// its metadata when id.StoreID is set (an empty id keeps what the stream
// has). It fails when the server drops the metadata: identities need
// nats-server 2.10 or newer.
func Ensure(ctx context.Context, js jetstream.JetStream, c StreamConfig, id Identity) (jetstream.Stream, error) {
	cfg := streamConfig(c, id)
	if id.StoreID == "" {
		if s, err := js.Stream(ctx, StreamName); err == nil {
			cfg.Metadata = s.CachedInfo().Config.Metadata
		}
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamName, err)
	}
	if id.StoreID != "" {
		if got, ok := IdentityOf(s.CachedInfo().Config); !ok || got != id {
			return nil, fmt.Errorf("ensure stream %s: the server did not keep the stream's identity metadata (%s)", StreamName, minServerNote)
		}
	}
	return s, nil
}

// LastEvent returns the store's newest event in the stream and its
// revision, or (0, nil) when the stream holds none: foreign messages after
// it (Own, by the stream's identity) are passed over.
func LastEvent(ctx context.Context, s jetstream.Stream) (int64, *jetstream.RawStreamMsg, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("stream info: %w", err)
	}
	if info.State.Msgs == 0 {
		return 0, nil, nil
	}
	id, _ := IdentityOf(info.Config)
	rev, m, _, err := NewestOwn(ctx, s, info.State.LastSeq, Floor(info.State), func(m *jetstream.RawStreamMsg) (int64, error) {
		return Own(m.Header, id.StoreID)
	})
	return rev, m, err
}

// Floor is the sequence below a stream's first message: walks back stop
// above it.
func Floor(st jetstream.StreamState) uint64 {
	if st.FirstSeq == 0 {
		return 0
	}
	return st.FirstSeq - 1
}

// LastRevision returns the revision of the store's newest event in the
// stream, or 0 when it holds none.
func LastRevision(ctx context.Context, s jetstream.Stream) (int64, error) {
	rev, _, err := LastEvent(ctx, s)
	return rev, err
}
