// Package envelope is the event envelope of the NO8S_EVENTS stream
// (no8s.events.v1.Event): event types, subjects, encoding and decoding. It
// depends on protobuf only, not on NATS, so that the store's SQL layer can
// encode events into outbox rows without knowing the broker; package
// eventstream re-exports it beside the stream's configuration.
package envelope

import (
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/client"
	eventsv1 "github.com/no8s/no8s/proto/gen/no8s/events/v1"
	"github.com/no8s/no8s/services/internal/resource"
)

// SubjectPrefix is the prefix of every event subject.
const SubjectPrefix = subjects.EventsPrefix

// Event types: the public API's (libs/client).
const (
	Created    = client.EventCreated
	Modified   = client.EventModified
	Deleted    = client.EventDeleted
	Reconciled = client.EventReconciled
	Purged     = client.EventPurged
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
	return subjects.Event(typeName, version)
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
		Namespace:           r.Namespace,
		ResourceName:        r.Name,
		ResourceTypeName:    r.ResourceTypeName,
		ResourceTypeVersion: r.ResourceTypeVersion,
		Resource:            doc,
		Timestamp:           timestamppb.New(ev.Timestamp),
		Labels:              r.Labels,
		ControllerUid:       resource.ControllerUID(r.OwnerReferences),
	})
}

// Decoded is an event read back from the stream: its Head, and what
// DecodeHead skips.
type Decoded struct {
	Head
	Labels map[string]string
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
	name := typeName(pe.GetEventType())
	if name == "" {
		return nil, fmt.Errorf("decode event: unknown event type %v", pe.GetEventType())
	}
	return &Decoded{
		Head: Head{
			Revision:            pe.GetRevision(),
			Type:                name,
			ResourceID:          pe.GetResourceId(),
			ResourceUID:         pe.GetResourceUid(),
			Namespace:           names.OrDefault(pe.GetNamespace()),
			ResourceName:        pe.GetResourceName(),
			ResourceTypeName:    pe.GetResourceTypeName(),
			ResourceTypeVersion: pe.GetResourceTypeVersion(),
			ControllerUID:       pe.GetControllerUid(),
		},
		Labels:       pe.GetLabels(),
		ResourceJSON: pe.GetResource(),
		Timestamp:    pe.GetTimestamp().AsTime(),
	}, nil
}

// fromProto is toProto reversed.
var fromProto = func() map[eventsv1.EventType]string {
	m := make(map[eventsv1.EventType]string, len(toProto))
	for n, t := range toProto {
		m[t] = n
	}
	return m
}()

// typeName is the event type's name, empty for an unknown one.
func typeName(t eventsv1.EventType) string { return fromProto[t] }

// Head is an event without its resource document, labels and timestamp:
// what a reader that keeps state per resource needs from every event (the
// scheduler). DecodeHead reads it without copying the rest.
type Head struct {
	Revision    int64
	Type        string
	ResourceID  int64
	ResourceUID string
	// Namespace is the resource's namespace (names.DefaultNamespace for
	// events published before namespaces existed, which carry none).
	Namespace           string
	ResourceName        string
	ResourceTypeName    string
	ResourceTypeVersion string
	// ControllerUID is the uid of the resource's controller owner, empty
	// when it has none.
	ControllerUID string
}

// DecodeHead parses an event's wire form but for its document, labels and
// timestamp, which it skips unread. On whatever Decode accepts it agrees
// with Decode.
func DecodeHead(data []byte) (Head, error) {
	h, t, err := head(data, true)
	if err != nil {
		return Head{}, fmt.Errorf("decode event: %w", err)
	}
	if h.Type = typeName(t); h.Type == "" {
		return Head{}, fmt.Errorf("decode event: unknown event type %v", t)
	}
	return h, nil
}

