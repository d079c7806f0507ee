package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/eventstream"
)

// TestLargestResourceEndToEnd sends the largest resource the limits allow
// through the API and finds its event on the stream; one byte more is 413.
func TestLargestResourceEndToEnd(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{
		"name": "Blob", "version": "v1",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"data": map[string]any{"type": "string"}}},
	}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Blob/v1")
	// {"data":"xxx..."} exactly at the spec limit; annotations near theirs.
	data := strings.Repeat("x", names.MaxSpecBytes-len(`{"data":""}`))
	annotation := strings.Repeat("a", names.MaxMetadataBytes-1024)
	body := fmt.Sprintf(`{"name":"big","resource_type_name":"Blob","resource_type_version":"v1","annotations":{"example.com/note":%q},"spec":{"data":%q}}`, annotation, data)
	r := do(t, "POST", base+"/api/v1/resources", body)
	if r.status != 201 {
		t.Fatalf("largest resource: %d %.300s", r.status, r.body)
	}
	created := r.json(t)
	if got := do(t, "GET", base+"/api/v1/resources/by-name/Blob/v1/big", nil); got.status != 200 || len(got.body) < names.MaxSpecBytes {
		t.Fatalf("get largest resource: %d, %d bytes", got.status, len(got.body))
	}

	js, _ := c.jetstream()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, eventstream.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{eventstream.Subject("Blob", "v1")}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(15 * time.Second))
	if err != nil {
		t.Fatalf("no event for the largest resource: %v", err)
	}
	ev, err := eventstream.Decode(msg.Data())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != eventstream.Created || ev.ResourceID != int64(created["id"].(float64)) || len(ev.ResourceJSON) < names.MaxSpecBytes {
		t.Fatalf("event %s of %d with %d bytes", ev.Type, ev.ResourceID, len(ev.ResourceJSON))
	}
	t.Logf("largest resource: request %d bytes, event %d bytes", len(body), len(msg.Data()))

	// One byte more in the spec is refused and writes nothing.
	over := fmt.Sprintf(`{"name":"bigger","resource_type_name":"Blob","resource_type_version":"v1","spec":{"data":%q}}`, data+"x")
	if r := do(t, "POST", base+"/api/v1/resources", over); r.status != 413 {
		t.Fatalf("spec over the limit: %d %.300s", r.status, r.body)
	}
	if n := c.count(`SELECT count(*) FROM resources`); n != 1 {
		t.Fatalf("%d resources stored, want 1", n)
	}
}
