package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/httpsource"
)

// feedToken is the bearer token the test feed wants; registry-sync reads it
// from NO8S_REGISTRY_HS_TOKEN through the source's header reference.
const feedToken = "Bearer feed-secret"

// feedItem is one item of the test feed's list.
type feedItem struct {
	ID    string `json:"id"`
	Image string `json:"image"`
	Team  string `json:"team"`
}

// feed is a local HTTP server whose list the test changes: it answers
// {"data":{"items":[...]}} with an ETag, 304 to a matching If-None-Match,
// 500 or a sleep past the source's timeout when told to, and counts what it
// answered.
type feed struct {
	srv         *httptest.Server
	mu          sync.Mutex
	items       []any
	mode        string // "", "500", "sleep"
	requests    atomic.Int64
	notModified atomic.Int64
	unauth      atomic.Int64
}

func newFeed(t *testing.T) *feed {
	f := &feed{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if r.Header.Get("Authorization") != feedToken {
			f.unauth.Add(1)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		mode := f.mode
		body, _ := json.Marshal(map[string]any{"data": map[string]any{"items": f.items}})
		f.mu.Unlock()
		switch mode {
		case "500":
			http.Error(w, "the inventory database is down", http.StatusInternalServerError)
			return
		case "sleep":
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
			return
		}
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			f.notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// set replaces the list (items may be feedItems or anything else).
func (f *feed) set(mode string, items ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode, f.items = mode, items
}

func feedItems(ids ...string) []any {
	var out []any
	for _, id := range ids {
		out = append(out, feedItem{ID: id, Image: "nginx:1", Team: "t-" + id})
	}
	return out
}

// httpSourceBody is an HttpSource polling url every second: items at
// /data/items, name by pointer, spec and labels by template.
func httpSourceBody(name, url string) map[string]any {
	return map[string]any{"name": name, "resource_type_name": "HttpSource", "resource_type_version": "v1", "spec": map[string]any{
		"url": url, "interval": "1s", "timeoutSeconds": 1, "itemsPointer": "/data/items",
		"headers":     map[string]any{"Authorization": map[string]any{"env": "NO8S_REGISTRY_HS_TOKEN"}},
		"target":      map[string]any{"typeName": "WebApp", "typeVersion": "v1"},
		"namePointer": "/id",
		"spec":        map[string]any{"image": "{{ .image }}", "host": "{{ .id }}.example.com"},
		"labels":      map[string]any{"team": "{{ .team }}"},
	}}
}

// webApps maps every live WebApp of namespace ns to its uid.
func webApps(c *cluster, ns string) map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for _, r := range listAll(c.t, c.gateways[0], "WebApp", ns) {
		if r["deleted_at"] != nil {
			continue
		}
		out[r["name"].(string)] = r["uid"].(string)
	}
	return out
}

// listAll lists every resource of type/v1 in ns through the API.
func listAll(t *testing.T, base, typ, ns string) []map[string]any {
	t.Helper()
	r := do(t, "GET", fmt.Sprintf("%s/api/v1/resources?resource_type=%s&resource_type_version=v1&namespace=%s&limit=1000", base, typ, ns), nil)
	if r.status != 200 {
		t.Fatalf("list %s: %d %s", typ, r.status, r.body)
	}
	return r.list(t)
}

// waitWebApps waits until the live WebApps of ns are exactly want.
func waitWebApps(c *cluster, ns string, timeout time.Duration, want ...string) map[string]string {
	c.t.Helper()
	slices.Sort(want)
	var got map[string]string
	waitFor(c.t, timeout, fmt.Sprintf("WebApps %v", first(want, 8)), func() error {
		got = webApps(c, ns)
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, want) {
			return fmt.Errorf("have %d %v", len(names), first(names, 8))
		}
		return nil
	})
	return got
}

// sourceStatus reads an HttpSource's outputs and Synced condition.
func sourceStatus(t *testing.T, base string, id float64) (map[string]any, map[string]any) {
	t.Helper()
	r := do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", base, int64(id)), nil).json(t)
	outputs, _ := r["outputs"].(map[string]any)
	var synced map[string]any
	conds, _ := r["conditions"].([]any)
	for _, x := range conds {
		if m, _ := x.(map[string]any); m["type"] == "Synced" {
			synced = m
		}
	}
	return outputs, synced
}

func waitSourceSynced(t *testing.T, base string, id float64, status, reason string, check func(out map[string]any) error) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("HttpSource Synced=%s %s", status, reason), func() error {
		out, syn := sourceStatus(t, base, id)
		if syn == nil || syn["status"] != status || syn["reason"] != reason {
			return fmt.Errorf("Synced %v, outputs %v", syn, out)
		}
		if check != nil {
			return check(out)
		}
		return nil
	})
}

