package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/platform/identity"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// TestGarbageCollection runs the garbage collector (in the real scheduler,
// writing through the real gateway) on PostgreSQL.
func TestGarbageCollection(t *testing.T) { gcFlow(t, newCluster(t)) }

// TestGarbageCollectionSQLite is TestGarbageCollection on the embedded
// store.
func TestGarbageCollectionSQLite(t *testing.T) { gcFlow(t, newSQLiteCluster(t)) }

// gcFlow: an owner with 30 dependents two levels deep (10 children, each
// with 2 grandchildren; some with block_owner_deletion), deleted with each
// policy, gives Kubernetes' outcome: Background, the owner goes and then
// every dependent; Foreground, the owner goes only after every dependent
// that blocks it; Orphan, the owner goes and every dependent stays without
// its reference to it. A dependent whose owner uid never existed is
// collected; one with a live owner and a dangling reference keeps only the
// live one. Every wait is a generous deadline.
func gcFlow(t *testing.T, c *cluster) {
	base := c.startAll()
	c.startSchedulerArgs(c.storeAddrs[0], "sched", 0, "--gc-sweep", "2s")
	c.startReconciler(c.storeAddrs[0], "Widget/v1")
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Widget", "version": "v1",
		"schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	type res struct {
		id         int64
		uid, name  string
		blocksUpTo bool
	}
	create := func(name string, owners ...map[string]any) res {
		t.Helper()
		m := createOwnedWidget(t, base, name, owners...)
		return res{id: int64(m["id"].(float64)), uid: m["uid"].(string), name: name}
	}
	ref := func(o res, block bool) map[string]any {
		return map[string]any{"uid": o.uid, "resource_type_name": "Widget", "resource_type_version": "v1", "name": o.name, "block_owner_deletion": block}
	}
	get := func(r res) (map[string]any, bool) {
		t.Helper()
		resp := do(t, "GET", base+"/api/v1/resources/"+strconv.FormatInt(r.id, 10), nil)
		if resp.status == 404 {
			return nil, false
		}
		if resp.status != 200 {
			t.Fatalf("get %s: %d %s", r.name, resp.status, resp.body)
		}
		return resp.json(t), true
	}
	gone := func(what string, rs ...res) {
		t.Helper()
		waitFor(t, 60*time.Second, what, func() error {
			for _, r := range rs {
				if _, ok := get(r); ok {
					return fmt.Errorf("%s still exists", r.name)
				}
			}
			return nil
		})
	}
	// tree builds the owner and its 30 dependents.
	tree := func(prefix string) (res, []res, []res) {
		owner := create(prefix + "-owner")
		var children, all []res
		for i := range 10 {
			ch := create(fmt.Sprintf("%s-c%d", prefix, i), ref(owner, i%2 == 0))
			ch.blocksUpTo = i%2 == 0
			children = append(children, ch)
			all = append(all, ch)
			for j := range 2 {
				g := create(fmt.Sprintf("%s-c%d-g%d", prefix, i, j), ref(ch, j == 0))
				g.blocksUpTo = j == 0
				all = append(all, g)
			}
		}
		return owner, children, all
	}
	del := func(r res, policy string) {
		t.Helper()
		if resp := do(t, "DELETE", base+"/api/v1/resources/"+strconv.FormatInt(r.id, 10)+"?propagation_policy="+policy, nil); resp.status != 202 {
			t.Fatalf("delete %s %s: %d %s", r.name, policy, resp.status, resp.body)
		}
	}

	t.Run("background", func(t *testing.T) {
		owner, _, all := tree("bg")
		w, _, err := dialWatch(t.Context(), base+"/api/v1/events?resource_type=Widget", -1, false, 4096)
		if err != nil {
			t.Fatal(err)
		}
		defer w.close()
		del(owner, "Background")
		gone("the owner", owner)
		gone("every dependent, after the owner", all...)
		// The order, from the event stream: the owner is purged before
		// any dependent's deletion begins.
		first := map[int64]int64{} // resource id → revision of its first DELETED or PURGED
		var purged int64
		for purged == 0 || len(first) < len(all)+1 {
			select {
			case ev, ok := <-w.events:
				if !ok {
					t.Fatalf("the watch ended: %v", w.err)
				}
				if ev.name != "DELETED" && ev.name != "PURGED" {
					continue
				}
				var d struct {
					ResourceID int64 `json:"resource_id"`
				}
				if err := json.Unmarshal(ev.data, &d); err != nil {
					t.Fatal(err)
				}
				if _, ok := first[d.ResourceID]; !ok {
					first[d.ResourceID] = ev.id
				}
				if d.ResourceID == owner.id && ev.name == "PURGED" {
					purged = ev.id
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the watch saw %d deletions (owner purged at %d), then nothing", len(first), purged)
			}
		}
		for _, d := range all {
			if rev, ok := first[d.id]; !ok || rev < purged {
				t.Fatalf("%s's deletion began at revision %d (seen %v), before its owner's purge at %d", d.name, rev, ok, purged)
			}
		}
	})

	t.Run("foreground", func(t *testing.T) {
		owner, children, all := tree("fg")
		del(owner, "Foreground")
		// While the owner exists it is deleting with foregroundDeletion;
		// the moment it is gone, no child that blocked it is left.
		waitFor(t, 60*time.Second, "the owner gone", func() error {
			o, ok := get(owner)
			if ok {
				if o["status"] != "deleting" {
					return fmt.Errorf("owner %v", o["status"])
				}
				return fmt.Errorf("owner still deleting with %v", o["finalizers"])
			}
			return nil
		})
		for _, ch := range children {
			if _, ok := get(ch); ok && ch.blocksUpTo {
				t.Fatalf("the owner went before its blocking dependent %s", ch.name)
			}
		}
		gone("every dependent", all...)
	})

	t.Run("orphan", func(t *testing.T) {
		owner, children, all := tree("or")
		del(owner, "Orphan")
		gone("the owner", owner)
		for _, d := range all {
			m, ok := get(d)
			if !ok || m["status"] == "deleting" {
				t.Fatalf("orphaned dependent %s: %v (exists %v)", d.name, m, ok)
			}
			refs, _ := m["owner_references"].([]any)
			for _, r := range refs {
				if r.(map[string]any)["uid"] == owner.uid {
					t.Fatalf("%s still names the owner", d.name)
				}
			}
			if slices.ContainsFunc(children, func(c res) bool { return c.id == d.id }) && len(refs) != 0 {
				t.Fatalf("child %s kept references %v", d.name, refs)
			}
		}
	})

	t.Run("dangling", func(t *testing.T) {
		live := create("live-owner")
		never := map[string]any{"uid": uuid.NewString(), "resource_type_name": "Widget", "resource_type_version": "v1", "name": "never"}
		lost := create("lost", never)
		mixed := create("mixed", never, ref(live, false))
		gone("the dependent of an owner that never existed", lost)
		waitFor(t, 60*time.Second, "the dangling reference removed", func() error {
			m, ok := get(mixed)
			if !ok {
				return fmt.Errorf("mixed is gone")
			}
			refs, _ := m["owner_references"].([]any)
			if len(refs) != 1 || refs[0].(map[string]any)["uid"] != live.uid {
				return fmt.Errorf("references %v", refs)
			}
			return nil
		})
	})
}

