package eventstream

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/no8s/no8s/services/internal/eventstream/envelope"
)

// CloudEvents 1.0 attributes in NATS headers (binary content mode: one
// header per attribute, prefixed ce-; the data's media type in
// content-type), on every event the relay publishes, so that a subscriber
// without our protobuf can route and deduplicate events. docs/events-contract.md is
// the contract.
const (
	HeaderSpecVersion = "ce-specversion"
	HeaderType        = "ce-type"
	HeaderSource      = "ce-source"
	HeaderID          = "ce-id"
	HeaderTime        = "ce-time"
	HeaderSubject     = "ce-subject"
	HeaderContentType = "content-type"

	// SpecVersion is the CloudEvents version.
	SpecVersion = "1.0"
	// TypePrefix prefixes ce-type: io.no8s.resource.created, .modified,
	// .deleted, .reconciled, .purged.
	TypePrefix = "io.no8s.resource."
	// DataContentType is the media type of the data (the message body).
	DataContentType = "application/protobuf; proto=no8s.events.v1.Event"
	// sourcePrefix prefixes ce-source: /no8s/stores/<store id>.
	sourcePrefix = "/no8s/stores/"
)

// CloudEventType is the ce-type of an event type (CREATED, ...).
func CloudEventType(eventType string) string {
	return TypePrefix + strings.ToLower(eventType)
}

// CloudEventSource is the ce-source of the events of the store with the
// given id: with ce-id (the revision) it identifies an event.
func CloudEventSource(storeID string) string { return sourcePrefix + storeID }

// CloudEventSubject is the ce-subject of an event about a resource:
// <Type>/<version>/<namespace>/<name> (a namespace absent from an old
// event is default).
func CloudEventSubject(n envelope.Name) string {
	return n.TypeName + "/" + n.TypeVersion + "/" + n.Namespace + "/" + n.Name
}

// SetCloudEvent adds the CloudEvents attributes of one event to h: source
// (CloudEventSource), the revision as id, the event type, the commit time
// and, read from payload, the resource as subject. A payload whose resource
// cannot be read gets no ce-subject (the attribute is optional).
func SetCloudEvent(h nats.Header, source string, revision int64, eventType string, at time.Time, payload []byte) {
	h.Set(HeaderSpecVersion, SpecVersion)
	h.Set(HeaderType, CloudEventType(eventType))
	h.Set(HeaderSource, source)
	h.Set(HeaderID, strconv.FormatInt(revision, 10))
	h.Set(HeaderTime, at.UTC().Format(time.RFC3339Nano))
	h.Set(HeaderContentType, DataContentType)
	if n, err := envelope.PeekName(payload); err == nil {
		h.Set(HeaderSubject, CloudEventSubject(n))
	}
}
