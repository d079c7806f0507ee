package eventstream

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/no8s/no8s/services/internal/resource"
)

func TestSetCloudEvent(t *testing.T) {
	r := &resource.Resource{ID: 1, Name: "production-pg", ResourceTypeName: "DatabaseCluster", ResourceTypeVersion: "v1", Spec: []byte(`{}`)}
	at := time.Date(2026, 11, 25, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	payload, err := Encode(Event{Revision: 42, Type: Reconciled, Resource: r, Timestamp: at})
	if err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	SetCloudEvent(h, CloudEventSource("store-1"), 42, Reconciled, at, payload)
	want := map[string]string{
		"ce-specversion": "1.0", "ce-type": "io.no8s.resource.reconciled", "ce-source": "/no8s/stores/store-1", "ce-id": "42",
		"ce-time": "2026-11-25T09:00:00.123456789Z", "ce-subject": "DatabaseCluster/v1/default/production-pg",
		"content-type": "application/protobuf; proto=no8s.events.v1.Event",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("headers %v", h)
	}
	h = nats.Header{}
	SetCloudEvent(h, "s", 1, Created, at, []byte("garbage"))
	if h.Get("ce-subject") != "" || h.Get("ce-type") != "io.no8s.resource.created" {
		t.Fatalf("unreadable payload: %v", h)
	}
}