// TestGarbageCollectionInDev: `no8s dev` runs the collector too (its
// identities on, its writes through the stack's service listener): the
// dependents of an owner deleted in the background go after it, and one
// that loses one of two owners keeps the other.
func TestGarbageCollectionInDev(t *testing.T) {
	addrs, _ := startDevServing(t, noPostgreSQL(), "Widget", map[string]any{"type": "object"})
	base := addrs.APIURL
	create := func(name string, owners ...map[string]any) map[string]any {
		t.Helper()
		return createOwnedWidget(t, base, name, owners...)
	}
	ref := func(o map[string]any) map[string]any {
		return map[string]any{"uid": o["uid"], "resource_type_name": "Widget", "resource_type_version": "v1", "name": o["name"]}
	}
	path := func(r map[string]any) string { return widgetPath(base, r) }
	owner, other := create("owner"), create("other")
	child := create("child", ref(owner))
	shared := create("shared", ref(owner), ref(other))
	if r := do(t, "DELETE", path(owner), nil); r.status != 202 {
		t.Fatalf("delete owner: %d %s", r.status, r.body)
	}
	waitFor(t, 60*time.Second, "the child collected and the shared dependent kept with its other owner", func() error {
		if r := do(t, "GET", path(child), nil); r.status != 404 {
			return fmt.Errorf("child: %d", r.status)
		}
		r := do(t, "GET", path(shared), nil)
		if r.status != 200 {
			return fmt.Errorf("shared: %d %s", r.status, r.body)
		}
		refs, _ := r.json(t)["owner_references"].([]any)
		if len(refs) != 1 || refs[0].(map[string]any)["uid"] != other["uid"] {
			return fmt.Errorf("shared's references: %v", refs)
		}
		return nil
	})
}

