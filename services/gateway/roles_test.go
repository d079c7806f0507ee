package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/identity"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/internal/httpsource"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/rbac"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// The tests of this file are the OWASP API Security Top 10 (2023) asked of
// the roles: each names its category. They run a gateway of their own with
// authentication, roles and the REST rules on (an identity, as in
// production), against the package's real store.

// owaspRuns makes namespace, account and binding names unique across
// -count runs on one stack.
var owaspRuns atomic.Int64

// rolesGateway serves the stack with authentication on, the bootstrap
// token, and an identity (the REST rules hold, as in production). tune, when
// not nil, changes the auth settings; nil keeps the defaults.
func rolesGateway(t *testing.T, tune func(*AuthConfig)) (*Service, *httptest.Server) {
	t.Helper()
	ca, err := identityca.New(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "gateway")
	if err := ca.IssueTo(dir, identity.ServiceID(identity.Gateway), time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if cfg.Identity, err = identity.Load(dir); err != nil {
		t.Fatal(err)
	}
	cfg.Auth = AuthConfig{BootstrapToken: bootstrapToken}
	if tune != nil {
		tune(&cfg.Auth)
	}
	cfg.Tokens = storev1.NewTokenServiceClient(env.storeConn)
	cfg.JetStream, cfg.Watch = env.js, watchTestConfig
	gw := New(cfg, env.store, env.admission, env.log.With("service", "gateway-roles"))
	ctx, cancel := context.WithCancel(env.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.RunEvents(ctx) }()
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() { cancel(); srv.Close(); <-done })
	return gw, srv
}

// quickRoles makes a policy change seen within 200 ms (the revocation
// test keeps the defaults).
func quickRoles(a *AuthConfig) {
	a.RolesRefresh, a.RolesMaxStaleness, a.StreamRecheck = 100*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
}

// actor calls one gateway with one token.
type actor struct {
	t     *testing.T
	srv   *httptest.Server
	token string
	name  string
}

