// Package eventstream is the contract of the NO8S_EVENTS JetStream stream:
// its configuration, subject names and the encoding of the event envelope
// (no8s.events.v1.Event). The store's outbox relay publishes through it and
// watchers read through it.
package eventstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/no8s/no8s/proto/gen/no8s/events/v1"
	"github.com/no8s/no8s/services/internal/resource"
)

// Stream and subject names.
const (
	StreamName    = "NO8S_EVENTS"
	SubjectPrefix = "no8s.events"
	// WakeSubject carries core-NATS hints that the outbox has new rows.
	WakeSubject = "no8s.internal.outbox.wake"
)

// Event types, as the seed names them.
const (
	Created    = "CREATED"
	Modified   = "MODIFIED"
	Deleted    = "DELETED"
	Reconciled = "RECONCILED"
	Purged     = "PURGED"
)

var toProto = map[string]eventsv1.EventType{
	Created:    eventsv1.EventType_EVENT_TYPE_CREATED,
	Modified:   eventsv1.EventType_EVENT_TYPE_MODIFIED,
	Deleted:    eventsv1.EventType_EVENT_TYPE_DELETED,
	Reconciled: eventsv1.EventType_EVENT_TYPE_RECONCILED,
	Purged:     eventsv1.EventType_EVENT_TYPE_PURGED,
}

// Subject is the subject of events about resources of one type and version.
func Subject(typeName, version string) string {
	return SubjectPrefix + "." + typeName + "." + version
}

// Event is one change to a resource.
type Event struct {
	Revision int64
	Type     string
	// Resource is the resource after the change.
	Resource *resource.Resource
	// ResourceJSON is the canonical document of Resource; Encode computes it
	// when empty.
	ResourceJSON []byte
	Timestamp    time.Time
}

// Encode marshals an event into its wire form.
func Encode(ev Event) ([]byte, error) {
	t, ok := toProto[ev.Type]
	if !ok {
		return nil, fmt.Errorf("encode event: unknown event type %q", ev.Type)
	}
	doc := ev.ResourceJSON
	if doc == nil {
		var err error
		if doc, err = resource.Marshal(ev.Resource); err != nil {
			return nil, fmt.Errorf("encode event: %w", err)
		}
	}
	r := ev.Resource
	return proto.Marshal(&eventsv1.Event{
		Revision:            ev.Revision,
		EventType:           t,
		ResourceId:          r.ID,
		ResourceUid:         r.UID,
		ResourceName:        r.Name,
		ResourceTypeName:    r.ResourceTypeName,
		ResourceTypeVersion: r.ResourceTypeVersion,
		Resource:            doc,
		Timestamp:           timestamppb.New(ev.Timestamp),
		Labels:              r.Labels,
	})
}

// Decoded is an event read back from the stream.
type Decoded struct {
	Revision            int64
	Type                string
	ResourceID          int64
	ResourceUID         string
	ResourceName        string
	ResourceTypeName    string
	ResourceTypeVersion string
	Labels              map[string]string
	// ResourceJSON is the resource's canonical document after the change.
	ResourceJSON []byte
	Timestamp    time.Time
}

// Decode parses an event's wire form.
func Decode(data []byte) (*Decoded, error) {
	var pe eventsv1.Event
	if err := proto.Unmarshal(data, &pe); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	name := ""
	for n, t := range toProto {
		if t == pe.GetEventType() {
			name = n
		}
	}
	if name == "" {
		return nil, fmt.Errorf("decode event: unknown event type %v", pe.GetEventType())
	}
	return &Decoded{
		Revision:            pe.GetRevision(),
		Type:                name,
		ResourceID:          pe.GetResourceId(),
		ResourceUID:         pe.GetResourceUid(),
		ResourceName:        pe.GetResourceName(),
		ResourceTypeName:    pe.GetResourceTypeName(),
		ResourceTypeVersion: pe.GetResourceTypeVersion(),
		Labels:              pe.GetLabels(),
		ResourceJSON:        pe.GetResource(),
		Timestamp:           pe.GetTimestamp().AsTime(),
	}, nil
}

// MsgID is the Nats-Msg-Id of the event with the given revision: JetStream
// drops a republished revision as a duplicate.
func MsgID(revision int64) string {
	return strconv.FormatInt(revision, 10)
}

// StreamConfig sets the retention of the event stream.
type StreamConfig struct {
	// MaxAge is how long events are kept (watch resume horizon).
	MaxAge time.Duration
	// Duplicates is the deduplication window for republished revisions.
	Duplicates time.Duration
	// Replicas is the stream replication factor (1 on a single server).
	Replicas int
	// Memory keeps the stream in memory (tests only).
	Memory bool
}

// DefaultStreamConfig is a day of history with a 10 minute dedup window.
func DefaultStreamConfig() StreamConfig {
	return StreamConfig{MaxAge: 24 * time.Hour, Duplicates: 10 * time.Minute, Replicas: 1}
}

// Ensure creates the stream or updates its configuration.
func Ensure(ctx context.Context, js jetstream.JetStream, c StreamConfig) (jetstream.Stream, error) {
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
		Subjects:    []string{SubjectPrefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      c.MaxAge,
		Duplicates:  c.Duplicates,
		Storage:     storage,
		Replicas:    c.Replicas,
		MaxMsgSize:  1 << 20,
		Discard:     jetstream.DiscardOld,
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamName, err)
	}
	return s, nil
}

// LastRevision returns the revision of the newest event in the stream, or 0
// when the stream is empty.
func LastRevision(ctx context.Context, s jetstream.Stream) (int64, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	if info.State.Msgs == 0 {
		return 0, nil
	}
	msg, err := s.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("read last event: %w", err)
	}
	rev, err := strconv.ParseInt(msg.Header.Get(jetstream.MsgIDHeader), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("last event has no revision id: %w", err)
	}
	return rev, nil
}
