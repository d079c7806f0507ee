package watch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/labelselector"
	"github.com/no8s/no8s/services/internal/resource"
)

// Event names that only the watch stream produces.
const (
	// Bookmark carries the newest revision a watcher has passed, so that a
	// filtered client can checkpoint without a matching event.
	Bookmark = client.EventBookmark
	// Error is the final event of a watch the gateway ends.
	Error = client.EventError
)

// Codes of the final ERROR event.
const (
	// CodeTooSlow: the client stopped reading; resume with Last-Event-ID.
	CodeTooSlow = client.CodeTooSlow
	// CodeGone: the resume point expired from the history; list again.
	CodeGone = client.CodeGone
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
	// Allow, when set, is asked about every event that matches the rest:
	// whether the watcher may see a resource of that type, namespace and
	// name (its roles). It must not block: the hub asks it while fanning
	// out.
	Allow func(typeName, namespace, name string) bool
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
	if len(f.Selector) > 0 && !f.Selector.Matches(e.labels) {
		return false
	}
	if f.Allow == nil {
		return true
	}
	name := ""
	if e.data != nil {
		name = e.data.ResourceName
	}
	return f.Allow(e.typeName, e.namespace, name)
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
	// data is the decoded event, rendered into its SSE frame the first time
	// a watcher needs it (frame): an event no watcher wants costs no
	// rendering.
	data      *eventstream.Decoded
	frameOnce sync.Once
	frameData []byte
	// skip marks a message that is no event (it could not be decoded, or
	// it is foreign): it only advances positions.
	skip bool
	// foreign marks a message the store did not publish (eventstream.Check).
	foreign bool
	// bookmark marks a hub bookmark: every event up to seq was fanned out.
	bookmark bool
	// base is the stream's base revision when the event was published.
	base int64
}

// decode turns a stream message into an event. A message that is not a
// valid event of the store storeID yields a skip event and the error (one
// wrapping eventstream.ErrForeign for a foreign message, whose headers,
// its base included, are not believed).
func decode(msg jetstream.Msg, storeID string) (*event, error) {
	md, err := msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("event metadata: %w", err)
	}
	ev := &event{seq: md.Sequence.Stream}
	if _, err := eventstream.Own(msg.Headers(), storeID); err != nil {
		ev.skip, ev.foreign = true, true
		return ev, fmt.Errorf("stream sequence %d (subject %s): %w", ev.seq, msg.Subject(), err)
	}
	d, err := eventstream.Decode(msg.Data())
	if err != nil {
		ev.skip = true
		return ev, fmt.Errorf("stream sequence %d: %w", ev.seq, err)
	}
	if err := eventstream.Check(msg.Headers(), storeID, d.Revision, 0); err != nil {
		ev.skip, ev.foreign = true, true
		return ev, fmt.Errorf("stream sequence %d (subject %s): %w", ev.seq, msg.Subject(), err)
	}
	ev.base = eventstream.BaseOf(msg.Headers())
	if y := d.Timestamp.UTC().Year(); y < 0 || y > 9999 {
		ev.skip = true
		return ev, fmt.Errorf("stream sequence %d: render event: timestamp out of range", ev.seq)
	}
	ev.data = d
	ev.revision = d.Revision
	ev.typeName = d.ResourceTypeName
	ev.typeVersion = d.ResourceTypeVersion
	ev.namespace = d.Namespace
	ev.resourceID = d.ResourceID
	ev.labels = d.Labels
	return ev, nil
}

// frame is the event's complete SSE frame, rendered once and shared by
// every watcher (read-only). Its data line is the seed's event:
// event_type, resource_id, resource_name, resource_type_name,
// resource_type_version, resource_data (the resource's document; null if
// the message carried none that is JSON) and timestamp.
func (e *event) frame() []byte {
	e.frameOnce.Do(func() {
		d := e.data
		b := make([]byte, 0, len(d.ResourceJSON)+len(d.ResourceName)+len(d.ResourceTypeName)+len(d.Type)+200)
		b = append(b, "event: "...)
		b = append(b, d.Type...)
		b = append(b, "\nid: "...)
		b = strconv.AppendInt(b, d.Revision, 10)
		b = append(b, "\ndata: {\"event_type\":"...)
		b = resource.AppendString(b, d.Type)
		b = append(b, `,"resource_id":`...)
		b = strconv.AppendInt(b, d.ResourceID, 10)
		b = append(b, `,"namespace":`...)
		b = resource.AppendString(b, d.Namespace)
		b = append(b, `,"resource_name":`...)
		b = resource.AppendString(b, d.ResourceName)
		b = append(b, `,"resource_type_name":`...)
		b = resource.AppendString(b, d.ResourceTypeName)
		b = append(b, `,"resource_type_version":`...)
		b = resource.AppendString(b, d.ResourceTypeVersion)
		b = append(b, `,"resource_data":`...)
		buf := bytes.NewBuffer(b) // Compact leaves it unchanged on an error
		if len(d.ResourceJSON) == 0 || json.Compact(buf, d.ResourceJSON) != nil {
			buf.WriteString("null")
		}
		b = buf.Bytes()
		b = append(b, `,"timestamp":"`...)
		b = d.Timestamp.UTC().AppendFormat(b, time.RFC3339Nano)
		e.frameData = append(b, "\"}\n\n"...)
	})
	return e.frameData
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
func revisionOf(m *jetstream.RawStreamMsg, storeID string) (int64, error) {
	rev, err := eventstream.Own(m.Header, storeID)
	if err != nil {
		return 0, fmt.Errorf("stream sequence %d: %w", m.Sequence, err)
	}
	return rev, nil
}