// TestGarbageCollectorWritesAreFenced: the collector's writes carry its
// lease's epoch, and a deposed collector's write is refused where it would
// commit: holder a's epoch, once b took the lease garbage-collector, gets
// 409 stale_epoch and changes nothing; b's goes through. Both are sent as
// the scheduler's identity to the gateway's service listener, as the
// collector sends them; another identity may not send the headers at all.
func TestGarbageCollectorWritesAreFenced(t *testing.T) {
	c := newCluster(t)
	// The fence headers are checked only with identities on: on, whatever
	// NO8S_E2E_IDENTITIES says.
	c.withIdentities()
	ctx := t.Context()
	base := c.startAll()
	c.startReconciler(c.storeAddrs[0], "Widget/v1")
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Widget", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	r := do(t, "POST", base+"/api/v1/resources", map[string]any{"name": "victim", "resource_type_name": "Widget", "resource_type_version": "v1", "spec": map[string]any{}})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	victim := fmt.Sprintf("/api/v1/resources/%d", int64(r.json(t)["id"].(float64)))

	rc := reconcilev1.NewReconcileServiceClient(c.dialStore(t, c.storeAddrs[0], "--service", identity.Scheduler))
	a, err := rc.CampaignCollector(ctx, &reconcilev1.CampaignCollectorRequest{Holder: "sched-a", LeaseSeconds: 30})
	if err != nil || !a.GetLeader() {
		t.Fatalf("a campaigns: %v %v", a, err)
	}
	if _, err := rc.CampaignCollector(ctx, &reconcilev1.CampaignCollectorRequest{Holder: "sched-a", Epoch: a.GetEpoch(), Release: true}); err != nil {
		t.Fatal(err)
	}
	b, err := rc.CampaignCollector(ctx, &reconcilev1.CampaignCollectorRequest{Holder: "sched-b", LeaseSeconds: 30})
	if err != nil || !b.GetLeader() || b.GetEpoch() <= a.GetEpoch() {
		t.Fatalf("b takes over: %v %v (a had %d)", b, err, a.GetEpoch())
	}

	fenced := func(epoch int64) map[string]string {
		return map[string]string{fence.HeaderLease: fence.GarbageCollectorLease, fence.HeaderEpoch: strconv.FormatInt(epoch, 10)}
	}
	sched := c.identityClient("--service", identity.Scheduler)
	svc := c.apiURL()
	stale := send(t, sched, "DELETE", svc+victim+"?propagation_policy=Orphan", nil, fenced(a.GetEpoch()))
	if stale.status != 409 || stale.json(t)["code"] != "stale_epoch" {
		t.Fatalf("the deposed collector's delete: %d %s", stale.status, stale.body)
	}
	if got := do(t, "GET", base+victim, nil).json(t); got["status"] == "deleting" {
		t.Fatalf("a refused write changed the resource: %v", got)
	}
	other := send(t, c.identityClient("--client", "ci"), "DELETE", svc+victim, nil, fenced(b.GetEpoch()))
	if other.status != 403 || !strings.Contains(string(other.body), "fence headers") {
		t.Fatalf("client/ci with the collector's fence headers: %d %s", other.status, other.body)
	}
	ok := send(t, sched, "DELETE", svc+victim+"?propagation_policy=Orphan", nil, fenced(b.GetEpoch()))
	if ok.status != 202 || ok.json(t)["status"] != "deleting" {
		t.Fatalf("the current collector's delete: %d %s", ok.status, ok.body)
	}
}

