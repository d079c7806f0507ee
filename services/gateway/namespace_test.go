package gateway

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/resource"
)

// The namespaces API: default always exists and cannot be deleted, names are
// DNS labels, a taken name is 409, a missing namespace 404, dry runs write
// nothing.
func TestNamespacesAPI(t *testing.T) {
	list := decode[[]resource.Namespace](t, do(t, http.MethodGet, "/api/v1/namespaces", nil).expect(t, http.StatusOK))
	if i := slices.IndexFunc(list, func(n resource.Namespace) bool { return n.Name == names.DefaultNamespace }); i < 0 || list[i].Status != "active" {
		t.Fatalf("default is not listed as active: %+v", list)
	}
	r := do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "api-a"}).expect(t, http.StatusCreated)
	created := decode[resource.Namespace](t, r)
	if created.Name != "api-a" || created.Status != "active" || created.UID == "" || created.ResourceVersion == 0 || r.Header.Get("Location") != "/api/v1/namespaces/api-a" {
		t.Fatalf("created %+v, Location %q", created, r.Header.Get("Location"))
	}
	if got := decode[resource.Namespace](t, do(t, http.MethodGet, "/api/v1/namespaces/api-a", nil).expect(t, http.StatusOK)); got != created {
		t.Fatalf("get %+v, want %+v", got, created)
	}
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "api-a"}).expectError(t, http.StatusConflict, "name_taken", "/name")
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "API_A"}).expectError(t, http.StatusBadRequest, "invalid", "/name")
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "api-x", "labels": map[string]string{}}).expectError(t, http.StatusBadRequest, "", "/labels")
	unchanged(t, func() {
		do(t, http.MethodPost, "/api/v1/namespaces?dry_run=true", map[string]any{"name": "api-dry"}).expect(t, http.StatusCreated)
	})
	do(t, http.MethodGet, "/api/v1/namespaces/api-dry", nil).expectError(t, http.StatusNotFound, "not_found")
	do(t, http.MethodGet, "/api/v1/namespaces/Not_A_Label", nil).expectError(t, http.StatusBadRequest, "invalid", "/name")
	e := do(t, http.MethodDelete, "/api/v1/namespaces/default", nil).expectError(t, http.StatusForbidden, "namespace_protected")
	if !strings.Contains(e.Detail, "default") {
		t.Errorf("detail %q does not name the namespace", e.Detail)
	}
	do(t, http.MethodDelete, "/api/v1/namespaces/api-nope", nil).expectError(t, http.StatusNotFound, "not_found")
	// A dry-run delete answers terminating and changes nothing.
	dry := decode[resource.Namespace](t, do(t, http.MethodDelete, "/api/v1/namespaces/api-a?dry_run=true", nil).expect(t, http.StatusAccepted))
	if dry.Status != "terminating" {
		t.Fatalf("dry-run delete: %+v", dry)
	}
	if got := decode[resource.Namespace](t, do(t, http.MethodGet, "/api/v1/namespaces/api-a", nil).expect(t, http.StatusOK)); got.Status != "active" {
		t.Fatalf("after a dry-run delete: %+v", got)
	}
	// An empty namespace goes at once.
	do(t, http.MethodDelete, "/api/v1/namespaces/api-a", nil).expect(t, http.StatusAccepted)
	do(t, http.MethodGet, "/api/v1/namespaces/api-a", nil).expectError(t, http.StatusNotFound, "not_found")
}

