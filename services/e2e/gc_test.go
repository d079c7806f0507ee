package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/sdk/identity"
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
		b := map[string]any{"name": name, "resource_type_name": "Widget", "resource_type_version": "v1", "spec": map[string]any{}}
		if owners != nil {
			b["owner_references"] = owners
		}
		r := do(t, "POST", base+"/api/v1/resources", b)
		if r.status != 201 {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
		m := r.json(t)
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
		del(owner, "Background")
		gone("the owner", owner)
		gone("every dependent, after the owner", all...)
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
	ref := func(o map[string]any) map[string]any {
		return map[string]any{"uid": o["uid"], "resource_type_name": "Widget", "resource_type_version": "v1", "name": o["name"]}
	}
	path := func(r map[string]any) string {
		return fmt.Sprintf("%s/api/v1/resources/%d", base, int64(r["id"].(float64)))
	}
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
	path := func(r map[string]any) string {
		return fmt.Sprintf("%s/api/v1/resources/%d", base, int64(r["id"].(float64)))
	}
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
