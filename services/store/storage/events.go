package storage

import (
	"fmt"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/eventstream/envelope"
	"github.com/no8s/no8s/services/internal/resource"
)

// OutboxRow is one committed change as a backend records it in its outbox,
// in the transaction that makes the change: one revision, one event.
type OutboxRow struct {
	Revision   int64
	ResourceID int64
	// EventType is envelope.Created, envelope.Modified, ...
	EventType string
	Subject   string
	// Payload is the encoded event, published as it is.
	Payload []byte
	// Document is the resource's document as the event carries it: what
	// a backend that keeps each resource's rendered document stores.
	Document  []byte
	CreatedAt time.Time
	// TraceContext is the W3C trace context of the change (package
	// tracing's Encode: traceparent, and tracestate after a newline), ""
	// for a change made without tracing and for rows written before the
	// column existed. The relay's publish continues that trace.
	TraceContext string
}

// RenderEvent is the backend-independent half of a backend's commit path
// (docs/design/outbox.md): it gives r the revision rev as its
// resource_version and the transaction's clock now as its updated_at,
// renders its document and encodes the event. unbounded skips the event
// size check: a deletion must always go through. The backend then writes
// r's row and the returned outbox row in the same transaction.
func RenderEvent(event string, r *resource.Resource, rev int64, now time.Time, unbounded bool) (OutboxRow, error) {
	r.ResourceVersion, r.UpdatedAt = rev, now
	doc, err := resource.Marshal(r)
	if err != nil {
		return OutboxRow{}, fmt.Errorf("marshal resource: %w", err)
	}
	if !unbounded && len(doc) > names.MaxEventBytes {
		return OutboxRow{}, EventTooLarge(len(doc))
	}
	payload, err := envelope.Encode(envelope.Event{Revision: rev, Type: event, Resource: r, ResourceJSON: doc, Timestamp: now})
	if err != nil {
		// Encode fails only on an unknown event type: a programming error.
		return OutboxRow{}, err
	}
	return OutboxRow{Revision: rev, ResourceID: r.ID, EventType: event, Subject: envelope.Subject(r.ResourceTypeName, r.ResourceTypeVersion),
		Payload: payload, Document: doc, CreatedAt: now}, nil
}

// NullIfEmpty is s as a nullable text column's value: nil (NULL) when s
// is "".
func NullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