// Resources in namespaces: the same name in two namespaces, a create in a
// missing namespace (404 naming it, nothing written), by-name reads and
// lists scoped by ?namespace=, the namespace immutable, and a namespace's
// deletion through its resources' finalizers.
func TestResourcesInNamespaces(t *testing.T) {
	createType(t, "NsWidget", "v1", `{"type":"object","properties":{"size":{"type":"integer"}}}`)
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "gw-b"}).expect(t, http.StatusCreated)
	body := func(ns string) map[string]any {
		b := map[string]any{"name": "same", "resource_type_name": "NsWidget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}}
		if ns != "" {
			b["namespace"] = ns
		}
		return b
	}
	def := createResource(t, body(""))
	inB := createResource(t, body("gw-b"))
	if def.Namespace != names.DefaultNamespace || inB.Namespace != "gw-b" || def.ID == inB.ID {
		t.Fatalf("same name in two namespaces: %+v / %+v", def, inB)
	}
	do(t, http.MethodPost, "/api/v1/resources", body("gw-b")).expectError(t, http.StatusConflict, "name_taken", "/name")
	unchanged(t, func() {
		e := do(t, http.MethodPost, "/api/v1/resources", body("gw-missing")).expectError(t, http.StatusNotFound, "namespace_not_found", "/namespace")
		if !strings.Contains(e.Detail, `"gw-missing"`) {
			t.Errorf("detail %q does not name the namespace", e.Detail)
		}
		do(t, http.MethodPost, "/api/v1/resources?dry_run=true", body("gw-missing")).expectError(t, http.StatusNotFound, "namespace_not_found", "/namespace")
		do(t, http.MethodPost, "/api/v1/resources", body("GW_B")).expectError(t, http.StatusBadRequest, "invalid", "/namespace")
	})

	byName := "/api/v1/resources/by-name/NsWidget/v1/same"
	if got := decode[resource.Resource](t, do(t, http.MethodGet, byName, nil).expect(t, http.StatusOK)); got.ID != def.ID {
		t.Errorf("by name without a namespace: %d, want %d", got.ID, def.ID)
	}
	if got := decode[resource.Resource](t, do(t, http.MethodGet, byName+"?namespace=gw-b", nil).expect(t, http.StatusOK)); got.ID != inB.ID {
		t.Errorf("by name in gw-b: %d, want %d", got.ID, inB.ID)
	}
	do(t, http.MethodGet, byName+"?namespace=gw-missing", nil).expectError(t, http.StatusNotFound, "not_found")
	do(t, http.MethodGet, byName+"?namespace=GW", nil).expectError(t, http.StatusBadRequest, "invalid", "/namespace")

	listed := decode[[]resource.Resource](t, do(t, http.MethodGet, "/api/v1/resources?resource_type=NsWidget&namespace=gw-b", nil).expect(t, http.StatusOK))
	if len(listed) != 1 || listed[0].ID != inB.ID || listed[0].Namespace != "gw-b" {
		t.Errorf("list gw-b: %+v", listed)
	}
	if all := decode[[]resource.Resource](t, do(t, http.MethodGet, "/api/v1/resources?resource_type=NsWidget", nil).expect(t, http.StatusOK)); len(all) != 2 {
		t.Errorf("list every namespace: %d resources, want 2", len(all))
	}
	do(t, http.MethodGet, "/api/v1/resources?namespace=Bad_NS", nil).expectError(t, http.StatusBadRequest, "invalid", "/namespace")

	// The namespace is immutable; repeating it is fine.
	path := "/api/v1/resources/" + strconv.FormatInt(def.ID, 10)
	unchanged(t, func() {
		do(t, http.MethodPut, path, map[string]any{"namespace": "gw-b", "spec": map[string]any{"size": 2}}).expectError(t, http.StatusBadRequest, "invalid", "/namespace")
		do(t, http.MethodPatch, path, `{"namespace":"gw-b"}`, "Content-Type", "application/merge-patch+json").expectError(t, http.StatusBadRequest, "invalid", "/namespace")
		do(t, http.MethodPatch, path, `{"namespace":7}`, "Content-Type", "application/merge-patch+json").expectError(t, http.StatusBadRequest, "invalid", "/namespace")
	})
	if got := decode[resource.Resource](t, do(t, http.MethodPut, path, map[string]any{"namespace": "default", "spec": map[string]any{"size": 2}}).expect(t, http.StatusOK)); got.Generation != 2 {
		t.Errorf("PUT repeating the namespace: %+v", got)
	}
	do(t, http.MethodPatch, path, `{"namespace":"default","labels":{"a":"b"}}`, "Content-Type", "application/merge-patch+json").expect(t, http.StatusOK)

	// Deleting gw-b: terminating at once, nothing new in it, its resource
	// deleting until its reconciler's cleanup; then the namespace is gone.
	ns := decode[resource.Namespace](t, do(t, http.MethodDelete, "/api/v1/namespaces/gw-b", nil).expect(t, http.StatusAccepted))
	if ns.Status != "terminating" || ns.DeletedAt == nil {
		t.Fatalf("deleted namespace: %+v", ns)
	}
	b2 := body("gw-b")
	b2["name"] = "late"
	do(t, http.MethodPost, "/api/v1/resources", b2).expectError(t, http.StatusConflict, "namespace_terminating", "/namespace")
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "gw-b"}).expectError(t, http.StatusConflict, "namespace_terminating")
	got := decode[resource.Resource](t, do(t, http.MethodGet, "/api/v1/resources/"+strconv.FormatInt(inB.ID, 10), nil).expect(t, http.StatusOK))
	if got.Status != resource.StatusDeleting {
		t.Fatalf("gw-b's resource after the namespace's deletion: %+v", got)
	}
	reconcileNow(t, got)
	deadline := time.Now().Add(30 * time.Second)
	for do(t, http.MethodGet, "/api/v1/namespaces/gw-b", nil).Status != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatalf("namespace gw-b still there: %s", do(t, http.MethodGet, "/api/v1/namespaces/gw-b", nil).Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	do(t, http.MethodGet, "/api/v1/resources/"+strconv.FormatInt(inB.ID, 10), nil).expectError(t, http.StatusNotFound, "not_found")
	if got := decode[resource.Resource](t, do(t, http.MethodGet, path, nil).expect(t, http.StatusOK)); got.DeletedAt != nil {
		t.Errorf("the default namespace's resource: %+v", got)
	}
}

