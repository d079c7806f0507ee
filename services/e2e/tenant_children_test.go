package e2e

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// The child types of these tests: served by noop (ready at once) or, for
// TSlow, by a noop whose attempts take ten minutes (never ready in time).
var childTypes = []string{"TConfig", "TDatabase", "TApp", "TSlow"}

// newChildCluster is a control plane of real processes (store, admission,
// gateway, scheduler, registry-sync) with the tenant reconciler serving
// Tenant/v1 (`no8s-reconciler tenant`) and noop serving the child types.
func newChildCluster(t *testing.T) *tenantCluster {
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 2*time.Second)
	c.startReconciler(c.storeAddrs[0], "TConfig/v1", "TDatabase/v1", "TApp/v1")
	c.startReconcilerArgs("slow", c.storeAddrs[0], nil, "noop", "--name", "slow", "--types", "TSlow/v1", "--delay", "10m")
	c.startReconcilerArgs("tenant", c.storeAddrs[0], nil, "tenant")
	for _, name := range childTypes {
		if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": name, "version": "v1", "schema": map[string]any{
			"type": "object", "required": []string{"value"}, "properties": map[string]any{
				"value": map[string]any{"type": "string"}, "size": map[string]any{"type": "integer", "default": 1}}}}); r.status != 201 {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
	}
	tc := &tenantCluster{cluster: c, base: base, ns: "default"}
	tc.startSync("a")
	tc.waitSyncLeads()
	return tc
}

// child is one entry of a template.
func childEntry(id, typ, name string, spec map[string]any, deps ...string) map[string]any {
	e := map[string]any{"id": id, "typeName": typ, "typeVersion": "v1", "nameTemplate": name, "spec": spec}
	if len(deps) > 0 {
		e["dependIds"] = deps
	}
	return e
}

func (c *tenantCluster) template(name, registry string, children ...map[string]any) map[string]any {
	return c.create(map[string]any{"name": name, "resource_type_name": "TenantTemplate", "resource_type_version": "v1",
		"spec": map[string]any{"registryId": registry, "resources": children}})
}

// get reads a resource by type and name: nil when there is none.
func (c *tenantCluster) get(typ, name string) *resource.Resource {
	c.t.Helper()
	r := do(c.t, "GET", fmt.Sprintf("%s/api/v1/resources/by-name/%s/v1/%s?namespace=%s", c.base, typ, name, c.ns), nil)
	if r.status == 404 {
		return nil
	}
	if r.status != 200 {
		c.t.Fatalf("get %s %s: %d %s", typ, name, r.status, r.body)
	}
	var out resource.Resource
	decode(c.t, r.json(c.t), &out)
	return &out
}

func readyCondition(r *resource.Resource) (resource.Condition, bool) {
	for _, cond := range r.Conditions {
		if cond.Type == "Ready" {
			return cond, true
		}
	}
	return resource.Condition{}, false
}

func isReady(r *resource.Resource) bool {
	cond, ok := readyCondition(r)
	return r != nil && r.Status == "ready" && ok && cond.Status == "True"
}

// waitTenantReady waits until the Tenant is ready with its outputs saying
// every child is.
func (c *tenantCluster) waitTenantReady(name string, children int) *resource.Resource {
	c.t.Helper()
	return c.waitTenantReadyWithin(90*time.Second, name, children)
}

// waitTenantReadyWithin is waitTenantReady with a deadline of d.
func (c *tenantCluster) waitTenantReadyWithin(d time.Duration, name string, children int) *resource.Resource {
	c.t.Helper()
	var got *resource.Resource
	waitFor(c.t, d, "Tenant "+name+" ready", func() error {
		got = c.get("Tenant", name)
		if got == nil || !isReady(got) {
			return fmt.Errorf("Tenant %s: %+v", name, got)
		}
		var out map[string]any
		decode(c.t, got.Outputs, &out)
		if out["desiredResources"] != float64(children) || out["readyResources"] != float64(children) || out["failedResources"] != float64(0) {
			return fmt.Errorf("outputs %v", out)
		}
		return nil
	})
	return got
}