// do sends a request as p; body as in send (a string or []byte as is,
// anything else as JSON); headers are name, value pairs.
func (p actor) do(method, path string, body any, headers ...string) response {
	p.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			p.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, p.srv.URL+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	hc := *p.srv.Client()
	hc.Timeout = 30 * time.Second // a stream answered where a refusal was due ends
	resp, err := hc.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s as %s: %v", method, path, p.name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// errorOf decodes an error body (status and code compared by callers).
func errorOf(t *testing.T, r response) errorDoc {
	t.Helper()
	if r.Status < 400 {
		t.Fatalf("status %d, want an error; body: %s", r.Status, r.Body)
	}
	return decode[errorDoc](t, r)
}

// admin is the bootstrap token's actor on srv.
func admin(t *testing.T, srv *httptest.Server) actor {
	return actor{t: t, srv: srv, token: bootstrapToken, name: "admin"}
}

// serviceAccount creates a token of serviceaccount:<name> (as admin).
func serviceAccount(t *testing.T, srv *httptest.Server, name string) actor {
	t.Helper()
	tok, err := apiClient(t, srv, bootstrapToken).CreateToken(t.Context(), client.TokenCreate{Name: name, ServiceAccount: true, ExpiresIn: "1h"})
	if err != nil {
		t.Fatalf("service account %s: %v", name, err)
	}
	return actor{t: t, srv: srv, token: tok.Value, name: rbac.ServiceAccountPrefix + name}
}

// subject is the binding subject of a service account.
func (p actor) subject() rbac.Subject {
	return rbac.Subject{Kind: rbac.SubjectServiceAccount, Name: strings.TrimPrefix(p.name, rbac.ServiceAccountPrefix)}
}

// createNamespace creates a namespace as admin.
func (p actor) createNamespace(name string) {
	p.t.Helper()
	p.do(http.MethodPost, "/api/v1/namespaces", map[string]any{"name": name}).expect(p.t, http.StatusCreated)
}

// create creates a resource as p and returns the answer.
func (p actor) create(typ, version, ns, name string, spec any) response {
	p.t.Helper()
	return p.do(http.MethodPost, "/api/v1/resources", map[string]any{
		"resource_type_name": typ, "resource_type_version": version, "namespace": ns, "name": name, "spec": spec})
}

// mustCreate creates a resource as p and returns it.
func (p actor) mustCreate(typ, version, ns, name string, spec any) resource.Resource {
	p.t.Helper()
	return decode[resource.Resource](p.t, p.create(typ, version, ns, name, spec).expect(p.t, http.StatusCreated))
}

// role creates a Role in ns (ns "": a ClusterRole) as p.
func (p actor) role(ns, name string, rules ...rbac.Rule) response {
	p.t.Helper()
	typ := rbac.RoleType
	if ns == "" {
		typ, ns = rbac.ClusterRoleType, rbac.ClusterNamespace
	}
	return p.create(typ, rbac.Version, ns, name, rbac.RoleSpec{Rules: rules})
}

// bind creates a RoleBinding in ns (ns "": a ClusterRoleBinding) of ref to
// subjects as p.
func (p actor) bind(ns, name string, ref rbac.RoleRef, subjects ...rbac.Subject) response {
	p.t.Helper()
	typ := rbac.RoleBindingType
	if ns == "" {
		typ, ns = rbac.ClusterRoleBindingType, rbac.ClusterNamespace
	}
	return p.create(typ, rbac.Version, ns, name, rbac.BindingSpec{RoleRef: ref, Subjects: subjects})
}

// can asks the access review as p.
func (p actor) can(verb, typ, ns, name string) bool {
	p.t.Helper()
	r := p.do(http.MethodPost, "/api/v1/access-review", client.AccessReview{Verb: verb, Type: typ, Namespace: ns, Name: name}).expect(p.t, http.StatusOK)
	return decode[client.AccessReviewResult](p.t, r).Allowed
}

// await polls the access review until it answers want: a change of roles
// is seen within the cache's staleness bound.
func (p actor) await(want bool, verb, typ, ns string) {
	p.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.can(verb, typ, ns, "") != want {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: access review of %s %s in %q still not %v after 5 s", p.name, verb, typ, ns, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clusterRole names a ClusterRole; localRole a Role.
func clusterRole(name string) rbac.RoleRef {
	return rbac.RoleRef{Kind: rbac.ClusterRoleType, Name: name}
}
func localRole(name string) rbac.RoleRef { return rbac.RoleRef{Kind: rbac.RoleType, Name: name} }

func resPath(id int64) string { return "/api/v1/resources/" + strconv.FormatInt(id, 10) }

// absentID is an id no resource of the test stack has.
const absentID = int64(1) << 40

// sameRefusal fails unless got and want are the same status and code, and
// their details are the same once the ids and names that tell them apart
// are replaced.
func sameRefusal(t *testing.T, what string, got, want response, replace ...string) {
	t.Helper()
	g, w := errorOf(t, got), errorOf(t, want)
	gd := strings.NewReplacer(replace...).Replace(g.Detail)
	if got.Status != want.Status || g.Code != w.Code || gd != w.Detail {
		t.Errorf("%s: %d %q %q; an absent one: %d %q %q: the answers tell what exists", what, got.Status, g.Code, gd, want.Status, w.Code, w.Detail)
	}
}

// TestOWASPAPI1_BrokenObjectLevelAuthorization: an editor of namespace a
// learns nothing of namespace b: by id it is answered as for an id that
// does not exist, by name and in lists it is refused whether the object
// exists or not, and an unscoped list shows a's objects only.
func TestOWASPAPI1_BrokenObjectLevelAuthorization(t *testing.T) {
	_, srv := rolesGateway(t, quickRoles)
	n := owaspRuns.Add(1)
	root := admin(t, srv)
	nsA, nsB := fmt.Sprintf("bola-a-%d", n), fmt.Sprintf("bola-b-%d", n)
	root.createNamespace(nsA)
	root.createNamespace(nsB)
	typ := watchType(t, "Bola")
	inA := root.mustCreate(typ, "v1", nsA, "mine", map[string]any{"n": 1})
	inB := root.mustCreate(typ, "v1", nsB, "held-b", map[string]any{"n": 1})

	ed := serviceAccount(t, srv, fmt.Sprintf("bola-%d", n))
	root.bind(nsA, "editors", clusterRole(rbac.RoleEditor), ed.subject()).expect(t, http.StatusCreated)
	ed.await(true, rbac.VerbUpdate, typ, nsA)
	ed.do(http.MethodGet, resPath(inA.ID), nil).expect(t, http.StatusOK)

	// By id: b's object answers as an id nobody has.
	idB, idAbsent := strconv.FormatInt(inB.ID, 10), strconv.FormatInt(absentID, 10)
	patchCT := []string{"Content-Type", mediaMergePatch}
	for _, tc := range []struct {
		method string
		body   any
		hdr    []string
	}{
		{http.MethodGet, nil, nil},
		{http.MethodPut, map[string]any{"spec": map[string]any{"n": 2}}, nil},
		{http.MethodPatch, `{"spec":{"n":2}}`, patchCT},
		{http.MethodDelete, nil, nil},
	} {
		got := ed.do(tc.method, resPath(inB.ID), tc.body, tc.hdr...)
		absent := ed.do(tc.method, resPath(absentID), tc.body, tc.hdr...)
		if got.Status != http.StatusNotFound {
			t.Errorf("%s of b's resource by id: %d, want 404: %s", tc.method, got.Status, got.Body)
		}
		sameRefusal(t, tc.method+" of b's resource by id", got, absent, idB, idAbsent)
	}
	for _, sub := range []string{"/history", "/outputs", "/event-records"} {
		got, absent := ed.do(http.MethodGet, resPath(inB.ID)+sub, nil), ed.do(http.MethodGet, resPath(absentID)+sub, nil)
		if got.Status != http.StatusNotFound {
			t.Errorf("GET %s of b's resource: %d, want 404: %s", sub, got.Status, got.Body)
		}
		sameRefusal(t, "GET "+sub+" of b's resource", got, absent, idB, idAbsent)
	}

	// By name: refused (403) whether it exists or not.
	byName := func(name string) response {
		return ed.do(http.MethodGet, "/api/v1/resources/by-name/"+typ+"/v1/"+name+"?namespace="+nsB, nil)
	}
	got, absent := byName("held-b"), byName("nobody")
	if got.Status != http.StatusForbidden {
		t.Errorf("b's resource by name: %d, want 403: %s", got.Status, got.Body)
	}
	sameRefusal(t, "b's resource by name", got, absent, "held-b", "nobody")
	// Server-side apply addresses by name too: an existing object of b and
	// an absent one are refused alike.
	apply := func(name string) response {
		return ed.do(http.MethodPost, "/api/v1/resources/apply", map[string]any{
			"resource_type_name": typ, "resource_type_version": "v1", "namespace": nsB, "name": name, "spec": map[string]any{"n": 7}})
	}
	got, absent = apply("held-b"), apply("nobody")
	if got.Status != http.StatusForbidden {
		t.Errorf("apply to b's resource: %d, want 403: %s", got.Status, got.Body)
	}
	sameRefusal(t, "apply to b's resource", got, absent, "held-b", "nobody")

	// Lists.
	ed.do(http.MethodGet, "/api/v1/resources?namespace="+nsB+"&resource_type="+typ, nil).expectError(t, http.StatusForbidden, "denied")
	for _, q := range []string{"?resource_type=" + typ, "", "?limit=1000"} {
		items := decode[[]resource.Resource](t, ed.do(http.MethodGet, "/api/v1/resources"+q, nil).expect(t, http.StatusOK))
		seenA := false
		for _, it := range items {
			if it.Namespace != nsA {
				t.Errorf("list %q shows %s/%s of namespace %s", q, it.ResourceTypeName, it.Name, it.Namespace)
			}
			seenA = seenA || it.ID == inA.ID
		}
		// (An unscoped page is the store's first page, filtered: a's
		// resource need not be on it.)
		if strings.Contains(q, "resource_type") && !seenA {
			t.Errorf("list %q lacks a's resource %d", q, inA.ID)
		}
	}

	// b's object is as it was.
	after := decode[resource.Resource](t, root.do(http.MethodGet, resPath(inB.ID), nil).expect(t, http.StatusOK))
	if after.ResourceVersion != inB.ResourceVersion || after.DeletedAt != nil || string(after.Spec) != string(inB.Spec) {
		t.Fatalf("b's resource changed: %+v, was %+v", after, inB)
	}
}

// TestOWASPAPI3_BrokenObjectPropertyLevelAuthorization: a writer of specs
// cannot set status, identity, bookkeeping or reserved keys: each such
// body is refused (400 for a field a write does not take, 403 for a
// reserved key, 409 for a stale resource_version precondition), nothing is
// ignored silently, and the stored object keeps its status, uid and
// generation. Creates with unknown members are refused and store nothing.
func TestOWASPAPI3_BrokenObjectPropertyLevelAuthorization(t *testing.T) {
	_, srv := rolesGateway(t, quickRoles)
	n := owaspRuns.Add(1)
	root := admin(t, srv)
	ns := fmt.Sprintf("bopla-%d", n)
	root.createNamespace(ns)
	typ := watchType(t, "Bopla")
	ed := serviceAccount(t, srv, fmt.Sprintf("bopla-%d", n))
	root.bind(ns, "editors", clusterRole(rbac.RoleEditor), ed.subject()).expect(t, http.StatusCreated)
	ed.await(true, rbac.VerbCreate, typ, ns)
	before := ed.mustCreate(typ, "v1", ns, "target", map[string]any{"n": 1})
	path := resPath(before.ID)

	forged := map[string]any{
		"status": "ready", "status_message": "forged", "phase": "Ready",
		"conditions":          []map[string]any{{"type": "Ready", "status": "True"}},
		"uid":                 "00000000-0000-0000-0000-000000000000",
		"id":                  1,
		"deleted_at":          "2020-01-01T00:00:00Z",
		"created_at":          "2020-01-01T00:00:00Z",
		"generation":          99,
		"observed_generation": 99,
		"outputs":             map[string]any{"secret": "x"},
		"finalizers":          []string{"example.com/keep"},
		"name":                "renamed",
		"resource_type_name":  "Other",
	}
	for field, value := range forged {
		body := map[string]any{"spec": map[string]any{"n": 5}, field: value}
		ed.do(http.MethodPut, path, body).expectError(t, http.StatusBadRequest, "invalid", "/"+field)
		ed.do(http.MethodPatch, path, body, "Content-Type", mediaMergePatch).expectError(t, http.StatusBadRequest, "invalid", "/"+field)
		ops := []map[string]any{{"op": "add", "path": "/" + field, "value": value}}
		ed.do(http.MethodPatch, path, ops, "Content-Type", mediaJSONPatch).expectError(t, http.StatusBadRequest, "invalid", "/0/path")
	}
	// resource_version is a precondition, never a value: a stale one is a
	// conflict.
	stale := map[string]any{"spec": map[string]any{"n": 5}, "resource_version": before.ResourceVersion + 1000}
	ed.do(http.MethodPut, path, stale).expectError(t, http.StatusConflict, "conflict")
	ed.do(http.MethodPatch, path, stale, "Content-Type", mediaMergePatch).expectError(t, http.StatusConflict, "conflict")
	// The namespace cannot move.
	ed.do(http.MethodPut, path, map[string]any{"spec": map[string]any{"n": 5}, "namespace": "default"}).expectError(t, http.StatusBadRequest, "invalid", "/namespace")
	ed.do(http.MethodPatch, path, map[string]any{"namespace": "default"}, "Content-Type", mediaMergePatch).expectError(t, http.StatusBadRequest, "invalid", "/namespace")
	// Reserved keys are their writers' (403 denied), on every path.
	reservedLabel := map[string]string{tenancy.KeyPrefix + "registry": "forged"}
	ed.do(http.MethodPut, path, map[string]any{"spec": map[string]any{"n": 5}, "labels": reservedLabel}).expectError(t, http.StatusForbidden, "denied")
	ed.do(http.MethodPatch, path, map[string]any{"annotations": map[string]string{httpsource.KeyPrefix + "source": "feed"}}, "Content-Type", mediaMergePatch).expectError(t, http.StatusForbidden, "denied")
	ed.do(http.MethodPut, path+"/finalizers", map[string]any{"add": []string{"reconciler.no8s.io/someone"}}).expectError(t, http.StatusForbidden, "denied")

	after := decode[resource.Resource](t, root.do(http.MethodGet, path, nil).expect(t, http.StatusOK))
	if after.ResourceVersion != before.ResourceVersion || after.UID != before.UID || after.Generation != before.Generation ||
		after.Status != before.Status || after.StatusMessage != before.StatusMessage || len(after.Conditions) != len(before.Conditions) ||
		after.DeletedAt != nil || len(after.Finalizers) != len(before.Finalizers) || len(after.Labels) != 0 || string(after.Spec) != string(before.Spec) {
		t.Fatalf("the refused writes changed the resource:\nnow    %+v\nbefore %+v", after, before)
	}
	// A plain spec write works, and moves only what the server owns.
	put := decode[resource.Resource](t, ed.do(http.MethodPut, path, map[string]any{"spec": map[string]any{"n": 5}}).expect(t, http.StatusOK))
	if put.UID != before.UID || put.Generation != before.Generation+1 || put.Status != before.Status || put.ResourceVersion <= before.ResourceVersion {
		t.Fatalf("a spec write: %+v, before %+v", put, before)
	}

	// Mass assignment on create: unknown members are refused, nothing is
	// stored.
	for field, value := range map[string]any{
		"status": "ready", "uid": "00000000-0000-0000-0000-000000000000", "id": 1, "generation": 7, "resource_version": 7,
		"conditions": []any{}, "deleted_at": "2020-01-01T00:00:00Z", "created_by": "someone", "is_admin": true, "owner": "root",
	} {
		name := "mass-" + strings.ReplaceAll(field, "_", "-")
		body := map[string]any{"resource_type_name": typ, "resource_type_version": "v1", "namespace": ns, "name": name,
			"spec": map[string]any{"n": 1}, field: value}
		ed.do(http.MethodPost, "/api/v1/resources", body).expectError(t, http.StatusBadRequest, "invalid", "/"+field)
		ed.do(http.MethodPost, "/api/v1/resources/apply", body).expectError(t, http.StatusBadRequest, "invalid", "/"+field)
		root.do(http.MethodGet, "/api/v1/resources/by-name/"+typ+"/v1/"+name+"?namespace="+ns, nil).expectError(t, http.StatusNotFound, "not_found")
	}
	for name, body := range map[string]map[string]any{
		"mass-finalizer": {"finalizers": []string{"reconciler.no8s.io/someone"}},
		"mass-label":     {"labels": reservedLabel},
	} {
		body["resource_type_name"], body["resource_type_version"], body["namespace"], body["name"], body["spec"] = typ, "v1", ns, name, map[string]any{"n": 1}
		ed.do(http.MethodPost, "/api/v1/resources", body).expectError(t, http.StatusForbidden, "denied")
		root.do(http.MethodGet, "/api/v1/resources/by-name/"+typ+"/v1/"+name+"?namespace="+ns, nil).expectError(t, http.StatusNotFound, "not_found")
	}
}

// TestOWASPAPI5_BrokenFunctionLevelAuthorization: viewers and editors may
// not reach the administrators' functions (types, webhooks, namespaces,
// registries, HTTP sources, roles and bindings, others' tokens); a viewer
// may not write resources; both may read them; the access review agrees.
func TestOWASPAPI5_BrokenFunctionLevelAuthorization(t *testing.T) {
	_, srv := rolesGateway(t, quickRoles)
	n := owaspRuns.Add(1)
	root := admin(t, srv)
	ns := fmt.Sprintf("bfla-%d", n)
	root.createNamespace(ns)
	typ := createType(t, fmt.Sprintf("Bfla%d", n), "v1", looseSchema)
	res := root.mustCreate(typ.Name, "v1", ns, "shared", map[string]any{"name": "x"})
	storedRole := decode[resource.Resource](t, root.role(ns, "readers", rbac.Rule{Verbs: []string{rbac.VerbGet}, Types: []string{typ.Name}}).expect(t, http.StatusCreated))

	viewer := serviceAccount(t, srv, fmt.Sprintf("bfla-viewer-%d", n))
	editor := serviceAccount(t, srv, fmt.Sprintf("bfla-editor-%d", n))
	root.bind("", fmt.Sprintf("bfla-viewer-%d", n), clusterRole(rbac.RoleViewer), viewer.subject()).expect(t, http.StatusCreated)
	root.bind("", fmt.Sprintf("bfla-editor-%d", n), clusterRole(rbac.RoleEditor), editor.subject()).expect(t, http.StatusCreated)
	viewer.await(true, rbac.VerbGet, typ.Name, ns)
	editor.await(true, rbac.VerbCreate, typ.Name, ns)

	typePath := "/api/v1/resource-types/" + strconv.FormatInt(typ.ID, 10)
	for _, p := range []actor{viewer, editor} {
		refuse := func(method, path string, body any) {
			t.Helper()
			if r := p.do(method, path, body); r.Status != http.StatusForbidden || errorOf(t, r).Code != "denied" {
				t.Errorf("%s: %s %s: %d %s, want 403 denied", p.name, method, path, r.Status, r.Body)
			}
		}
		refuse(http.MethodPost, "/api/v1/resource-types", map[string]any{"name": "Forged" + strconv.FormatInt(n, 10), "version": "v1", "schema": map[string]any{"type": "object"}})
		refuse(http.MethodPut, typePath, map[string]any{"description": "forged", "schema": map[string]any{"type": "object"}})
		refuse(http.MethodDelete, typePath, nil)
		refuse(http.MethodPost, "/api/v1/admission-webhooks", map[string]any{"name": "forged", "url": "https://example.com/hook"})
		refuse(http.MethodPut, "/api/v1/admission-webhooks/1", map[string]any{"name": "forged"})
		refuse(http.MethodDelete, "/api/v1/admission-webhooks/1", nil)
		refuse(http.MethodGet, "/api/v1/admission-webhooks", nil)
		refuse(http.MethodPost, "/api/v1/namespaces", map[string]any{"name": "forged-" + strconv.FormatInt(n, 10)})
		refuse(http.MethodDelete, "/api/v1/namespaces/"+ns, nil)
		refuse(http.MethodGet, "/api/v1/tokens?all=true", nil)
		refuse(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "forged-robot", "service_account": true})
		for _, c := range []struct{ typ, version, ns string }{
			{tenancy.RegistryType, tenancy.Version, ns}, {httpsource.Type, httpsource.Version, ns},
			{rbac.RoleType, rbac.Version, ns}, {rbac.RoleBindingType, rbac.Version, ns},
			{rbac.ClusterRoleType, rbac.Version, rbac.ClusterNamespace}, {rbac.ClusterRoleBindingType, rbac.Version, rbac.ClusterNamespace},
		} {
			refuse(http.MethodPost, "/api/v1/resources", map[string]any{"resource_type_name": c.typ, "resource_type_version": c.version,
				"namespace": c.ns, "name": "forged", "spec": map[string]any{}})
		}
		// A stored Role they may not even read: by id, as if absent.
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			var body any
			if m == http.MethodPut {
				body = map[string]any{"spec": map[string]any{"rules": []any{}}}
			}
			if r := p.do(m, resPath(storedRole.ID), body); r.Status != http.StatusNotFound {
				t.Errorf("%s: %s of a stored Role: %d %s, want 404", p.name, m, r.Status, r.Body)
			}
		}
		// Both read resources.
		p.do(http.MethodGet, resPath(res.ID), nil).expect(t, http.StatusOK)
		p.do(http.MethodGet, "/api/v1/resources?namespace="+ns+"&resource_type="+typ.Name, nil).expect(t, http.StatusOK)
		p.do(http.MethodGet, "/api/v1/resource-types", nil).expect(t, http.StatusOK)
		for _, rv := range []client.AccessReview{
			{Verb: rbac.VerbCreate, Type: rbac.KindResourceTypes}, {Verb: rbac.VerbCreate, Type: rbac.KindNamespaces},
			{Verb: rbac.VerbCreate, Type: rbac.KindWebhooks}, {Verb: rbac.VerbManageTokens, Type: rbac.KindTokens},
			{Verb: rbac.VerbCreate, Type: rbac.RoleBindingType, Namespace: ns}, {Verb: rbac.VerbCreate, Type: tenancy.RegistryType, Namespace: ns},
		} {
			if p.can(rv.Verb, rv.Type, rv.Namespace, rv.Name) {
				t.Errorf("%s: access review allows %+v", p.name, rv)
			}
		}
		if !p.can(rbac.VerbGet, typ.Name, ns, "shared") {
			t.Errorf("%s: access review refuses get %s", p.name, typ.Name)
		}
	}
	// The viewer may not write resources; the editor may.
	for _, r := range []response{
		viewer.create(typ.Name, "v1", ns, "by-viewer", map[string]any{"name": "x"}),
		viewer.do(http.MethodPut, resPath(res.ID), map[string]any{"spec": map[string]any{"name": "y"}}),
		viewer.do(http.MethodDelete, resPath(res.ID), nil),
	} {
		if r.Status != http.StatusForbidden || errorOf(t, r).Code != "denied" {
			t.Errorf("viewer write: %d %s, want 403 denied", r.Status, r.Body)
		}
	}
	if viewer.can(rbac.VerbCreate, typ.Name, ns, "") || !editor.can(rbac.VerbCreate, typ.Name, ns, "") {
		t.Error("access review: viewer may create, or editor may not")
	}
	editor.create(typ.Name, "v1", ns, "by-editor", map[string]any{"name": "x"}).expect(t, http.StatusCreated)
	// Nothing the refusals touched changed.
	root.do(http.MethodGet, "/api/v1/namespaces/"+ns, nil).expect(t, http.StatusOK)
	root.do(http.MethodGet, typePath, nil).expect(t, http.StatusOK)
	root.do(http.MethodGet, resPath(storedRole.ID), nil).expect(t, http.StatusOK)
	root.do(http.MethodGet, "/api/v1/resources/by-name/"+typ.Name+"/v1/by-viewer?namespace="+ns, nil).expectError(t, http.StatusNotFound, "not_found")
}

// TestOWASPAPI5_PrivilegeEscalationThroughRoleBinding: who may write roles
// and bindings in a namespace may grant only rights it holds, unless it
// holds bind (or escalate); binding no8s:admin without bind leaves them
// where they were.
func TestOWASPAPI5_PrivilegeEscalationThroughRoleBinding(t *testing.T) {
	_, srv := rolesGateway(t, quickRoles)
	n := owaspRuns.Add(1)
	root := admin(t, srv)
	ns := fmt.Sprintf("esc-%d", n)
	root.createNamespace(ns)
	typ := watchType(t, "Esc")
	victim := root.mustCreate(typ, "v1", ns, "victim", map[string]any{"n": 1})

	esc := serviceAccount(t, srv, fmt.Sprintf("esc-%d", n))
	other := serviceAccount(t, srv, fmt.Sprintf("esc-other-%d", n))
	root.role(ns, "rbac-writer",
		rbac.Rule{Verbs: []string{rbac.VerbCreate, rbac.VerbUpdate, rbac.VerbGet}, Types: []string{rbac.RoleType, rbac.RoleBindingType}},
		rbac.Rule{Verbs: []string{rbac.VerbGet, rbac.VerbList}, Types: []string{typ}},
	).expect(t, http.StatusCreated)
	root.role(ns, "deleter", rbac.Rule{Verbs: []string{rbac.VerbDelete, rbac.VerbGet}, Types: []string{typ}}).expect(t, http.StatusCreated)
	root.role(ns, "getter", rbac.Rule{Verbs: []string{rbac.VerbGet}, Types: []string{typ}}).expect(t, http.StatusCreated)
	root.bind(ns, "rbac-writers", localRole("rbac-writer"), esc.subject()).expect(t, http.StatusCreated)
	esc.await(true, rbac.VerbCreate, rbac.RoleBindingType, ns)

	refused := func(what string, r response, name, typ string) {
		t.Helper()
		if r.Status != http.StatusForbidden || errorOf(t, r).Code != "denied" {
			t.Errorf("%s: %d %s, want 403 denied", what, r.Status, r.Body)
		}
		root.do(http.MethodGet, "/api/v1/resources/by-name/"+typ+"/v1/"+name+"?namespace="+ns, nil).expectError(t, http.StatusNotFound, "not_found")
	}
	refused("binding no8s:admin to oneself", esc.bind(ns, "self-admin", clusterRole(rbac.RoleAdmin), esc.subject()), "self-admin", rbac.RoleBindingType)
	refused("binding no8s:editor to oneself", esc.bind(ns, "self-editor", clusterRole(rbac.RoleEditor), esc.subject()), "self-editor", rbac.RoleBindingType)
	refused("binding a Role of more rights", esc.bind(ns, "self-deleter", localRole("deleter"), esc.subject()), "self-deleter", rbac.RoleBindingType)
	refused("binding a Role that does not exist", esc.bind(ns, "self-ghost", localRole("ghost"), esc.subject()), "self-ghost", rbac.RoleBindingType)
	refused("a Role of a verb not held", esc.role(ns, "more", rbac.Rule{Verbs: []string{rbac.VerbDelete}, Types: []string{typ}}), "more", rbac.RoleType)
	refused("a Role of the wildcard", esc.role(ns, "all", rbac.Rule{Verbs: []string{rbac.Wildcard}, Types: []string{rbac.Wildcard}}), "all", rbac.RoleType)
	refused("a Role of escalate", esc.role(ns, "escalate", rbac.Rule{Verbs: []string{rbac.VerbEscalate}, Types: []string{rbac.RoleType}}), "escalate", rbac.RoleType)
	// Turning an allowed Role into a larger one is refused as its create is.
	mine := decode[resource.Resource](t, esc.role(ns, "mine", rbac.Rule{Verbs: []string{rbac.VerbGet}, Types: []string{typ}}).expect(t, http.StatusCreated))
	if r := esc.do(http.MethodPut, resPath(mine.ID), map[string]any{"spec": rbac.RoleSpec{Rules: []rbac.Rule{{Verbs: []string{rbac.VerbDelete}, Types: []string{typ}}}}}); r.Status != http.StatusForbidden {
		t.Errorf("updating a Role to a verb not held: %d %s, want 403", r.Status, r.Body)
	}
	// Rights they hold may be granted.
	esc.bind(ns, "getters", localRole("getter"), other.subject()).expect(t, http.StatusCreated)
	// A Role just created is bindable once the cache has read it.
	deadline := time.Now().Add(5 * time.Second)
	for r := esc.bind(ns, "mine", localRole("mine"), other.subject()); r.Status != http.StatusCreated; r = esc.bind(ns, "mine", localRole("mine"), other.subject()) {
		if r.Status != http.StatusForbidden || !strings.Contains(errorOf(t, r).Detail, "does not exist") || time.Now().After(deadline) {
			t.Fatalf("binding a Role of rights held: %d %s, want 201", r.Status, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// With bind on the ClusterRole, it may be bound (here to another).
	root.role(ns, "admin-binder", rbac.Rule{Verbs: []string{rbac.VerbBind}, Types: []string{rbac.ClusterRoleType}, Names: []string{rbac.RoleAdmin}}).expect(t, http.StatusCreated)
	root.bind(ns, "admin-binders", localRole("admin-binder"), esc.subject()).expect(t, http.StatusCreated)
	deadline = time.Now().Add(5 * time.Second)
	for r := esc.bind(ns, "other-admin", clusterRole(rbac.RoleAdmin), other.subject()); r.Status != http.StatusCreated; r = esc.bind(ns, "other-admin", clusterRole(rbac.RoleAdmin), other.subject()) {
		if r.Status != http.StatusForbidden || time.Now().After(deadline) {
			t.Fatalf("binding no8s:admin with bind on it: %d %s, want 201 within 5 s", r.Status, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The access review (no8s auth can-i) answers as the binding was
	// decided: bind on the ClusterRole, in the binding's namespace.
	if !esc.can(rbac.VerbBind, rbac.ClusterRoleType, ns, rbac.RoleAdmin) {
		t.Error("access review: bind on no8s:admin in the namespace answered no, though the binding was allowed")
	}
	if esc.can(rbac.VerbBind, rbac.ClusterRoleType, "", rbac.RoleAdmin) || esc.can(rbac.VerbBind, rbac.ClusterRoleType, ns, rbac.RoleEditor) {
		t.Error("access review: bind allowed beyond the namespace or the role named")
	}
	other.await(true, rbac.VerbDelete, typ, ns)

	// Still not an administrator: neither here nor anywhere.
	if esc.can(rbac.VerbDelete, typ, ns, "") || esc.can(rbac.VerbCreate, rbac.KindResourceTypes, "", "") {
		t.Error("the escalating account gained rights")
	}
	if r := esc.do(http.MethodDelete, resPath(victim.ID), nil); r.Status != http.StatusForbidden {
		t.Errorf("the escalating account deleting: %d %s, want 403", r.Status, r.Body)
	}
	if r := esc.do(http.MethodPost, "/api/v1/resource-types", map[string]any{"name": "Esc" + strconv.FormatInt(n, 10) + "X", "version": "v1", "schema": map[string]any{"type": "object"}}); r.Status != http.StatusForbidden {
		t.Errorf("the escalating account creating a type: %d %s, want 403", r.Status, r.Body)
	}
	// A namespace's admin binding is the namespace's only.
	if other.can(rbac.VerbCreate, rbac.KindResourceTypes, "", "") || other.can(rbac.VerbGet, typ, "default", "") {
		t.Error("no8s:admin bound in one namespace grants beyond it")
	}
	root.do(http.MethodGet, resPath(victim.ID), nil).expect(t, http.StatusOK)
}

// TestOWASPAPI1_WatchIsFilteredByRights: a watch over every namespace
// carries only the events of the namespaces its caller may watch; one
// naming another namespace is refused.
func TestOWASPAPI1_WatchIsFilteredByRights(t *testing.T) {
	_, srv := rolesGateway(t, quickRoles)
	n := owaspRuns.Add(1)
	root := admin(t, srv)
	nsA, nsB := fmt.Sprintf("watch-a-%d", n), fmt.Sprintf("watch-b-%d", n)
	root.createNamespace(nsA)
	root.createNamespace(nsB)
	typ := watchType(t, "WatchRights")
	w := serviceAccount(t, srv, fmt.Sprintf("watch-%d", n))
	root.role(nsA, "watcher", rbac.Rule{Verbs: []string{rbac.VerbWatch, rbac.VerbList, rbac.VerbGet}, Types: []string{typ}}).expect(t, http.StatusCreated)
	root.bind(nsA, "watchers", localRole("watcher"), w.subject()).expect(t, http.StatusCreated)
	w.await(true, rbac.VerbWatch, typ, nsA)

	auth := []string{"Authorization", "Bearer " + w.token}
	if r := w.do(http.MethodGet, "/api/v1/events?namespace="+nsB+"&resource_type="+typ, nil); r.Status != http.StatusForbidden {
		t.Errorf("watch of the type in b: %d %s, want 403", r.Status, r.Body)
	}
	all := openWatchWith(t, watchClient(false), srv.URL, "/api/v1/events", 0, auth...)
	ofType := openWatchWith(t, watchClient(false), srv.URL, "/api/v1/events?resource_type="+typ, 0, auth...)
	// A watch of every type in b is not refused (listFilter decides a
	// request naming no type by a filter): it must stay empty.
	onlyB := openWatchWith(t, watchClient(false), srv.URL, "/api/v1/events?namespace="+nsB, 0, auth...)
	inB := root.mustCreate(typ, "v1", nsB, "hidden", map[string]any{"n": 1})
	inA := root.mustCreate(typ, "v1", nsA, "shown", map[string]any{"n": 1})
	for name, s := range map[string]*sseStream{"all": all, "of type": ofType} {
		ev := s.next(10 * time.Second)
		if d := ev.doc(t); d.ResourceID != inA.ID || d.ResourceData.Namespace != nsA {
			t.Fatalf("watch %s: first event %s %s, want a's resource %d (b's is %d)", name, ev.Name, ev.Data, inA.ID, inB.ID)
		}
		// Nothing of b follows (its event was published first).
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			ev, err := s.nextOrEnd(time.Until(deadline))
			if err != nil {
				break
			}
			if strings.Contains(string(ev.Data), nsB) || ev.doc(t).ResourceID == inB.ID {
				t.Fatalf("watch %s shows b: %s %s", name, ev.Name, ev.Data)
			}
		}
	}
	onlyB.expectQuiet(time.Second)
}

// TestOWASPAPI5_QueueInputEnforcesVerbs: the queue input's messages are
// decided by the roles of their Authorization header, as HTTP requests
// are (through the Executor the NATS listener calls).
func TestOWASPAPI5_QueueInputEnforcesVerbs(t *testing.T) {
	gw, srv := rolesGateway(t, quickRoles)
	n := owaspRuns.Add(1)
	root := admin(t, srv)
	nsA, nsB := fmt.Sprintf("queue-a-%d", n), fmt.Sprintf("queue-b-%d", n)
	root.createNamespace(nsA)
	root.createNamespace(nsB)
	typ := watchType(t, "QueueRoles")
	victim := root.mustCreate(typ, "v1", nsA, "victim", map[string]any{"n": 1})
	root.mustCreate(typ, "v1", nsB, "elsewhere", map[string]any{"n": 1})
	q := serviceAccount(t, srv, fmt.Sprintf("queue-%d", n))
	root.role(nsA, "reader", rbac.Rule{Verbs: []string{rbac.VerbGet, rbac.VerbList}, Types: []string{typ}}).expect(t, http.StatusCreated)
	root.bind(nsA, "readers", localRole("reader"), q.subject()).expect(t, http.StatusCreated)
	q.await(true, rbac.VerbGet, typ, nsA)

	doc := func(ns, name string) []byte {
		return fmt.Appendf(nil, "kind: Resource\ntype: %s/v1\nmetadata:\n  name: %s\n  namespace: %s\nspec: {n: 3}\n", typ, name, ns)
	}
	exec := func(op queueinput.Op, ns, name string) queueinput.Answer {
		return gw.Execute(t.Context(), queueinput.Request{Op: op, Document: doc(ns, name), Authorization: "Bearer " + q.token})
	}
	denied := func(what string, a queueinput.Answer) {
		t.Helper()
		if a.Status != http.StatusForbidden || a.Malformed || !strings.Contains(string(a.Body), `"code":"denied"`) {
			t.Errorf("%s: %d (malformed %v) %s, want 403 denied", what, a.Status, a.Malformed, a.Body)
		}
	}
	denied("apply without create", exec(queueinput.OpApply, nsA, "new-one"))
	root.do(http.MethodGet, "/api/v1/resources/by-name/"+typ+"/v1/new-one?namespace="+nsA, nil).expectError(t, http.StatusNotFound, "not_found")
	denied("apply without update", exec(queueinput.OpApply, nsA, "victim"))
	denied("delete without delete", exec(queueinput.OpDelete, nsA, "victim"))
	if got := decode[resource.Resource](t, root.do(http.MethodGet, resPath(victim.ID), nil).expect(t, http.StatusOK)); got.ResourceVersion != victim.ResourceVersion || got.DeletedAt != nil {
		t.Fatalf("the refused messages changed the resource: %+v", got)
	}
	// In a namespace it has no rights in, an existing object and an absent
	// one are answered alike.
	for _, op := range []queueinput.Op{queueinput.OpApply, queueinput.OpDelete} {
		got, absent := exec(op, nsB, "elsewhere"), exec(op, nsB, "nobody")
		if got.Status != absent.Status || got.Status != http.StatusForbidden {
			t.Errorf("%s in b: an existing object %d %s, an absent one %d %s: want both 403", op, got.Status, got.Body, absent.Status, absent.Body)
		}
	}

	// With the rights, the same messages are applied.
	root.role(nsA, "writer", rbac.Rule{Verbs: []string{rbac.VerbCreate, rbac.VerbUpdate, rbac.VerbDelete, rbac.VerbGet}, Types: []string{typ}}).expect(t, http.StatusCreated)
	root.bind(nsA, "writers", localRole("writer"), q.subject()).expect(t, http.StatusCreated)
	q.await(true, rbac.VerbDelete, typ, nsA)
	if a := exec(queueinput.OpApply, nsA, "new-one"); a.Status != http.StatusCreated {
		t.Fatalf("apply with create: %d %s", a.Status, a.Body)
	}
	if a := exec(queueinput.OpApply, nsA, "victim"); a.Status != http.StatusOK {
		t.Fatalf("apply with update: %d %s", a.Status, a.Body)
	}
	if a := exec(queueinput.OpDelete, nsA, "victim"); a.Status != http.StatusAccepted {
		t.Fatalf("delete with delete: %d %s", a.Status, a.Body)
	}
}

// TestRevokingABindingEndsWatchAndRefusesRequests: at the default
// settings, deleting a binding ends its subject's watch within 5 s and
// refuses its requests within 2 s.
func TestRevokingABindingEndsWatchAndRefusesRequests(t *testing.T) {
	_, srv := rolesGateway(t, nil)
	n := owaspRuns.Add(1)
	root := admin(t, srv)
	ns := fmt.Sprintf("revoke-%d", n)
	root.createNamespace(ns)
	typ := watchType(t, "Revoke")
	r := root.mustCreate(typ, "v1", ns, "watched", map[string]any{"n": 1})
	sa := serviceAccount(t, srv, fmt.Sprintf("revoke-%d", n))
	binding := decode[resource.Resource](t, root.bind(ns, "viewers", clusterRole(rbac.RoleViewer), sa.subject()).expect(t, http.StatusCreated))
	sa.await(true, rbac.VerbWatch, typ, ns)
	sa.do(http.MethodGet, resPath(r.ID), nil).expect(t, http.StatusOK)

	w := openWatchWith(t, watchClient(false), srv.URL, "/api/v1/events?namespace="+ns, 0, "Authorization", "Bearer "+sa.token)
	live := root.mustCreate(typ, "v1", ns, "live", map[string]any{"n": 1})
	for d := w.next(10 * time.Second).doc(t); d.ResourceID != live.ID; d = w.next(10 * time.Second).doc(t) {
		if d.ResourceData.Namespace != ns {
			t.Fatalf("an event of namespace %q: %+v", d.ResourceData.Namespace, d)
		}
	}

	root.do(http.MethodDelete, resPath(binding.ID), nil).expect(t, http.StatusAccepted)
	revoked := time.Now()
	refusedAfter := make(chan time.Duration, 1)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			resp, err := send0(srv, sa.token, resPath(r.ID))
			if err == nil && resp != http.StatusOK {
				refusedAfter <- time.Since(revoked)
				return
			}
			if time.Since(revoked) > 10*time.Second {
				refusedAfter <- -1
				return
			}
			<-tick.C
		}
	}()
	var ended time.Duration
	for {
		if _, err := w.nextOrEnd(time.Until(revoked.Add(10 * time.Second))); err != nil {
			if !strings.Contains(err.Error(), "stream ended") {
				t.Fatalf("the watch of a revoked binding: %v after %v", err, time.Since(revoked))
			}
			ended = time.Since(revoked)
			break
		}
	}
	refused := <-refusedAfter
	t.Logf("after the binding's deletion: requests refused after %v, the watch ended after %v", refused, ended)
	if refused < 0 || refused > 2*time.Second {
		t.Errorf("requests refused after %v, want within 2 s", refused)
	}
	if ended > 5*time.Second {
		t.Errorf("the watch ended after %v, want within 5 s", ended)
	}
	if got := sa.do(http.MethodGet, resPath(r.ID), nil); got.Status != http.StatusNotFound {
		t.Errorf("GET after the revocation: %d %s, want 404", got.Status, got.Body)
	}
}

// send0 is GET path with token, for a goroutine: its status.
func send0(srv *httptest.Server, token, path string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestCredentialGrantBoundToSubjects: a credential grant bound to a
// subject lets that subject's TenantRegistry use the secret, and nobody
// else's, not even another writer of registries in the namespace nor an
// administrator (the grant names who, roles say what).
func TestCredentialGrantBoundToSubjects(t *testing.T) {
	serveType(t, "TenantRegistry", "v1")
	_, srv := rolesGateway(t, quickRoles)
	root := admin(t, srv)
	dba, intern := serviceAccount(t, srv, "dba"), serviceAccount(t, srv, "intern")
	root.role("", "registry-writer", rbac.Rule{Verbs: []string{rbac.VerbCreate, rbac.VerbGet}, Types: []string{"TenantRegistry"}}).expect(t, http.StatusCreated)
	root.bind("", "registry-writers", clusterRole("registry-writer"), dba.subject(), intern.subject()).expect(t, http.StatusCreated)
	dba.await(true, rbac.VerbCreate, "TenantRegistry", "default")
	intern.await(true, rbac.VerbCreate, "TenantRegistry", "default")
	registry := func() map[string]any {
		return map[string]any{
			"source":        map[string]any{"type": "mysql", "host": "127.0.0.1", "database": "crm", "table": "tenants", "passwordRef": map[string]any{"env": "BOUND_PW"}},
			"valueMappings": map[string]any{"uid": "id", "hostOrUrl": "url", "activate": "active"},
		}
	}
	dba.create("TenantRegistry", "v1", "default", "bound-dba", registry()).expect(t, http.StatusCreated)
	for _, who := range []actor{intern, root} {
		r := who.create("TenantRegistry", "v1", "default", "bound-"+strings.TrimPrefix(who.name, rbac.ServiceAccountPrefix), registry())
		e := r.expectError(t, http.StatusBadRequest, "validation_failed", "/spec/source/passwordRef")
		if !strings.Contains(e.Errors[0].Message, "bound to subjects") {
			t.Fatalf("%s using dba's credential: %+v", who.name, e)
		}
	}
}