// A webhook scoped to namespaces sees only the resources in them, and the
// resource it is sent carries its namespace.
func TestWebhookNamespaceScoping(t *testing.T) {
	createType(t, "HookNs", "v1", hookSchema)
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "hook-a"}).expect(t, http.StatusCreated)
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "hook-b"}).expect(t, http.StatusCreated)
	var log callLog
	srv := hookServer(t, &log, "scoped", func(hookRequest) any { return map[string]any{"allowed": false, "message": "not in hook-a"} })
	do(t, http.MethodPost, "/api/v1/admission-webhooks", hook("bad.ns.example.com", "HookNs", srv.URL, "validating", "namespaces", []string{})).
		expectError(t, http.StatusBadRequest, "invalid", "/namespaces")
	do(t, http.MethodPost, "/api/v1/admission-webhooks", hook("bad.ns.example.com", "HookNs", srv.URL, "validating", "namespaces", []string{"hook-a", "Bad", "hook-a"})).
		expectError(t, http.StatusBadRequest, "invalid", "/namespaces/1", "/namespaces/2")
	w := register(t, hook("scoped.ns.example.com", "HookNs", srv.URL, "validating", "namespaces", []string{"hook-a"}))
	doc := decode[map[string]any](t, do(t, http.MethodGet, "/api/v1/admission-webhooks/"+strconv.FormatInt(w.ID, 10), nil).expect(t, http.StatusOK))
	if ns, _ := doc["namespaces"].([]any); len(ns) != 1 || ns[0] != "hook-a" {
		t.Fatalf("registered namespaces: %v", doc["namespaces"])
	}
	res := func(ns string) map[string]any {
		b := hookResource("HookNs", "r", map[string]any{})
		b["namespace"] = ns
		return b
	}
	do(t, http.MethodPost, "/api/v1/resources?dry_run=true", res("hook-b")).expect(t, http.StatusCreated)
	do(t, http.MethodPost, "/api/v1/resources?dry_run=true", hookResource("HookNs", "r", map[string]any{})).expect(t, http.StatusCreated)
	if got := log.names(); len(got) != 0 {
		t.Fatalf("a webhook scoped to hook-a was called for other namespaces: %v", got)
	}
	do(t, http.MethodPost, "/api/v1/resources?dry_run=true", res("hook-a")).expectError(t, http.StatusForbidden, "denied")
	if got := log.names(); len(got) != 1 || log.get(0).req.Resource.Namespace != "hook-a" {
		t.Fatalf("calls %v (resource namespace %q)", got, log.get(0).req.Resource.Namespace)
	}
	// null clears the scope: every namespace again.
	wpath := "/api/v1/admission-webhooks/" + strconv.FormatInt(w.ID, 10)
	doc = decode[map[string]any](t, do(t, http.MethodPatch, wpath, `{"namespaces":null}`, "Content-Type", "application/merge-patch+json").expect(t, http.StatusOK))
	if doc["namespaces"] != nil {
		t.Fatalf("namespaces after clearing: %v", doc["namespaces"])
	}
	waitWebhooks(t)
	do(t, http.MethodPost, "/api/v1/resources?dry_run=true", res("hook-b")).expectError(t, http.StatusForbidden, "denied")
}

// A watch with ?namespace= gets the changes of that namespace only, each
// event naming the namespace; a resumed watch filters the same way.
func TestWatchNamespaceFilter(t *testing.T) {
	createType(t, "NsWatch", "v1", `{"type":"object"}`)
	do(t, http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "watch-a"}).expect(t, http.StatusCreated)
	do(t, http.MethodGet, "/api/v1/events?namespace=Watch_A", nil).expectError(t, http.StatusBadRequest, "invalid", "/namespace")
	s := openWatch(t, "/api/v1/events?resource_type=NsWatch&namespace=watch-a")
	defer s.close()
	mk := func(ns, name string) resource.Resource {
		return createResource(t, map[string]any{"namespace": ns, "name": name, "resource_type_name": "NsWatch", "resource_type_version": "v1", "spec": map[string]any{}})
	}
	mk("default", "x")
	first := mk("watch-a", "x")
	mk("default", "y")
	second := mk("watch-a", "y")
	for _, want := range []resource.Resource{first, second} {
		ev := s.next(20 * time.Second)
		d := decode[struct {
			EventType    string            `json:"event_type"`
			ResourceID   int64             `json:"resource_id"`
			Namespace    string            `json:"namespace"`
			ResourceData resource.Resource `json:"resource_data"`
		}](t, response{Body: ev.Data})
		if ev.Name != "CREATED" || d.ResourceID != want.ID || d.Namespace != "watch-a" || d.ResourceData.Namespace != "watch-a" {
			t.Fatalf("event %s %s, want CREATED of %d in watch-a", ev.Name, ev.Data, want.ID)
		}
	}
	// Resumed from before the first: the same two, nothing of default.
	r := openWatch(t, "/api/v1/events?resource_type=NsWatch&namespace=watch-a&since="+strconv.FormatInt(first.ResourceVersion-1, 10))
	defer r.close()
	for _, want := range []int64{first.ID, second.ID} {
		ev := r.next(20 * time.Second)
		if d := ev.doc(t); d.ResourceID != want {
			t.Fatalf("resumed: event of %d (%s), want %d", d.ResourceID, ev.Data, want)
		}
	}
}