// Field numbers of no8s.events.v1.Event that head reads.
const (
	fieldRevision            = 1
	fieldEventType           = 2
	fieldResourceID          = 3
	fieldResourceUID         = 4
	fieldResourceName        = 5
	fieldResourceTypeName    = 6
	fieldResourceTypeVersion = 7
	fieldNamespace           = 11
	fieldControllerUID       = 12
)

// head walks an event's fields once, reading those of Head and skipping
// the others; a field of the wrong wire type is skipped, as proto.Unmarshal
// keeps it unknown, and a later occurrence of a field wins, as there. It
// leaves Head.Type empty and returns the event type. Without all it keeps
// only the resource's name, type, version and namespace (PeekName: the
// relay's, for every event), leaving the uids uncopied.
func head(data []byte, all bool) (Head, eventsv1.EventType, error) {
	var h Head
	var t eventsv1.EventType
	for len(data) > 0 {
		num, typ, l := protowire.ConsumeTag(data)
		if l < 0 {
			return Head{}, 0, protowire.ParseError(l)
		}
		data = data[l:]
		switch {
		case typ == protowire.VarintType && (num == fieldRevision || num == fieldEventType || num == fieldResourceID):
			v, l := protowire.ConsumeVarint(data)
			if l < 0 {
				return Head{}, 0, protowire.ParseError(l)
			}
			h.setVarint(num, v, &t)
			data = data[l:]
		case typ == protowire.BytesType && (num >= fieldResourceUID && num <= fieldResourceTypeVersion || num == fieldNamespace || num == fieldControllerUID):
			v, l := protowire.ConsumeBytes(data)
			if l < 0 {
				return Head{}, 0, protowire.ParseError(l)
			}
			if !utf8.Valid(v) {
				return Head{}, 0, fmt.Errorf("field %d: invalid UTF-8", num)
			}
			h.setString(num, v, all)
			data = data[l:]
		default:
			l = protowire.ConsumeFieldValue(num, typ, data)
			if l < 0 {
				return Head{}, 0, protowire.ParseError(l)
			}
			data = data[l:]
		}
	}
	h.Namespace = names.OrDefault(h.Namespace)
	return h, t, nil
}

// setVarint sets the varint field num of Head, or the event type t.
func (h *Head) setVarint(num protowire.Number, v uint64, t *eventsv1.EventType) {
	switch num {
	case fieldRevision:
		h.Revision = int64(v)
	case fieldEventType:
		*t = eventsv1.EventType(int32(v))
	case fieldResourceID:
		h.ResourceID = int64(v)
	}
}

// setString sets the string field num of Head; the uids only with all.
func (h *Head) setString(num protowire.Number, v []byte, all bool) {
	switch num {
	case fieldResourceUID:
		if all {
			h.ResourceUID = string(v)
		}
	case fieldResourceName:
		h.ResourceName = string(v)
	case fieldResourceTypeName:
		h.ResourceTypeName = string(v)
	case fieldResourceTypeVersion:
		h.ResourceTypeVersion = string(v)
	case fieldNamespace:
		h.Namespace = string(v)
	case fieldControllerUID:
		if all {
			h.ControllerUID = string(v)
		}
	}
}

// Name is what identifies the resource an event is about.
type Name struct {
	TypeName, TypeVersion, Namespace, Name string
}

// PeekName reads the resource's type, version, namespace and name from an event's
// wire form without decoding the rest (the resource document is skipped,
// not copied): the outbox relay labels every event with it.
func PeekName(data []byte) (Name, error) {
	h, _, err := head(data, false)
	if err != nil {
		return Name{}, fmt.Errorf("peek event: %w", err)
	}
	if h.ResourceName == "" || h.ResourceTypeName == "" || h.ResourceTypeVersion == "" {
		return Name{}, fmt.Errorf("peek event: no resource name")
	}
	return Name{TypeName: h.ResourceTypeName, TypeVersion: h.ResourceTypeVersion, Namespace: h.Namespace, Name: h.ResourceName}, nil
}