// waitTenantDegraded waits until the Tenant's phase is Degraded with a
// Ready message containing every one of want.
func (c *tenantCluster) waitTenantDegraded(name string, want ...string) *resource.Resource {
	c.t.Helper()
	var got *resource.Resource
	waitFor(c.t, 90*time.Second, "Tenant "+name+" Degraded", func() error {
		got = c.get("Tenant", name)
		if got == nil || got.Phase != "Degraded" {
			return fmt.Errorf("Tenant %s: %+v", name, got)
		}
		cond, _ := readyCondition(got)
		for _, w := range want {
			if !strings.Contains(cond.Message, w) {
				return fmt.Errorf("Ready message %q lacks %q", cond.Message, w)
			}
		}
		return nil
	})
	return got
}

func ownerUIDs(r *resource.Resource) []string {
	var out []string
	for _, o := range r.OwnerReferences {
		out = append(out, o.UID)
	}
	return out
}

func (c *tenantCluster) reconcileNow(r *resource.Resource) {
	c.t.Helper()
	if resp := do(c.t, "POST", fmt.Sprintf("%s/api/v1/resources/%d/reconcile", c.base, r.ID), nil); resp.status >= 300 {
		c.t.Fatalf("reconcile %s: %d %s", r.Name, resp.status, resp.body)
	}
}

