// Package envelope is the event envelope of the NO8S_EVENTS stream
// (no8s.events.v1.Event): event types, subjects, encoding and decoding. It
// depends on protobuf only, not on NATS, so that the store's SQL layer can
// encode events into outbox rows without knowing the broker; package
// eventstream re-exports it beside the stream's configuration.
package envelope

import (
	"fmt"
	"time"

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

// Decoded is an event read back from the stream.
type Decoded struct {
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
	Labels              map[string]string
	// ControllerUID is the uid of the resource's controller owner, empty
	// when it has none.
	ControllerUID string
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
		Namespace:           names.OrDefault(pe.GetNamespace()),
		ResourceName:        pe.GetResourceName(),
		ResourceTypeName:    pe.GetResourceTypeName(),
		ResourceTypeVersion: pe.GetResourceTypeVersion(),
		Labels:              pe.GetLabels(),
		ControllerUID:       pe.GetControllerUid(),
		ResourceJSON:        pe.GetResource(),
		Timestamp:           pe.GetTimestamp().AsTime(),
	}, nil
}

// Name is what identifies the resource an event is about.
type Name struct {
	TypeName, TypeVersion, Namespace, Name string
}

// Field numbers of no8s.events.v1.Event that PeekName reads.
const (
	fieldResourceName        = 5
	fieldResourceTypeName    = 6
	fieldResourceTypeVersion = 7
	fieldNamespace           = 11
)

// PeekName reads the resource's type, version, namespace and name from an event's
// wire form without decoding the rest (the resource document is skipped,
// not copied): the outbox relay labels every event with it.
func PeekName(data []byte) (Name, error) {
	var n Name
	for len(data) > 0 {
		num, typ, l := protowire.ConsumeTag(data)
		if l < 0 {
			return Name{}, fmt.Errorf("peek event: %w", protowire.ParseError(l))
		}
		data = data[l:]
		if typ == protowire.BytesType && (num >= fieldResourceName && num <= fieldResourceTypeVersion || num == fieldNamespace) {
			v, l := protowire.ConsumeBytes(data)
			if l < 0 {
				return Name{}, fmt.Errorf("peek event: %w", protowire.ParseError(l))
			}
			switch num {
			case fieldResourceName:
				n.Name = string(v)
			case fieldResourceTypeName:
				n.TypeName = string(v)
			case fieldResourceTypeVersion:
				n.TypeVersion = string(v)
			case fieldNamespace:
				n.Namespace = string(v)
			}
			data = data[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(num, typ, data)
		if l < 0 {
			return Name{}, fmt.Errorf("peek event: %w", protowire.ParseError(l))
		}
		data = data[l:]
	}
	if n.Name == "" || n.TypeName == "" || n.TypeVersion == "" {
		return Name{}, fmt.Errorf("peek event: no resource name")
	}
	n.Namespace = names.OrDefault(n.Namespace)
	return n, nil
}