// TestGarbageCollectorCatchesUpAfterACrash: an owner purged while the
// scheduler (and so the collector) was SIGKILLed leaves its dependent; a
// scheduler started again collects it at its first sweep, once the dead
// holder's lease has expired.
func TestGarbageCollectorCatchesUpAfterACrash(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	sched := c.startScheduler(c.storeAddrs[0], "sched-a", 0)
	c.startReconciler(c.storeAddrs[0], "Widget/v1")
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Widget", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	create := func(name string, owners ...map[string]any) map[string]any {
		t.Helper()
		return createOwnedWidget(t, base, name, owners...)
	}
	path := func(r map[string]any) string { return widgetPath(base, r) }
	owner := create("owner")
	child := create("child", map[string]any{"uid": owner["uid"], "resource_type_name": "Widget", "resource_type_version": "v1", "name": "owner"})

	sched.kill9()
	// Without a scheduler nothing dispatches the owner's cleanup: its
	// reconciler's finalizer is removed by hand (the break-glass), which
	// purges it while the collector is down.
	if r := do(t, "DELETE", path(owner), nil); r.status != 202 {
		t.Fatalf("delete owner: %d %s", r.status, r.body)
	}
	fins, _ := do(t, "GET", path(owner), nil).json(t)["finalizers"].([]any)
	if r := do(t, "PUT", path(owner)+"/finalizers", map[string]any{"remove": fins}); r.status != 200 {
		t.Fatalf("remove the owner's finalizers %v: %d %s", fins, r.status, r.body)
	}
	if r := do(t, "GET", path(owner), nil); r.status != 404 {
		t.Fatalf("the owner is not purged: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", path(child), nil); r.status != 200 {
		t.Fatalf("the child went with no collector running: %d %s", r.status, r.body)
	}

	c.startScheduler(c.storeAddrs[0], "sched-b", 0)
	waitFor(t, 60*time.Second, "the child collected after the restart", func() error {
		if r := do(t, "GET", path(child), nil); r.status != 404 {
			return fmt.Errorf("child: %d", r.status)
		}
		return nil
	})
}

