package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNamespaces runs namespaceFlow against the real binaries, each service
// its own process, on PostgreSQL; TestNamespacesSQLite on the embedded
// store.
func TestNamespaces(t *testing.T) {
	c := newCluster(t)
	namespaceFlow(t, c)
}

// TestNamespacesSQLite is TestNamespaces with the store on the embedded
// backend (the one `no8s dev` runs).
func TestNamespacesSQLite(t *testing.T) {
	namespaceFlow(t, newSQLiteCluster(t))
}

// namespaceFlow: with the scheduler and the real noop reconciler in the
// loop, one name in three namespaces is three resources, each reconciled;
// lists, by-name reads and a watch are scoped by ?namespace=; a create in a
// namespace that does not exist is a 404 naming it; deleting a namespace
// deletes its resource after its reconciler's cleanup (the watch of that
// namespace sees DELETED with the reconciler's finalizer, then PURGED
// without it), then the namespace is gone, while the other namespaces'
// resources stay ready; the namespace and the name can then be used again.
func namespaceFlow(t *testing.T, c *cluster) {
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	c.startReconciler(c.storeAddrs[0], "Widget/v1")
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Widget", "version": "v1",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		if r := do(t, "POST", base+"/api/v1/namespaces", map[string]any{"name": ns}); r.status != 201 || r.json(t)["status"] != "active" {
			t.Fatalf("create namespace %s: %d %s", ns, r.status, r.body)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watchA, _, err := dialWatch(ctx, base+"/api/v1/events?namespace=team-a&resource_type=Widget", -1, false, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer watchA.close()

	create := func(ns, name string) response {
		b := map[string]any{"name": name, "resource_type_name": "Widget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}}
		if ns != "" {
			b["namespace"] = ns
		}
		return do(t, "POST", base+"/api/v1/resources", b)
	}
	ids := map[string]int64{}
	for _, ns := range []string{"", "team-a", "team-b"} {
		r := create(ns, "same")
		if r.status != 201 {
			t.Fatalf("create same in %q: %d %s", ns, r.status, r.body)
		}
		doc := r.json(t)
		want := ns
		if want == "" {
			want = "default"
		}
		if doc["namespace"] != want {
			t.Fatalf("created in %q: namespace %v", ns, doc["namespace"])
		}
		ids[want] = int64(doc["id"].(float64))
	}
	if r := create("team-a", "same"); r.status != 409 || r.json(t)["code"] != "name_taken" {
		t.Fatalf("same name twice in team-a: %d %s", r.status, r.body)
	}
	r := create("nowhere", "same")
	if e := r.json(t); r.status != 404 || e["code"] != "namespace_not_found" || !strings.Contains(e["detail"].(string), `"nowhere"`) {
		t.Fatalf("create in a namespace that does not exist: %d %s", r.status, r.body)
	}
	for _, id := range ids {
		waitResource(t, base, id, "ready", func(r map[string]any) bool { return r["status"] == "ready" && r["phase"] == "Ready" })
	}

	// Reads by name and lists, scoped.
	for _, q := range []struct{ query, ns string }{{"", "default"}, {"?namespace=default", "default"}, {"?namespace=team-a", "team-a"}, {"?namespace=team-b", "team-b"}} {
		r := do(t, "GET", base+"/api/v1/resources/by-name/Widget/v1/same"+q.query, nil)
		if r.status != 200 || int64(r.json(t)["id"].(float64)) != ids[q.ns] {
			t.Fatalf("by name%s: %d %s, want id %d", q.query, r.status, r.body, ids[q.ns])
		}
	}
	if r := do(t, "GET", base+"/api/v1/resources/by-name/Widget/v1/same?namespace=nowhere", nil); r.status != 404 {
		t.Fatalf("by name in a missing namespace: %d %s", r.status, r.body)
	}
	for _, q := range []struct {
		query string
		want  []int64
	}{
		{"?resource_type=Widget&namespace=team-a", []int64{ids["team-a"]}},
		{"?namespace=team-b", []int64{ids["team-b"]}},
		{"?resource_type=Widget", []int64{ids["default"], ids["team-a"], ids["team-b"]}},
		{"?namespace=nowhere", nil},
	} {
		var got []int64
		for _, item := range do(t, "GET", base+"/api/v1/resources"+q.query, nil).list(t) {
			got = append(got, int64(item["id"].(float64)))
		}
		if !slices.Equal(got, q.want) {
			t.Fatalf("list%s: %v, want %v", q.query, got, q.want)
		}
	}

	// Deleting team-a: terminating at once, then its resource goes through
	// its reconciler's cleanup, then the namespace goes.
	del := do(t, "DELETE", base+"/api/v1/namespaces/team-a", nil)
	if del.status != 202 || del.json(t)["status"] != "terminating" {
		t.Fatalf("delete team-a: %d %s", del.status, del.body)
	}
	if r := create("team-a", "late"); r.status != 409 || r.json(t)["code"] != "namespace_terminating" {
		if r.status != 404 { // gone already: the reconciler was quick
			t.Fatalf("create in a terminating namespace: %d %s", r.status, r.body)
		}
	}
	waitGone(t, base, ids["team-a"])
	waitFor(t, 30*time.Second, "namespace team-a gone", func() error {
		if r := do(t, "GET", base+"/api/v1/namespaces/team-a", nil); r.status != 404 {
			return fmt.Errorf("GET team-a: %d %s", r.status, r.body)
		}
		return nil
	})
	for _, ns := range []string{"default", "team-b"} {
		if got := getResource(t, base, ids[ns]); got == nil || got["status"] != "ready" || got["deleted_at"] != nil {
			t.Fatalf("%s's resource after team-a's deletion: %v", ns, brief(got))
		}
	}
	var left []string
	for _, n := range do(t, "GET", base+"/api/v1/namespaces", nil).list(t) {
		left = append(left, n["name"].(string))
	}
	if !slices.Equal(left, []string{"default", "team-b"}) {
		t.Fatalf("namespaces left: %v", left)
	}

	// The team-a watch saw team-a's resource only, from its creation to
	// its purge after the reconciler removed its finalizer.
	var seen []string
	var deletedFinalizers, purgedFinalizers []string
	for len(seen) == 0 || seen[len(seen)-1] != "PURGED" {
		select {
		case ev, ok := <-watchA.events:
			if !ok {
				t.Fatalf("the watch ended: %v (saw %v)", watchA.err, seen)
			}
			if ev.name == "BOOKMARK" {
				continue
			}
			var d struct {
				ResourceID   int64  `json:"resource_id"`
				Namespace    string `json:"namespace"`
				ResourceData struct {
					Namespace  string   `json:"namespace"`
					Finalizers []string `json:"finalizers"`
				} `json:"resource_data"`
			}
			if err := json.Unmarshal(ev.data, &d); err != nil {
				t.Fatal(err)
			}
			if d.ResourceID != ids["team-a"] || d.Namespace != "team-a" || d.ResourceData.Namespace != "team-a" {
				t.Fatalf("the team-a watch got %s %s", ev.name, ev.data)
			}
			seen = append(seen, ev.name)
			switch ev.name {
			case "DELETED":
				deletedFinalizers = d.ResourceData.Finalizers
			case "PURGED":
				purgedFinalizers = d.ResourceData.Finalizers
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the team-a watch saw %v and then nothing", seen)
		}
	}
	if seen[0] != "CREATED" || !slices.Contains(seen, "RECONCILED") || !slices.Contains(seen, "DELETED") {
		t.Fatalf("the team-a watch saw %v", seen)
	}
	if !slices.Equal(deletedFinalizers, []string{"reconciler.no8s.io/noop"}) || len(purgedFinalizers) != 0 {
		t.Fatalf("finalizers at DELETED %v and at PURGED %v: want the reconciler's, then none (its cleanup removed it)", deletedFinalizers, purgedFinalizers)
	}

	// The namespace and the name are free again.
	if r := do(t, "POST", base+"/api/v1/namespaces", map[string]any{"name": "team-a"}); r.status != 201 {
		t.Fatalf("create team-a again: %d %s", r.status, r.body)
	}
	r = create("team-a", "same")
	if r.status != 201 || int64(r.json(t)["id"].(float64)) <= ids["team-b"] {
		t.Fatalf("same in team-a again: %d %s", r.status, r.body)
	}
	waitResource(t, base, int64(r.json(t)["id"].(float64)), "ready", func(r map[string]any) bool { return r["status"] == "ready" })
}