// TestHttpSource is issue 18's "HTTP polling against a local HTTP server
// whose list changes (add, change, remove, 500, timeout): the resource set
// follows it and a failed poll deletes nothing", with real binaries: two
// registry-sync replicas, the noop reconciler serving WebApps. Then: the
// ETag is honoured (the server counts its 304s), a bad item deletes
// nothing, the leader is killed (-9) in the middle of creating 300
// resources and the standby finishes with the set exact, and deleting the
// source deletes its resources before the source goes.
func TestHttpSource(t *testing.T) {
	f := newFeed(t)
	grantTestSecrets(t, f.srv.URL)
	c := newTenantCluster(t)
	// A noop deployment of its own for WebApps (the tenant cluster's noop
	// serves Tenant/v1): another name, another work queue and credential.
	c.startReconcilerArgs("noop-webapp", c.storeAddrs[0], nil, "noop", "--name", "webapp", "--types", "WebApp/v1")
	procs := map[string]*proc{}
	for _, name := range []string{"a", "b"} {
		procs["registry-sync/"+name] = c.startSync(name, "--writes", "1")
	}
	c.waitSyncLeads()
	base := c.base

	// Admission refuses bad sources, naming the field.
	for _, bad := range []struct {
		edit func(spec map[string]any)
		want string
	}{
		{func(s map[string]any) { s["url"] = "http://user:pw@" + strings.TrimPrefix(f.srv.URL, "http://") }, `"/spec/url"`},
		{func(s map[string]any) { s["url"] = "http://169.254.169.254/latest/meta-data/" }, "link-local"},
		{func(s map[string]any) { s["target"] = map[string]any{"typeName": "Nope", "typeVersion": "v1"} }, "resource type Nope/v1 does not exist"},
		{func(s map[string]any) { s["target"] = map[string]any{"typeName": "Tenant", "typeVersion": "v1"} }, "built-in type"},
		{func(s map[string]any) { s["nameTemplate"] = "{{ .id }}" }, "not both"},
		{func(s map[string]any) { delete(s, "namePointer"); s["nameTemplate"] = "{{ .id " }, "template does not parse"},
		{func(s map[string]any) { s["headers"] = map[string]any{"Authorization": "inline-secret"} }, `"/spec/headers/Authorization"`},
		{func(s map[string]any) { s["itemsPointer"] = "data" }, `"/spec/itemsPointer"`},
	} {
		body := httpSourceBody("bad", f.srv.URL)
		bad.edit(body["spec"].(map[string]any))
		r := do(t, "POST", base+"/api/v1/resources", body)
		if r.status != 400 || !strings.Contains(string(r.body), bad.want) {
			t.Fatalf("bad source (%s): %d %s", bad.want, r.status, r.body)
		}
	}
	if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'HttpSource'`); n != 0 {
		t.Fatalf("%d HttpSources stored by refused requests", n)
	}

	// Add: three items → three WebApps, labelled, specs rendered.
	f.set("", feedItems("a1", "b2", "c3")...)
	src := c.create(httpSourceBody("inventory", f.srv.URL+"/inventory"))
	srcID := src["id"].(float64)
	uids := waitWebApps(c.cluster, "default", 60*time.Second, "a1", "b2", "c3")
	b2 := do(t, "GET", base+"/api/v1/resources/by-name/WebApp/v1/b2", nil).json(t)
	labels, _ := b2["labels"].(map[string]any)
	spec, _ := b2["spec"].(map[string]any)
	if labels[httpsource.LabelSource] != "inventory" || labels["team"] != "t-b2" || spec["image"] != "nginx:1" || spec["host"] != "b2.example.com" || spec["replicas"] != float64(1) {
		t.Fatalf("b2: labels %v spec %v", labels, spec)
	}
	waitSourceSynced(t, base, srcID, "True", "Synced", func(out map[string]any) error {
		if out["items"] != float64(3) || out["desired"] != float64(3) || out["ready"] != float64(3) || out["etag"] == "" || out["etag"] == nil {
			return fmt.Errorf("outputs %v", out)
		}
		return nil
	})

	// ETag: the list stays; later polls are 304s and change nothing (every
	// WebApp is ready: nothing else writes them now).
	versions := func() map[string]any {
		out := map[string]any{}
		for _, r := range listAll(t, base, "WebApp", "default") {
			out[r["name"].(string)] = r["resource_version"]
		}
		return out
	}
	rv := versions()
	n304 := f.notModified.Load()
	waitFor(t, 30*time.Second, "two 304 answers", func() error {
		if got := f.notModified.Load() - n304; got < 2 {
			return fmt.Errorf("%d 304s", got)
		}
		return nil
	})
	if again := versions(); !maps.Equal(again, rv) {
		t.Fatalf("a 304 rewrote a WebApp: resource versions %v, were %v", again, rv)
	}
	t.Logf("ETag honoured: %d 304 answers of %d requests so far", f.notModified.Load(), f.requests.Load())

	// Change, add, remove: b2's image changes, c3 goes, d4 comes.
	items := feedItems("a1", "b2", "d4")
	items[1] = feedItem{ID: "b2", Image: "nginx:2", Team: "t-b2"}
	f.set("", items...)
	after := waitWebApps(c.cluster, "default", 60*time.Second, "a1", "b2", "d4")
	waitFor(t, 30*time.Second, "b2 at nginx:2", func() error {
		s, _ := do(t, "GET", base+"/api/v1/resources/by-name/WebApp/v1/b2", nil).json(t)["spec"].(map[string]any)
		if s["image"] != "nginx:2" {
			return fmt.Errorf("b2 spec %v", s)
		}
		return nil
	})
	for _, n := range []string{"a1", "b2"} {
		if after[n] != uids[n] {
			t.Fatalf("%s was replaced instead of updated", n)
		}
	}
	before := webApps(c.cluster, "default")
	unchanged := func(what string) {
		t.Helper()
		// Three polls' worth: the set must not move.
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if got := webApps(c.cluster, "default"); !maps.Equal(got, before) {
				t.Fatalf("%s changed the WebApps: %v, was %v", what, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(before)))
			}
		}
	}

	// A 500, then a server sleeping past the timeout: Synced False with
	// the reason; the list behind them is empty, and nothing is deleted.
	f.set("500")
	waitSourceSynced(t, base, srcID, "False", "HTTPError", nil)
	unchanged("a 500")
	f.set("sleep")
	waitSourceSynced(t, base, srcID, "False", "Timeout", nil)
	unchanged("a timeout")
	_, syn := sourceStatus(t, base, srcID)
	t.Logf("timeout: %v", syn["message"])

	// A bad item beside good ones: the good ones sync (e5 comes), the bad
	// one is reported, and nothing is deleted although d4 is not listed.
	f.set("", append(feedItems("a1", "b2", "e5"), feedItem{ID: "Not_A_Name", Image: "x"}, map[string]any{"no": "id"})...)
	waitSourceSynced(t, base, srcID, "False", "InvalidItems", func(out map[string]any) error {
		if out["invalidItems"] != float64(2) {
			return fmt.Errorf("outputs %v", out)
		}
		return nil
	})
	before["e5"] = ""
	got := waitWebApps(c.cluster, "default", 30*time.Second, slices.Collect(maps.Keys(before))...)
	before = got
	unchanged("bad items")

	// Kill -9 of the leader in the middle of 300 creates; the standby
	// takes over; the set is exact, and every resource seen before the
	// kill kept its uid.
	var many []string
	for i := range 300 {
		many = append(many, fmt.Sprintf("m%03d", i))
	}
	f.set("", feedItems(many...)...)
	var have int
	waitFor(t, 120*time.Second, "60 of 300 WebApps", func() error {
		if have = len(webApps(c.cluster, "default")); have < 60 {
			return fmt.Errorf("%d", have)
		}
		return nil
	})
	holder := c.syncLeader()
	p := procs[holder]
	if p == nil {
		t.Fatalf("no process for leader %q", holder)
	}
	seen := webApps(c.cluster, "default")
	p.kill9()
	t.Logf("kill -9 of %s with %d WebApps", holder, len(seen))
	if len(seen) >= 300 {
		t.Fatalf("the kill came after the set was complete (%d)", len(seen))
	}
	final := waitWebApps(c.cluster, "default", 180*time.Second, many...)
	for n, u := range seen {
		if v, ok := final[n]; ok && v != u {
			t.Fatalf("%s was made again after the kill: uid %s, was %s", n, v, u)
		}
	}
	if h := c.syncLeader(); h == holder || h == "" {
		t.Fatalf("leader after the kill: %q", h)
	}
	waitSourceSynced(t, base, srcID, "True", "Synced", func(out map[string]any) error {
		if out["items"] != float64(300) {
			return fmt.Errorf("outputs %v", out)
		}
		return nil
	})

	// The target cannot change.
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Widget", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create Widget: %d %s", r.status, r.body)
	}
	r := do(t, "PATCH", fmt.Sprintf("%s/api/v1/resources/%d", base, int64(srcID)), map[string]any{"spec": map[string]any{
		"target": map[string]any{"typeName": "Widget", "typeVersion": "v1"}}})
	if r.status != 400 || !strings.Contains(string(r.body), "the target cannot change") {
		t.Fatalf("target change: %d %s", r.status, r.body)
	}

	// Deleting the source: its resources go, then the source.
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", base, int64(srcID)), nil); r.status != 202 {
		t.Fatalf("delete source: %d %s", r.status, r.body)
	}
	waitFor(t, 120*time.Second, "the source and its WebApps gone", func() error {
		if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'WebApp'`); n != 0 {
			return fmt.Errorf("%d WebApps left", n)
		}
		if n := c.count(`SELECT count(*) FROM resources WHERE resource_type_name = 'HttpSource'`); n != 0 {
			return fmt.Errorf("the source is still there")
		}
		return nil
	})
	if f.unauth.Load() != 0 {
		t.Fatalf("%d polls without the secret header", f.unauth.Load())
	}
	t.Logf("feed: %d requests, %d answered 304", f.requests.Load(), f.notModified.Load())
}