// TestTenantChildrenMariaDB is issue 15's first "Must show": a MariaDB
// registry of 3 rows and a template of 3 children in a dependency chain
// (cfg → db → app) give every Tenant its children, ready, created in
// order, owned by it; a deactivated row's Tenant takes its Delete children
// with it and leaves its Retain child without owner; a child deleted by
// hand comes back, a Once child edited by hand is left alone, a WhenNeeded
// one is restored; a child that exists with another owner makes its Tenant
// Degraded, naming it, under Stuck, and is taken over under Force; a child
// dropped from the template is deleted by its deletionPolicy.
func TestTenantChildrenMariaDB(t *testing.T) {
	c := newChildCluster(t)
	ds := newMariaDB(t)
	for _, row := range []string{"acme", "globex", "initech"} {
		ds.insert(row, "https://"+row+".example.com", "1")
	}
	c.create(registryBody("customers", ds.source()))
	// cfg: apply, Delete, WhenNeeded; db: merge, Retain, Once; app: replace, Delete.
	cfg := childEntry("cfg", "TConfig", "{{ .uid }}-cfg", map[string]any{"value": "{{ .host }}"})
	db := childEntry("db", "TDatabase", "{{ .uid }}-db", map[string]any{"value": "db-{{ .uid }}", "size": 2}, "cfg")
	db["deletionPolicy"], db["creationPolicy"], db["patchStrategy"] = "Retain", "Once", "merge"
	app := childEntry("app", "TApp", "{{ .uid }}-app", map[string]any{"value": "{{ sha1sum .uid | trunc 8 }}"}, "db")
	app["patchStrategy"] = "replace"
	tpl := c.template("web", "customers", cfg, db, app)

	tenants := map[string]*resource.Resource{}
	for _, row := range []string{"acme", "globex", "initech"} {
		tn := c.waitTenantReady(row+"-web", 3)
		tenants[row] = tn
		var prev *resource.Resource
		for _, k := range []struct{ typ, suffix string }{{"TConfig", "cfg"}, {"TDatabase", "db"}, {"TApp", "app"}} {
			ch := c.get(k.typ, row+"-"+k.suffix)
			if ch == nil || !isReady(ch) {
				t.Fatalf("%s-%s: %+v", row, k.suffix, ch)
			}
			if o := ownerUIDs(ch); len(o) != 1 || o[0] != tn.UID || ch.OwnerReferences[0].ResourceTypeName != "Tenant" || ch.OwnerReferences[0].Name != tn.Name {
				t.Fatalf("%s owners %+v, want Tenant %s (%s)", ch.Name, ch.OwnerReferences, tn.Name, tn.UID)
			}
			if ch.Labels[tenancy.LabelTenant] != tn.Name {
				t.Fatalf("%s labels %v", ch.Name, ch.Labels)
			}
			if prev != nil && !ch.CreatedAt.After(prev.CreatedAt) {
				t.Fatalf("%s created at %s, not after %s (%s): not in dependency order", ch.Name, ch.CreatedAt, prev.Name, prev.CreatedAt)
			}
			prev = ch
		}
	}
	if v := c.get("TConfig", "acme-cfg"); !strings.Contains(string(v.Spec), `"acme.example.com"`) {
		t.Fatalf("rendered spec %s", v.Spec)
	}
	if v := c.get("TDatabase", "acme-db"); v.Annotations[tenancy.AnnotationCreatedOnce] != "true" {
		t.Fatalf("Once child not marked: %v", v.Annotations)
	}
	waitFor(t, 30*time.Second, "Ready event", func() error {
		if hasEvent(c.events(float64(tenants["acme"].ID)), "Ready", "3 resources") == nil {
			return fmt.Errorf("no Ready event")
		}
		return nil
	})

	// By hand: delete acme's app (WhenNeeded: restored), edit its cfg
	// (WhenNeeded: restored) and its db (Once: left alone).
	oldApp := c.get("TApp", "acme-app")
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", c.base, oldApp.ID), nil); r.status != 202 {
		t.Fatalf("delete app: %d %s", r.status, r.body)
	}
	waitFor(t, 30*time.Second, "acme-app gone", func() error {
		if a := c.get("TApp", "acme-app"); a != nil && a.UID == oldApp.UID {
			return fmt.Errorf("still there")
		}
		return nil
	})
	for _, e := range []struct{ typ, name string }{{"TConfig", "acme-cfg"}, {"TDatabase", "acme-db"}} {
		r := c.get(e.typ, e.name)
		if resp := do(t, "PATCH", fmt.Sprintf("%s/api/v1/resources/%d", c.base, r.ID), map[string]any{"spec": map[string]any{"value": "edited-by-hand"}}); resp.status != 200 {
			t.Fatalf("edit %s: %d %s", e.name, resp.status, resp.body)
		}
	}
	c.reconcileNow(tenants["acme"])
	waitFor(t, 60*time.Second, "acme-app restored and acme-cfg reverted", func() error {
		a, cf := c.get("TApp", "acme-app"), c.get("TConfig", "acme-cfg")
		if a == nil || a.UID == oldApp.UID || !isReady(a) {
			return fmt.Errorf("app %+v", a)
		}
		if !strings.Contains(string(cf.Spec), "acme.example.com") {
			return fmt.Errorf("cfg spec %s", cf.Spec)
		}
		return nil
	})
	if d := c.get("TDatabase", "acme-db"); !strings.Contains(string(d.Spec), "edited-by-hand") {
		t.Fatalf("the Once child was applied again: %s", d.Spec)
	}
	c.waitTenantReady("acme-web", 3)

	// Deactivate globex: its Tenant goes; cfg and app (Delete) with it, db
	// (Retain) stays without owner.
	ds.exec("UPDATE tenants SET active = '0' WHERE id = 'globex'")
	c.waitTenants(90*time.Second, "acme-web", "initech-web")
	waitFor(t, 30*time.Second, "globex's Delete children gone", func() error {
		if c.get("TConfig", "globex-cfg") != nil || c.get("TApp", "globex-app") != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	kept := c.get("TDatabase", "globex-db")
	if kept == nil || kept.DeletedAt != nil || len(kept.OwnerReferences) != 0 {
		t.Fatalf("Retain child: %+v", kept)
	}

	// Conflict: hooli-cfg exists, owned by another resource; hooli's Tenant
	// is stuck on it (Degraded, naming it; nothing changed, db not made).
	// The other owner exists: an owner that does not is the garbage
	// collector's, which would delete hooli-cfg.
	someone := c.create(map[string]any{"name": "someone-else", "resource_type_name": "TConfig", "resource_type_version": "v1",
		"spec": map[string]any{"value": "theirs"}})
	other := someone["uid"].(string)
	pre := c.create(map[string]any{"name": "hooli-cfg", "resource_type_name": "TConfig", "resource_type_version": "v1",
		"spec": map[string]any{"value": "mine"}, "owner_references": []any{map[string]any{"uid": other, "resource_type_name": "TConfig", "resource_type_version": "v1", "name": "someone-else"}}})
	ds.insert("hooli", "https://hooli.example.com", "1")
	stuck := c.waitTenantDegraded("hooli-web", `"hooli-cfg"`, "conflictPolicy Stuck")
	waitFor(t, 30*time.Second, "ApplyConflict event", func() error {
		if hasEvent(c.events(float64(stuck.ID)), "ApplyConflict", "hooli-cfg") == nil {
			return fmt.Errorf("no ApplyConflict event")
		}
		return nil
	})
	h := c.get("TConfig", "hooli-cfg")
	if h.Generation != int64(pre["generation"].(float64)) || !strings.Contains(string(h.Spec), `"mine"`) || len(h.Labels) != 0 || !slices.Equal(ownerUIDs(h), []string{other}) {
		t.Fatalf("the conflicting child was changed: %+v", h)
	}
	if c.get("TDatabase", "hooli-db") != nil {
		t.Fatal("a dependent of the conflicting child was created")
	}

	// Force: the template's cfg takes over.
	cfg["conflictPolicy"] = "Force"
	if r := do(t, "PUT", fmt.Sprintf("%s/api/v1/resources/%d", c.base, int64(tpl["id"].(float64))), map[string]any{
		"spec": map[string]any{"registryId": "customers", "resources": []any{cfg, db, app}}}); r.status != 200 {
		t.Fatalf("template Force: %d %s", r.status, r.body)
	}
	hooli := c.waitTenantReady("hooli-web", 3)
	h = c.get("TConfig", "hooli-cfg")
	if !slices.Equal(ownerUIDs(h), []string{hooli.UID}) || !strings.Contains(string(h.Spec), "hooli.example.com") {
		t.Fatalf("not taken over: %+v", h)
	}
	// The tenant reconciler counted the conflict and the take-over by the
	// child's kind and policy, and timed its Tenants.
	s := scrapeURL(t, "reconciler-tenant", metricsURL(c.probes["reconciler-tenant"]))
	for _, want := range []map[string]string{
		{"kind": "TConfig", "result": "created", "conflict_policy": "Stuck"},
		{"kind": "TConfig", "result": "conflict", "conflict_policy": "Stuck"},
		{"kind": "TConfig", "result": "taken_over", "conflict_policy": "Force"},
	} {
		if v, _ := s.value("no8s_apply_attempts_total", want); v < 1 {
			t.Errorf("no8s_apply_attempts_total%v = %v", want, v)
		}
	}
	if v, _ := s.value("no8s_tenant_reconcile_duration_seconds", map[string]string{"result": "ready"}); v < 1 {
		t.Errorf("no8s_tenant_reconcile_duration_seconds{ready} counts %v", v)
	}

	// app leaves the template: every Tenant deletes its app (Delete) and
	// keeps the rest.
	if r := do(t, "PUT", fmt.Sprintf("%s/api/v1/resources/%d", c.base, int64(tpl["id"].(float64))), map[string]any{
		"spec": map[string]any{"registryId": "customers", "resources": []any{cfg, db}}}); r.status != 200 {
		t.Fatalf("template without app: %d %s", r.status, r.body)
	}
	for _, row := range []string{"acme", "initech", "hooli"} {
		c.waitTenantReady(row+"-web", 2)
		waitFor(t, 30*time.Second, row+"-app gone", func() error {
			if c.get("TApp", row+"-app") != nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
		if c.get("TConfig", row+"-cfg") == nil || c.get("TDatabase", row+"-db") == nil {
			t.Fatalf("%s lost a child still in the template", row)
		}
	}
}

// TestTenantChildrenRenderError: fromJson of one row's bad JSON makes that
// Tenant Degraded with the message and applies nothing of it; the other
// row's Tenant is unaffected.
func TestTenantChildrenRenderError(t *testing.T) {
	c := newChildCluster(t)
	ds := newMariaDB(t)
	ds.exec(`INSERT INTO tenants (id, url, active, plan) VALUES ('good', 'good.example.com', '1', '{"tier":"gold"}'), ('bad', 'bad.example.com', '1', '{"tier":')`)
	c.create(registryBody("customers", ds.source()))
	c.template("web", "customers",
		childEntry("cfg", "TConfig", "{{ .uid }}-cfg", map[string]any{"value": "{{ .host }}"}),
		childEntry("plan", "TApp", "{{ .uid }}-plan", map[string]any{"value": "{{ (fromJson .plan).tier }}"}, "cfg"))
	c.waitTenantReady("good-web", 2)
	if p := c.get("TApp", "good-plan"); p == nil || !strings.Contains(string(p.Spec), `"gold"`) {
		t.Fatalf("good-plan %+v", p)
	}
	bad := c.waitTenantDegraded("bad-web", `resource "plan"`, "fromJson", `{\"tier\":`)
	waitFor(t, 30*time.Second, "Degraded event", func() error {
		if hasEvent(c.events(float64(bad.ID)), "Degraded", "fromJson") == nil {
			return fmt.Errorf("no Degraded event")
		}
		return nil
	})
	if c.get("TConfig", "bad-cfg") != nil || c.get("TApp", "bad-plan") != nil {
		t.Fatal("a child of the Tenant whose template failed was applied")
	}
	var out map[string]any
	decode(t, bad.Outputs, &out)
	if out["desiredResources"] != float64(2) || out["readyResources"] != float64(0) || out["failedResources"] != float64(1) {
		t.Fatalf("outputs %v", out)
	}
}

// TestTenantChildrenNeverReady: a child whose reconciler never sets Ready
// keeps its dependents from being created, and past its timeoutSeconds
// (3) its Tenant is Degraded naming it.
func TestTenantChildrenNeverReady(t *testing.T) {
	mostlyWaits(t)
	c := newChildCluster(t)
	ds := newMariaDB(t)
	ds.insert("acme", "acme.example.com", "1")
	c.create(registryBody("customers", ds.source()))
	slow := childEntry("slow", "TSlow", "{{ .uid }}-slow", map[string]any{"value": "x"})
	slow["timeoutSeconds"] = 3
	c.template("web", "customers", slow, childEntry("after", "TConfig", "{{ .uid }}-after", map[string]any{"value": "y"}, "slow"))
	tn := c.waitTenantDegraded("acme-web", `"acme-slow"`, "not ready after", "timeoutSeconds 3")
	s := c.get("TSlow", "acme-slow")
	if s == nil || isReady(s) {
		t.Fatalf("acme-slow %+v", s)
	}
	if c.get("TConfig", "acme-after") != nil {
		t.Fatal("the dependent of a child that is not ready was created")
	}
	evs := c.events(float64(tn.ID))
	e := hasEvent(evs, "Degraded", "acme-slow")
	if e == nil {
		t.Fatalf("no Degraded event in %v", evs)
	}
	var first time.Time
	decode(t, e["first_time"], &first)
	if waited := first.Sub(s.CreatedAt); waited < 3*time.Second {
		t.Fatalf("Degraded %s after the child was created, before its timeoutSeconds", waited)
	}
	var out map[string]any
	decode(t, tn.Outputs, &out)
	if out["desiredResources"] != float64(2) || out["readyResources"] != float64(0) || out["failedResources"] != float64(1) {
		t.Fatalf("outputs %v", out)
	}
}

// TestTenantOwnsItsChildren: the tenant reconciler owns its children, so
// nothing polls. A Tenant whose only child stays not Ready for 20 s (its
// reconciler's attempt takes that long) has no attempt between its first
// and the child's Ready, and is reconciled, for a dependency, as soon as
// the child is Ready; a child edited by hand is restored and one deleted by
// hand comes back, with no resync (an hour away for the child's type, five
// minutes for the Tenant's) and no trigger.
func TestTenantOwnsItsChildren(t *testing.T) {
	mostlyWaits(t)
	c := newChildCluster(t)
	if r := do(t, "POST", c.base+"/api/v1/resource-types", map[string]any{"name": "TLate", "version": "v1",
		"reconcile_policy": map[string]any{"resync_seconds": 3600},
		"schema":           map[string]any{"type": "object", "properties": map[string]any{"value": map[string]any{"type": "string"}}}}); r.status != 201 {
		t.Fatalf("create TLate: %d %s", r.status, r.body)
	}
	late := c.startReconcilerArgs("late", c.storeAddrs[0], nil, "noop", "--name", "late", "--types", "TLate/v1", "--delay", "20s")
	ds := newMariaDB(t)
	ds.insert("acme", "https://acme.example.com", "1")
	c.create(registryBody("customers", ds.source()))
	entry := childEntry("late", "TLate", "{{ .uid }}-late", map[string]any{"value": "{{ .host }}"})
	entry["timeoutSeconds"] = 120
	c.template("web", "customers", entry)

	tn := c.waitTenantReadyWithin(60*time.Second, "acme-web", 1)
	child := c.get("TLate", "acme-late")
	childRuns := history(t, c.base, child.ID)
	h := history(t, c.base, tn.ID)
	if len(childRuns) == 0 || len(h) < 2 {
		t.Fatalf("child history %+v, Tenant history %+v", childRuns, h)
	}
	if took := childRuns[0].ReconcileTime.Sub(h[0].StartedAt); took < 19*time.Second {
		t.Fatalf("the child was ready %s after the Tenant's first attempt, want 20 s", took)
	}
	for _, e := range h[1:] {
		if e.ReconcileTime.Before(childRuns[0].ReconcileTime) {
			t.Fatalf("a Tenant attempt at %s (%s) before its child was ready at %s: %+v", e.StartedAt, e.Reason, childRuns[0].ReconcileTime, h)
		}
	}
	if got := h[1].Reason; got != "dependency" {
		t.Fatalf("the Tenant's attempt after its child's Ready has reason %q, want dependency", got)
	}

	// By hand: an edit is reverted, a deletion undone (the child's
	// reconciler quick now).
	late.stop(syscall.SIGTERM, 10*time.Second)
	c.startReconcilerArgs("quick", c.storeAddrs[0], nil, "noop", "--name", "late", "--types", "TLate/v1")
	n := len(history(t, c.base, tn.ID))
	if r := do(t, "PATCH", fmt.Sprintf("%s/api/v1/resources/%d", c.base, child.ID), map[string]any{"spec": map[string]any{"value": "edited-by-hand"}}); r.status != 200 {
		t.Fatalf("edit acme-late: %d %s", r.status, r.body)
	}
	waitFor(t, 30*time.Second, "acme-late's edit reverted", func() error {
		if cur := c.get("TLate", "acme-late"); !strings.Contains(string(cur.Spec), "acme.example.com") {
			return fmt.Errorf("spec %s", cur.Spec)
		}
		return nil
	})
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", c.base, child.ID), nil); r.status != 202 {
		t.Fatalf("delete acme-late: %d %s", r.status, r.body)
	}
	waitFor(t, 30*time.Second, "acme-late recreated", func() error {
		if cur := c.get("TLate", "acme-late"); cur == nil || cur.UID == child.UID || !isReady(cur) {
			return fmt.Errorf("acme-late %+v", cur)
		}
		return nil
	})
	for _, e := range history(t, c.base, tn.ID)[n:] {
		if e.Reason != "dependency" {
			t.Fatalf("the Tenant's attempts after the hand edits: %+v, want only reason dependency", history(t, c.base, tn.ID)[n:])
		}
	}
}

// TestTenantOwnsCoalesced: with the tenant reconciler stopped while 100
// resources its Tenant controls are created and then edited (by hand),
// the Tenant is reconciled at most twice once the reconciler is back: the
// changes coalesce.
func TestTenantOwnsCoalesced(t *testing.T) {
	mostlyWaits(t)
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 2*time.Second)
	c.startReconciler(c.storeAddrs[0], "TConfig/v1")
	tenant := c.startReconcilerArgs("tenant", c.storeAddrs[0], nil, "tenant")
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "TConfig", "version": "v1",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"value": map[string]any{"type": "string"}}}}); r.status != 201 {
		t.Fatalf("create TConfig: %d %s", r.status, r.body)
	}
	tc := &tenantCluster{cluster: c, base: base, ns: "default"}
	tc.startSync("a")
	tc.waitSyncLeads()
	ds := newMariaDB(t)
	ds.insert("acme", "https://acme.example.com", "1")
	tc.create(registryBody("customers", ds.source()))
	tc.template("web", "customers", childEntry("cfg", "TConfig", "{{ .uid }}-cfg", map[string]any{"value": "{{ .host }}"}))
	tn := tc.waitTenantReady("acme-web", 1)

	tenant.stop(syscall.SIGTERM, 10*time.Second)
	waitFor(t, 30*time.Second, "the tenant reconciler gone from the registry", func() error {
		for _, r := range do(t, "GET", base+"/api/v1/reconcilers", nil).list(t) {
			if r["name"] == "tenant" {
				return fmt.Errorf("still registered: %v", r)
			}
		}
		return nil
	})
	n := len(history(t, base, tn.ID))
	owner := map[string]any{"uid": tn.UID, "resource_type_name": "Tenant", "resource_type_version": "v1", "name": tn.Name, "controller": true}
	var ids []int64
	for i := range 100 {
		r := tc.create(map[string]any{"name": fmt.Sprintf("acme-extra-%d", i), "resource_type_name": "TConfig", "resource_type_version": "v1",
			"spec": map[string]any{"value": "a"}, "owner_references": []any{owner}})
		ids = append(ids, int64(r["id"].(float64)))
	}
	for _, id := range ids {
		if r := do(t, "PATCH", fmt.Sprintf("%s/api/v1/resources/%d", base, id), map[string]any{"spec": map[string]any{"value": "b"}}); r.status != 200 {
			t.Fatalf("edit %d: %d %s", id, r.status, r.body)
		}
	}
	waitFor(t, 60*time.Second, "the 100 children ready at generation 2", func() error {
		for _, id := range ids {
			r := do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", base, id), nil).json(t)
			if r["status"] != "ready" || r["observed_generation"] != float64(2) {
				return fmt.Errorf("resource %d: %v %v", id, r["status"], r["observed_generation"])
			}
		}
		return nil
	})
	if got := len(history(t, base, tn.ID)); got != n {
		t.Fatalf("the Tenant was reconciled %d times with no tenant reconciler", got-n)
	}
	c.startReconcilerArgs("tenant-again", c.storeAddrs[0], nil, "tenant")
	waitFor(t, 30*time.Second, "the Tenant reconciled once its reconciler is back", func() error {
		if len(history(t, base, tn.ID)) == n {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// More attempts would come within seconds: fail on the first beyond two.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if h := history(t, base, tn.ID)[n:]; len(h) > 2 {
			t.Fatalf("the Tenant was reconciled %d times for its children's changes, want at most 2: %+v", len(h), h)
		}
	}
	h := history(t, base, tn.ID)[n:]
	var reasons []string
	for _, e := range h {
		reasons = append(reasons, e.Reason)
	}
	t.Logf("the Tenant was reconciled %d times for 200 changes of 100 children: %v", len(h), reasons)
	if len(h) > 2 {
		t.Fatalf("the Tenant was reconciled %d times for its children's changes, want at most 2: %+v", len(h), h)
	}
}
