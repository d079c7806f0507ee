package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/platform/identity"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// apiURL is where registry-sync and the tenant reconciler write: the first
// gateway's service listener with identities on, its public listener
// otherwise.
func (c *cluster) apiURL() string {
	if len(c.serviceGateways) > 0 {
		return c.serviceGateways[0]
	}
	return c.gateways[0]
}

// identityClient is an HTTP client presenting the credentials issued with
// args (`no8s identity issue` flags) to the first gateway's service
// listener.
func (c *cluster) identityClient(args ...string) *http.Client {
	c.t.Helper()
	creds, err := identity.Load(c.credentials(args...))
	if err != nil {
		c.t.Fatal(err)
	}
	hc := authz.GatewayHTTPClient(creds, c.apiURL())
	hc.Timeout = 30 * time.Second
	return hc
}

// send is do through hc with extra headers.
func send(t *testing.T, hc *http.Client, method, url string, body any, header map[string]string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestGatewayIdentitiesRefuseForgedRESTWrites replays, against real
// processes with identities on, the REST writes anyone reaching the
// gateway could make before: create a Tenant by sending registry-sync's
// fence headers with a guessed epoch, and put another reconciler's
// finalizer or tenancy's labels on a resource. Anonymous callers on the
// public listener and a client identity on the service listener are
// refused (403 denied) and the store's revision does not move;
// registry-sync's own identity passes the check and is judged by the fence
// epoch. A reconciler finalizer may still be removed (break-glass), and a
// managed resource's labels kept as they are.
func TestGatewayIdentitiesRefuseForgedRESTWrites(t *testing.T) {
	c := newCluster(t)
	c.withIdentities()
	base := c.startAll()
	svc := c.apiURL()
	if !strings.HasPrefix(svc, "https://") {
		t.Fatalf("service listener %q", svc)
	}
	if r := do(t, "POST", base+"/api/v1/resource-types", `{"name":"Guarded","version":"v1","schema":{"type":"object","properties":{"n":{"type":"integer"}}}}`); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Guarded/v1", "Tenant/v1")

	revision := func() int64 {
		t.Helper()
		var rev int64
		if err := c.pool.QueryRow(t.Context(), `SELECT coalesce(pg_sequence_last_value('revision_seq'), 0)`).Scan(&rev); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	denied := func(what string, r response, want ...string) {
		t.Helper()
		if r.status != http.StatusForbidden {
			t.Fatalf("%s: %d %s, want 403", what, r.status, r.body)
		}
		body := r.json(t)
		if body["code"] != "denied" {
			t.Fatalf("%s: code %v, want denied: %s", what, body["code"], r.body)
		}
		for _, w := range want {
			if !strings.Contains(body["detail"].(string), w) {
				t.Fatalf("%s: detail %q lacks %q", what, body["detail"], w)
			}
		}
	}
	fenced := map[string]string{fence.HeaderLease: "registry-sync", fence.HeaderEpoch: "1"}
	tenant := map[string]any{"name": "forged", "resource_type_name": "Tenant", "resource_type_version": "v1",
		"spec": map[string]any{"registryId": "customers", "templateRef": "web", "uid": "forged", "values": map[string]any{}, "resources": []any{}}}
	withFinalizer := map[string]any{"name": "held", "resource_type_name": "Guarded", "resource_type_version": "v1", "spec": map[string]any{"n": 1},
		"finalizers": []string{"reconciler.no8s.io/tenant"}}
	withLabel := map[string]any{"name": "adopted", "resource_type_name": "Guarded", "resource_type_version": "v1", "spec": map[string]any{"n": 1},
		"labels": map[string]string{"tenants.no8s.io/tenant": "acme"}}
	ci := c.identityClient("--client", "ci")

	rev0 := revision()
	// Anonymous, on the public listener.
	denied("anonymous fenced Tenant", send(t, httpClient, "POST", base+"/api/v1/resources", tenant, fenced), "fence headers are registry-sync's")
	denied("anonymous fenced create of another type", send(t, httpClient, "POST", base+"/api/v1/resources", withLabel, fenced), "fence headers are registry-sync's")
	denied("anonymous reconciler finalizer", send(t, httpClient, "POST", base+"/api/v1/resources", withFinalizer, nil),
		`"reconciler.no8s.io/tenant"`, "reconciler/tenant")
	denied("anonymous tenancy label", send(t, httpClient, "POST", base+"/api/v1/resources", withLabel, nil),
		`"tenants.no8s.io/tenant"`, "service/registry-sync")
	// A client identity, on the service listener.
	denied("client/ci fenced Tenant", send(t, ci, "POST", svc+"/api/v1/resources", tenant, fenced), "client/ci", "fence headers are registry-sync's")
	denied("client/ci reconciler finalizer", send(t, ci, "POST", svc+"/api/v1/resources", withFinalizer, nil), "client/ci", `"reconciler.no8s.io/tenant"`)
	// The Tenant guard holds without the fence headers, too.
	denied("client/ci Tenant", send(t, ci, "POST", svc+"/api/v1/resources", tenant, nil), "registry-sync only")
	if got := revision(); got != rev0 {
		t.Fatalf("revision moved from %d to %d: a refused write was stored", rev0, got)
	}
	// The service listener takes no caller without a certificate.
	if _, err := httpClient.Get(svc + "/healthz"); err == nil {
		t.Fatal("the service listener answered a caller without a client certificate")
	}

	// registry-sync's identity passes the identity check: the store judges
	// its (here stale) epoch.
	rs := c.identityClient("--service", identity.RegistrySync)
	r := send(t, rs, "POST", svc+"/api/v1/resources", tenant, fenced)
	if r.status == http.StatusForbidden || r.status < 400 {
		t.Fatalf("registry-sync with a stale epoch: %d %s, want the store's fence refusal", r.status, r.body)
	}
	if code := r.json(t)["code"]; code != "stale_epoch" {
		t.Fatalf("registry-sync with a stale epoch: code %v: %s", code, r.body)
	}

	// On a resource of its own: a user may create, keep the labels of and
	// update a plain resource; it may not add tenancy's labels by PATCH or
	// the reconciler's finalizer by the finalizers endpoint, but may remove
	// a reconciler finalizer put there by its reconciler.
	own := do(t, "POST", base+"/api/v1/resources", map[string]any{"name": "own", "resource_type_name": "Guarded", "resource_type_version": "v1",
		"spec": map[string]any{"n": 1}, "labels": map[string]string{"team": "a"}, "finalizers": []string{"example.com/mine"}})
	if own.status != 201 {
		t.Fatalf("create own: %d %s", own.status, own.body)
	}
	id := int64(own.json(t)["id"].(float64))
	u := func(path string) string { return base + "/api/v1/resources/" + strconv.FormatInt(id, 10) + path }
	rev1 := revision()
	denied("anonymous PATCH adding a tenancy label", send(t, httpClient, "PATCH", u(""), map[string]any{"labels": map[string]any{"tenants.no8s.io/template": "web"}}, nil),
		`"tenants.no8s.io/template"`)
	denied("anonymous finalizer add", send(t, httpClient, "PUT", u("/finalizers"), map[string]any{"add": []string{"reconciler.no8s.io/noop"}}, nil),
		`"reconciler.no8s.io/noop"`, "reconciler/noop")
	if got := revision(); got != rev1 {
		t.Fatalf("revision moved from %d to %d: a refused write was stored", rev1, got)
	}
	if r := do(t, "PATCH", u(""), map[string]any{"spec": map[string]any{"n": 2}, "labels": map[string]any{"team": "b"}}); r.status != 200 {
		t.Fatalf("plain PATCH: %d %s", r.status, r.body)
	}
}

// TestGatewayIdentitiesTenantsFromMariaDB is the path the rules leave open,
// with identities on: registry-sync (service/registry-sync) and the tenant
// reconciler (reconciler/tenant), real processes writing through the
// gateway's service listener, turn a MariaDB registry's rows into Tenants
// and their children, labelled as theirs. A user may then update a child
// keeping its tenancy label, but not remove or change it.
func TestGatewayIdentitiesTenantsFromMariaDB(t *testing.T) {
	c := newCluster(t)
	c.withIdentities()
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 2*time.Second)
	c.startReconciler(c.storeAddrs[0], "TConfig/v1", "TApp/v1")
	c.startReconcilerArgs("tenant", c.storeAddrs[0], nil, "tenant")
	for _, name := range []string{"TConfig", "TApp"} {
		if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": name, "version": "v1", "schema": map[string]any{
			"type": "object", "required": []string{"value"}, "properties": map[string]any{"value": map[string]any{"type": "string"}}}}); r.status != 201 {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
	}
	tc := &tenantCluster{cluster: c, base: base, ns: "default"}
	tc.startSync("a")
	tc.waitSyncLeads()

	ds := newMariaDB(t)
	for _, row := range []string{"acme", "globex"} {
		ds.insert(row, "https://"+row+".example.com", "1")
	}
	tc.create(registryBody("customers", ds.source()))
	cfg := childEntry("cfg", "TConfig", "{{ .uid }}-cfg", map[string]any{"value": "{{ .host }}"})
	app := childEntry("app", "TApp", "{{ .uid }}-app", map[string]any{"value": "app-{{ .uid }}"}, "cfg")
	tc.template("web", "customers", cfg, app)
	for _, row := range []string{"acme", "globex"} {
		tn := tc.waitTenantReady(row+"-web", 2)
		if tn.Labels[tenancy.LabelRegistry] != "customers" || tn.Labels[tenancy.LabelTemplate] != "web" {
			t.Fatalf("Tenant %s labels %v", tn.Name, tn.Labels)
		}
		for _, name := range []string{row + "-cfg", row + "-app"} {
			typ := map[bool]string{true: "TConfig", false: "TApp"}[strings.HasSuffix(name, "-cfg")]
			ch := tc.get(typ, name)
			if ch == nil || !isReady(ch) || ch.Labels[tenancy.LabelTenant] != tn.Name {
				t.Fatalf("child %s: %+v", name, ch)
			}
		}
	}

	// A user keeps a child's tenancy label: allowed; removes or changes it:
	// refused.
	ch := tc.get("TConfig", "acme-cfg")
	u := base + "/api/v1/resources/" + strconv.FormatInt(ch.ID, 10)
	if r := do(t, "PUT", u, map[string]any{"spec": map[string]any{"value": "https://acme.example.com"}, "labels": ch.Labels}); r.status != 200 {
		t.Fatalf("PUT keeping the labels: %d %s", r.status, r.body)
	}
	for what, labels := range map[string]map[string]any{
		"remove": {tenancy.LabelTenant: nil},
		"change": {tenancy.LabelTenant: "globex-web"},
	} {
		r := do(t, "PATCH", u, map[string]any{"labels": labels})
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), `may not `+what+` the label \"tenants.no8s.io/tenant\"`) {
			t.Fatalf("%s the tenancy label: %d %s", what, r.status, r.body)
		}
	}
}