// TestGarbageCollectorAsksWebhooks: the collector's deletes pass the
// validating webhooks that intercept DELETE, which are told they come from
// system:no8s:garbage-collector. A denied delete leaves the dependent with
// a GarbageCollectionDenied Warning Event carrying the webhook's message;
// once the webhook allows, a retry (after its backoff) collects it.
func TestGarbageCollectorAsksWebhooks(t *testing.T) {
	c := newCluster(t)
	// Who asks is proven by the caller's identity: on, whatever
	// NO8S_E2E_IDENTITIES says.
	c.withIdentities()
	base := c.startAll()
	c.startSchedulerArgs(c.storeAddrs[0], "sched", 0, "--gc-sweep", "2s")
	c.startReconciler(c.storeAddrs[0], "Widget/v1")
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Widget", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}

	type call struct{ name, user string }
	var (
		mu    sync.Mutex
		calls []call
		deny  atomic.Bool
	)
	deny.Store(true)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Operation string `json:"operation"`
			Resource  struct {
				Name string `json:"name"`
			} `json:"resource"`
			User *struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"user"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		who := "<none>"
		if req.User != nil {
			who = req.User.Username + " " + strings.Join(req.User.Groups, ",")
		}
		mu.Lock()
		calls = append(calls, call{req.Resource.Name, who})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if req.Resource.Name == "guarded" && deny.Load() {
			_, _ = w.Write([]byte(`{"allowed":false,"message":"guarded is on hold"}`))
			return
		}
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}))
	defer hook.Close()
	if r := do(t, "POST", base+"/api/v1/admission-webhooks", map[string]any{
		"name": "gc-guard", "resource_type_name": "Widget", "webhook_url": hook.URL,
		"webhook_type": "validating", "operations": []string{"DELETE"},
	}); r.status != 201 {
		t.Fatalf("register webhook: %d %s", r.status, r.body)
	}
	asked := func(name string) []string {
		mu.Lock()
		defer mu.Unlock()
		var users []string
		for _, c := range calls {
			if c.name == name {
				users = append(users, c.user)
			}
		}
		return users
	}

	create := func(name string, owners ...map[string]any) map[string]any {
		t.Helper()
		return createOwnedWidget(t, base, name, owners...)
	}
	path := func(r map[string]any) string { return widgetPath(base, r) }
	owner := create("owner")
	ref := map[string]any{"uid": owner["uid"], "resource_type_name": "Widget", "resource_type_version": "v1", "name": "owner"}
	plain, guarded := create("plain", ref), create("guarded", ref)
	if r := do(t, "DELETE", path(owner), nil); r.status != 202 {
		t.Fatalf("delete owner: %d %s", r.status, r.body)
	}

	const gcUser = "system:no8s:garbage-collector system:no8s:services"
	waitFor(t, 90*time.Second, "the plain dependent collected, its delete asked of the webhook as the collector", func() error {
		if r := do(t, "GET", path(plain), nil); r.status != 404 {
			return fmt.Errorf("plain: %d", r.status)
		}
		if users := asked("plain"); !slices.Contains(users, gcUser) {
			return fmt.Errorf("the webhook was asked about plain by %q", users)
		}
		return nil
	})
	waitFor(t, 60*time.Second, "a GarbageCollectionDenied Event on the guarded dependent", func() error {
		evs := do(t, "GET", path(guarded)+"/event-records?limit=500", nil).list(t)
		e := hasEvent(evs, "GarbageCollectionDenied", "guarded is on hold")
		if e == nil {
			return fmt.Errorf("events %v", evs)
		}
		if e["type"] != "Warning" {
			return fmt.Errorf("the Event is %v, want Warning", e["type"])
		}
		return nil
	})
	if r := do(t, "GET", path(guarded), nil); r.status != 200 || r.json(t)["status"] == "deleting" {
		t.Fatalf("a denied delete changed the dependent: %d %s", r.status, r.body)
	}
	if users := asked("guarded"); len(users) == 0 || users[0] != gcUser {
		t.Fatalf("the webhook was asked about guarded by %q", users)
	}
	deny.Store(false)
	waitFor(t, 120*time.Second, "the guarded dependent collected once the webhook allows", func() error {
		if r := do(t, "GET", path(guarded), nil); r.status != 404 {
			return fmt.Errorf("guarded: %d (asked %d times)", r.status, len(asked("guarded")))
		}
		return nil
	})
	t.Logf("the webhook was asked about the guarded dependent %d times", len(asked("guarded")))
}

// createOwnedWidget creates the Widget/v1 called name at base, with owners as
// its owner references, and returns its document.
func createOwnedWidget(t *testing.T, base, name string, owners ...map[string]any) map[string]any {
	t.Helper()
	b := map[string]any{"name": name, "resource_type_name": "Widget", "resource_type_version": "v1", "spec": map[string]any{}}
	if owners != nil {
		b["owner_references"] = owners
	}
	r := do(t, "POST", base+"/api/v1/resources", b)
	if r.status != 201 {
		t.Fatalf("create %s: %d %s", name, r.status, r.body)
	}
	return r.json(t)
}

// widgetPath is the URL of the resource whose document is r.
func widgetPath(base string, r map[string]any) string {
	return fmt.Sprintf("%s/api/v1/resources/%d", base, int64(r["id"].(float64)))
}
