package watch

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/resource"
)

// TestFrameMatchesTheSeedsEventShape: the hand-written frame is the one
// encoding/json rendered from the seed's event fields, also for names that
// need escaping, a document in another notation, one that is not JSON
// (null) and a timestamp in another zone.
func TestFrameMatchesTheSeedsEventShape(t *testing.T) {
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
	zone := time.FixedZone("X", -5*3600)
	for _, d := range []*eventstream.Decoded{
		{Head: eventstream.Head{Revision: 7, Type: eventstream.Created, ResourceID: 3, Namespace: "team-a", ResourceName: "db-1", ResourceTypeName: "DatabaseCluster", ResourceTypeVersion: "v1"},
			ResourceJSON: []byte(`{"id":3,"spec":{"a":1}}`), Timestamp: time.Date(2026, 11, 25, 10, 0, 0, 123456789, time.UTC)},
		{Head: eventstream.Head{Revision: 8, Type: eventstream.Modified, ResourceID: 4, ResourceName: `we"ird<&>` + "\u2028", ResourceTypeName: "T", ResourceTypeVersion: "v2"},
			ResourceJSON: []byte(" {\"id\" : 4,\n \"x\": [1, 2]} "), Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, zone)},
		{Head: eventstream.Head{Revision: 9, Type: eventstream.Deleted, ResourceID: 5}, ResourceJSON: []byte(`{"broken":`), Timestamp: time.Unix(0, 0)},
		{Head: eventstream.Head{Revision: 10, Type: eventstream.Purged, ResourceID: 6}, Timestamp: time.Unix(1, 5)},
	} {
		doc := json.RawMessage(d.ResourceJSON)
		if len(doc) == 0 || !json.Valid(doc) {
			doc = json.RawMessage("null")
		}
		data, err := resource.Marshal(eventData{EventType: d.Type, ResourceID: d.ResourceID, Namespace: d.Namespace, ResourceName: d.ResourceName,
			ResourceTypeName: d.ResourceTypeName, ResourceTypeVersion: d.ResourceTypeVersion, ResourceData: doc, Timestamp: d.Timestamp.UTC()})
		if err != nil {
			t.Fatal(err)
		}
		want := appendFrame(nil, d.Type, d.Revision, data)
		ev := &event{data: d}
		if got := ev.frame(); !bytes.Equal(got, want) {
			t.Errorf("revision %d:\n got %q\nwant %q", d.Revision, got, want)
		}
	}
}