// TestGatewayIdentitiesRefuseForgedRESTWritesDev replays the forged REST
// writes and gRPC calls against `no8s dev`, which runs with identities on
// by default: anonymous fence headers and reserved keys are refused with
// 403, a caller without a certificate at the TLS handshake, a reconciler's
// certificate with PermissionDenied, and nothing is written (the embedded store's revision counter does not move), and a
// resource created afterwards becomes ready. (Its in-process registry-sync
// and tenant reconciler write through the gateway's service listener with
// their identities: the no8s dev template tests see their Tenants and
// children.)
func TestGatewayIdentitiesRefuseForgedRESTWritesDev(t *testing.T) {
	env := noPostgreSQL()
	state := filepath.Join(t.TempDir(), "state")
	addrs := startDev(t, state, env)
	base := addrs.APIURL
	c := &cluster{t: t, dbFile: filepath.Join(state, "store.db")}
	if r := do(t, "POST", base+"/api/v1/resource-types", `{"name":"Guarded","version":"v1","schema":{"type":"object","properties":{"n":{"type":"integer"}}}}`); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	startEnv(t, "reconciler-noop", filepath.Join(binDir, "no8s-reconciler"), []string{"noop", "--types", "Guarded/v1",
		"--nats-url", addrs.NATSURL, "--store-addr", addrs.WorkerAddr, "--health-listen", "off", "--identity-ca", addrs.CADir}, env)
	waitFor(t, 20*time.Second, "the noop reconciler live", func() error {
		if r := do(t, "GET", base+"/api/v1/reconcilers", nil); r.status != 200 || !strings.Contains(string(r.body), `"Guarded"`) {
			return fmt.Errorf("GET /reconcilers: %d %s", r.status, r.body)
		}
		return nil
	})
	revision := func() int { return c.count(`SELECT value FROM revision_counter WHERE id = 1`) }
	denied := func(what string, r response, want string) {
		t.Helper()
		if body := r.json(t); r.status != http.StatusForbidden || body["code"] != "denied" || !strings.Contains(fmt.Sprint(body["detail"]), want) {
			t.Fatalf("%s: %d %s, want 403 denied naming %q", what, r.status, r.body, want)
		}
		t.Logf("%s: refused (%d)", what, r.status)
	}
	fenced := map[string]string{fence.HeaderLease: "registry-sync", fence.HeaderEpoch: "1"}
	tenant := map[string]any{"name": "forged", "resource_type_name": "Tenant", "resource_type_version": "v1",
		"spec": map[string]any{"registryId": "customers", "templateRef": "web", "uid": "forged", "values": map[string]any{}, "resources": []any{}}}
	rev0 := revision()
	denied("anonymous fenced Tenant", send(t, httpClient, "POST", base+"/api/v1/resources", tenant, fenced), "fence headers are registry-sync's")
	denied("anonymous reconciler finalizer", send(t, httpClient, "POST", base+"/api/v1/resources", map[string]any{"name": "held",
		"resource_type_name": "Guarded", "resource_type_version": "v1", "spec": map[string]any{"n": 1}, "finalizers": []string{"reconciler.no8s.io/tenant"}}, nil),
		`"reconciler.no8s.io/tenant"`)
	denied("anonymous tenancy label", send(t, httpClient, "POST", base+"/api/v1/resources", map[string]any{"name": "adopted",
		"resource_type_name": "Guarded", "resource_type_version": "v1", "spec": map[string]any{"n": 1}, "labels": map[string]string{"tenants.no8s.io/tenant": "acme"}}, nil),
		`"tenants.no8s.io/tenant"`)
	if got := revision(); got != rev0 {
		t.Fatalf("the store's revision moved from %d to %d: a refused write was stored", rev0, got)
	}

	// The gRPC attacks: without a certificate the store's ports refuse the
	// handshake; a reconciler's certificate from the dev CA may not take
	// the scheduler lease nor store past admission.
	evilScheduler := &reconcilev1.BecomeSchedulerRequest{Holder: "evil", LeaseSeconds: 3600}
	pastAdmission := &storev1.CreateResourceRequest{Resource: &storev1.Resource{Name: "forged", ResourceTypeName: "Guarded", ResourceTypeVersion: "v1",
		Spec: []byte(`{"n":"not an integer"}`)}}
	grpcRefused := func(what string, want codes.Code, err error) {
		t.Helper()
		if status.Code(err) != want {
			t.Fatalf("%s: %v, want %s", what, err, want)
		}
		t.Logf("%s: refused (%s)", what, want)
	}
	plain, err := grpcserver.Dial(addrs.StoreAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, err = reconcilev1.NewReconcileServiceClient(plain).BecomeScheduler(t.Context(), evilScheduler)
	grpcRefused("BecomeScheduler without a certificate", codes.Unavailable, err)
	evilDir := filepath.Join(t.TempDir(), "evil")
	if r := no8sEnv(t, nil, "", "identity", "issue", "--ca-dir", addrs.CADir, "--out", evilDir, "--reconciler", "evil", "--types", "Other/v1"); r.code != 0 {
		t.Fatalf("issue: %s", r.stderr)
	}
	evilCreds, err := identity.Load(evilDir)
	if err != nil {
		t.Fatal(err)
	}
	evil, err := grpcserver.Dial(addrs.StoreAddr, authz.DialOptions(evilCreds, identity.Store)...)
	if err != nil {
		t.Fatal(err)
	}
	defer evil.Close()
	_, err = reconcilev1.NewReconcileServiceClient(evil).BecomeScheduler(t.Context(), evilScheduler)
	grpcRefused("BecomeScheduler as reconciler/evil", codes.PermissionDenied, err)
	_, err = storev1.NewStoreServiceClient(evil).CreateResource(t.Context(), pastAdmission)
	grpcRefused("CreateResource past admission as reconciler/evil", codes.PermissionDenied, err)
	if got := revision(); got != rev0 {
		t.Fatalf("the store's revision moved from %d to %d: a refused call wrote", rev0, got)
	}

	// The stack's own writers are not refused: a resource created now
	// becomes ready (the scheduler and the noop reconciler at work).
	r := do(t, "POST", base+"/api/v1/resources", `{"name":"after","resource_type_name":"Guarded","resource_type_version":"v1","spec":{"n":1}}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	waitResource(t, base, int64(r.json(t)["id"].(float64)), "ready", func(m map[string]any) bool { return m["status"] == "ready" })
}
