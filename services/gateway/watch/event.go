package watch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/labelselector"
	"github.com/no8s/no8s/services/internal/resource"
)

// Event names that only the watch stream produces.
const (
	// Bookmark carries the newest revision a watcher has passed, so that a
	// filtered client can checkpoint without a matching event.
	Bookmark = "BOOKMARK"
	// Error is the final event of a watch the gateway ends.
	Error = "ERROR"
)

// Codes of the final ERROR event.
const (
	// CodeTooSlow: the client stopped reading; resume with Last-Event-ID.
	CodeTooSlow = "too_slow"
	// CodeGone: the resume point expired from the history; list again.
	CodeGone = "gone"
)

// Filter selects the events a watcher receives. The zero Filter selects all.
type Filter struct {
	TypeName    string
	TypeVersion string
	// Namespace, when set, selects one namespace (matched in the gateway,
	// like labels: subjects do not carry it).
	Namespace string
	// ResourceID, when not 0, selects one resource.
	ResourceID int64
	Selector   labelselector.Selector
}

// subject is the stream subject filter that selects f's type and version.
func (f Filter) subject() string {
	if f.TypeName == "" && f.TypeVersion == "" {
		return subjects.EventsAll
	}
	t, v := f.TypeName, f.TypeVersion
	if t == "" {
		t = "*"
	}
	if v == "" {
		v = "*"
	}
	return subjects.Event(t, v)
}

func (f Filter) match(e *event) bool {
	if e.skip {
		return false
	}
	if f.TypeName != "" && e.typeName != f.TypeName {
		return false
	}
	if f.TypeVersion != "" && e.typeVersion != f.TypeVersion {
		return false
	}
	if f.Namespace != "" && e.namespace != f.Namespace {
		return false
	}
	if f.ResourceID != 0 && e.resourceID != f.ResourceID {
		return false
	}
	return len(f.Selector) == 0 || f.Selector.Matches(e.labels)
}

// event is one stream message, decoded once and rendered as an SSE frame.
type event struct {
	seq         uint64
	revision    int64
	typeName    string
	typeVersion string
	namespace   string
	resourceID  int64
	labels      map[string]string
	// frame is the complete SSE frame; shared by every watcher, read-only.
	frame []byte
	// skip marks a message that is no event (it could not be decoded): it
	// only advances positions.
	skip bool
	// bookmark marks a hub bookmark: every event up to seq was fanned out.
	bookmark bool
	// base is the stream's base revision when the event was published.
	base int64
}

// eventData is the data line of an event, as the seed defines it.
type eventData struct {
	EventType           string          `json:"event_type"`
	ResourceID          int64           `json:"resource_id"`
	Namespace           string          `json:"namespace"`
	ResourceName        string          `json:"resource_name"`
	ResourceTypeName    string          `json:"resource_type_name"`
	ResourceTypeVersion string          `json:"resource_type_version"`
	ResourceData        json.RawMessage `json:"resource_data"`
	Timestamp           time.Time       `json:"timestamp"`
}

// decode turns a stream message into an event. A message that is not a
// valid event yields a skip event and the error.
func decode(msg jetstream.Msg) (*event, error) {
	md, err := msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("event metadata: %w", err)
	}
	ev := &event{seq: md.Sequence.Stream, base: eventstream.BaseOf(msg.Headers())}
	d, err := eventstream.Decode(msg.Data())
	if err != nil {
		ev.skip = true
		return ev, fmt.Errorf("stream sequence %d: %w", ev.seq, err)
	}
	doc := json.RawMessage(d.ResourceJSON)
	if len(doc) == 0 || !json.Valid(doc) {
		doc = json.RawMessage("null")
	}
	data, err := resource.Marshal(eventData{
		EventType:           d.Type,
		ResourceID:          d.ResourceID,
		Namespace:           d.Namespace,
		ResourceName:        d.ResourceName,
		ResourceTypeName:    d.ResourceTypeName,
		ResourceTypeVersion: d.ResourceTypeVersion,
		ResourceData:        doc,
		Timestamp:           d.Timestamp.UTC(),
	})
	if err != nil {
		ev.skip = true
		return ev, fmt.Errorf("stream sequence %d: render event: %w", ev.seq, err)
	}
	ev.revision = d.Revision
	ev.typeName = d.ResourceTypeName
	ev.typeVersion = d.ResourceTypeVersion
	ev.namespace = d.Namespace
	ev.resourceID = d.ResourceID
	ev.labels = d.Labels
	ev.frame = appendFrame(make([]byte, 0, len(data)+len(d.Type)+40), d.Type, d.Revision, data)
	return ev, nil
}

// appendFrame appends one SSE event. data must hold no line break (compact
// JSON never does).
func appendFrame(b []byte, name string, id int64, data []byte) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\nid: "...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// bookmarkFrame renders a BOOKMARK event for revision rev.
func bookmarkFrame(rev int64, now time.Time) []byte {
	data, _ := resource.Marshal(struct {
		EventType string    `json:"event_type"`
		Revision  int64     `json:"revision"`
		Timestamp time.Time `json:"timestamp"`
	}{Bookmark, rev, now.UTC()})
	return appendFrame(nil, Bookmark, rev, data)
}

// errorFrame renders the final ERROR event. It carries no id, so that the
// client's Last-Event-ID stays the last event it received.
func errorFrame(code, detail string) []byte {
	data, _ := resource.Marshal(struct {
		EventType string `json:"event_type"`
		Code      string `json:"code"`
		Detail    string `json:"detail"`
	}{Error, code, detail})
	b := append([]byte("event: "+Error+"\ndata: "), data...)
	return append(b, "\n\n"...)
}

// revisionOf reads a stored message's revision from its Nats-Msg-Id.
func revisionOf(m *jetstream.RawStreamMsg) (int64, error) {
	rev, err := strconv.ParseInt(m.Header.Get(jetstream.MsgIDHeader), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stream sequence %d has no revision id: %w", m.Sequence, err)
	}
	return rev, nil
}