// TestHttpSourceEmbedded: the same poll in `no8s dev` on the embedded store
// (SQLite), without PostgreSQL: the set follows the list (add, change,
// remove), and a 500 deletes nothing.
func TestHttpSourceEmbedded(t *testing.T) {
	f := newFeed(t)
	grantTestSecrets(t, f.srv.URL)
	env := append(noPostgreSQL(), "NO8S_REGISTRY_HS_TOKEN="+feedToken)
	addrs, _ := startDevServing(t, env, "WebApp", map[string]any{
		"type": "object", "properties": map[string]any{"image": map[string]any{"type": "string"}, "host": map[string]any{"type": "string"}}})
	if !strings.HasPrefix(addrs.Store, "sqlite:") {
		t.Fatalf("no8s dev's store is %q, want the embedded one", addrs.Store)
	}
	base := addrs.APIURL
	c := &cluster{t: t, gateways: []string{base}}
	f.set("", feedItems("x1", "y2")...)
	r := do(t, "POST", base+"/api/v1/resources", httpSourceBody("inventory", f.srv.URL))
	if r.status != 201 {
		t.Fatalf("create HttpSource: %d %s", r.status, r.body)
	}
	srcID := r.json(t)["id"].(float64)
	waitWebApps(c, "default", 60*time.Second, "x1", "y2")
	items := feedItems("x1", "z3")
	items[0] = feedItem{ID: "x1", Image: "nginx:2"}
	f.set("", items...)
	waitWebApps(c, "default", 60*time.Second, "x1", "z3")
	waitFor(t, 30*time.Second, "x1 at nginx:2", func() error {
		s, _ := do(t, "GET", base+"/api/v1/resources/by-name/WebApp/v1/x1", nil).json(t)["spec"].(map[string]any)
		if s["image"] != "nginx:2" {
			return fmt.Errorf("x1 spec %v", s)
		}
		return nil
	})
	f.set("500")
	waitSourceSynced(t, base, srcID, "False", "HTTPError", nil)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if got := slices.Sorted(maps.Keys(webApps(c, "default"))); !slices.Equal(got, []string{"x1", "z3"}) {
			t.Fatalf("a 500 changed the WebApps: %v", got)
		}
	}
	f.set("", feedItems("z3")...)
	waitWebApps(c, "default", 60*time.Second, "z3")
	waitSourceSynced(t, base, srcID, "True", "Synced", nil)
	t.Logf("no8s dev on %s: the set followed the list; feed %d requests, %d answered 304", addrs.Store, f.requests.Load(), f.notModified.Load())
}
