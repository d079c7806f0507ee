package gateway

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/client"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/resource"
)

// These tests run the whole chain against real HTTP(S) webhook servers:
// gateway → admission (gRPC) → webhooks (HTTP) → store (gRPC, PostgreSQL).
// Every test scopes its webhooks to its own resource types so that the rest
// of the package is not affected.

// hookRequest is what a webhook receives.
type hookRequest struct {
	UID         string             `json:"uid"`
	Operation   string             `json:"operation"`
	DryRun      bool               `json:"dry_run"`
	Resource    resource.Resource  `json:"resource"`
	OldResource *resource.Resource `json:"old_resource"`
	User        *struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
}

// hookCall is one call a webhook server received.
type hookCall struct {
	hook string
	req  hookRequest
}

// callLog records webhook calls across servers, in order.
type callLog struct {
	mu    sync.Mutex
	calls []hookCall
}

func (l *callLog) add(c hookCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

func (l *callLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []string{}
	for _, c := range l.calls {
		out = append(out, c.hook)
	}
	return out
}

func (l *callLog) get(i int) hookCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[i]
}

func (l *callLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = nil
}

// reply is a raw answer: status and body as given.
type reply struct {
	status int
	body   string
}

// allow is the answer of a webhook that has nothing to say.
var allow = map[string]any{"allowed": true}

// patch answers allowed with JSON Patch operations.
func patch(ops ...map[string]any) map[string]any {
	return map[string]any{"allowed": true, "patches": ops}
}

func op(o, path string, value any) map[string]any {
	return map[string]any{"op": o, "path": path, "value": value}
}

// hookServer starts a webhook named name that records its calls in log and
// answers what answer returns: a reply, or anything else as JSON with 200.
func hookServer(t *testing.T, log *callLog, name string, answer func(hookRequest) any) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(hookHandler(t, log, name, answer))
	t.Cleanup(srv.Close)
	return srv
}

func hookHandler(t *testing.T, log *callLog, name string, answer func(hookRequest) any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req hookRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("webhook %s: decode request: %v", name, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook %s: %s with Content-Type %q", name, r.Method, r.Header.Get("Content-Type"))
		}
		log.add(hookCall{hook: name, req: req})
		switch a := answer(req).(type) {
		case reply:
			w.WriteHeader(a.status)
			_, _ = w.Write([]byte(a.body))
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(a)
		}
	})
}

// webhookJSON decodes a webhook answer of the API.
type webhookJSON = client.Webhook

// register registers a webhook through the API, waits until admission has
// it in force, and removes it when the test ends.
func register(t *testing.T, body map[string]any) webhookJSON {
	t.Helper()
	w := decode[webhookJSON](t, do(t, http.MethodPost, "/api/v1/admission-webhooks", body).expect(t, http.StatusCreated))
	t.Cleanup(func() {
		do(t, http.MethodDelete, "/api/v1/admission-webhooks/"+strconv.FormatInt(w.ID, 10), nil).expect(t, http.StatusNoContent)
		waitWebhooks(t)
	})
	waitWebhooks(t)
	return w
}

// waitWebhooks waits until admission has the store's webhook set in force.
func waitWebhooks(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := env.store.ListAdmissionWebhooks(ctx, &storev1.ListAdmissionWebhooksRequest{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if env.admissionSvc.WebhookSetVersion() == resp.GetSetVersion() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("admission did not pick up webhook set %s (has %s)", resp.GetSetVersion(), env.admissionSvc.WebhookSetVersion())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hook(name string, typeName any, url, kind string, extra ...any) map[string]any {
	m := map[string]any{
		"name": name, "resource_type_name": typeName, "webhook_url": url, "webhook_type": kind,
		"operations": []string{"CREATE", "UPDATE"},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

const hookSchema = `{"type":"object","properties":{
	"size":{"type":"integer","minimum":1,"default":1},
	"tier":{"type":"string","default":"basic"},
	"backup":{"type":"object","properties":{"days":{"type":"integer","default":7},"enabled":{"type":"boolean"}}},
	"trail":{"type":"array","items":{"type":"string"}}}}`

func hookResource(typeName, name string, spec any) map[string]any {
	return map[string]any{"name": name, "resource_type_name": typeName, "resource_type_version": "v1", "spec": spec}
}

func TestWebhookRegistrationAPI(t *testing.T) {
	body := map[string]any{
		"name": "reg.example.com", "webhook_url": "http://127.0.0.1:1/admit", "webhook_type": "validating",
		"operations": []string{"CREATE", "DELETE"},
	}
	r := do(t, http.MethodPost, "/api/v1/admission-webhooks", body).expect(t, http.StatusCreated)
	w := decode[webhookJSON](t, r)
	path := "/api/v1/admission-webhooks/" + strconv.FormatInt(w.ID, 10)
	if r.Header.Get("Location") != path {
		t.Errorf("Location %q", r.Header.Get("Location"))
	}
	if w.TimeoutSeconds != 10 || w.FailurePolicy != "Fail" || w.Ordering != 0 || w.ResourceTypeName != nil || w.CABundle != nil || w.ResourceVersion == 0 {
		t.Fatalf("defaults: %+v", w)
	}
	var raw map[string]any
	_ = json.Unmarshal(r.Body, &raw)
	for _, k := range []string{"resource_type_name", "resource_type_version", "ca_bundle"} {
		if v, ok := raw[k]; !ok || v != nil {
			t.Errorf("%s is %v, want null", k, v)
		}
	}
	do(t, http.MethodPost, "/api/v1/admission-webhooks", body).expectError(t, http.StatusConflict, "name_taken", "/name")
	do(t, http.MethodPost, "/api/v1/admission-webhooks?dry_run=true", map[string]any{
		"name": "dry.example.com", "webhook_url": "https://h/x", "webhook_type": "mutating", "operations": []string{"UPDATE"},
	}).expect(t, http.StatusCreated)

	got := decode[webhookJSON](t, do(t, http.MethodGet, path, nil).expect(t, http.StatusOK))
	if got.ID != w.ID || got.Name != w.Name || !slices.Equal(got.Operations, []string{"CREATE", "DELETE"}) {
		t.Fatalf("get %+v", got)
	}
	list := decode[[]webhookJSON](t, do(t, http.MethodGet, "/api/v1/admission-webhooks", nil).expect(t, http.StatusOK))
	if len(list) != 1 || list[0].ID != w.ID {
		t.Fatalf("list %+v (the dry run must not have stored anything)", list)
	}

	// PUT changes the fields it gives; a GET body can be sent back.
	var back map[string]any
	_ = json.Unmarshal(do(t, http.MethodGet, path, nil).Body, &back)
	back["failure_policy"], back["ordering"], back["resource_type_name"] = "Ignore", 5, "Widget"
	up := decode[webhookJSON](t, do(t, http.MethodPut, path, back).expect(t, http.StatusOK))
	if up.FailurePolicy != "Ignore" || up.Ordering != 5 || up.ResourceTypeName == nil || *up.ResourceTypeName != "Widget" || up.ResourceVersion <= w.ResourceVersion {
		t.Fatalf("put %+v", up)
	}
	do(t, http.MethodPut, path, back).expectError(t, http.StatusConflict, "conflict")
	delete(back, "resource_version")
	delete(back, "ordering")
	if up := decode[webhookJSON](t, do(t, http.MethodPut, path, back).expect(t, http.StatusOK)); up.Ordering != 5 {
		t.Fatalf("an omitted ordering is kept (5), got %d", up.Ordering)
	}
	back["id"] = w.ID + 1
	do(t, http.MethodPut, path, back).expectError(t, http.StatusBadRequest, "invalid", "/id")
	do(t, http.MethodPut, "/api/v1/admission-webhooks/999999", body).expectError(t, http.StatusNotFound, "not_found")
	do(t, http.MethodGet, "/api/v1/admission-webhooks/999999", nil).expectError(t, http.StatusNotFound, "not_found")
	do(t, http.MethodGet, "/api/v1/admission-webhooks/abc", nil).expectError(t, http.StatusBadRequest, "invalid", "/id")

	do(t, http.MethodDelete, path+"?dry_run=true", nil).expect(t, http.StatusNoContent)
	do(t, http.MethodDelete, path, nil).expect(t, http.StatusNoContent)
	do(t, http.MethodDelete, path, nil).expectError(t, http.StatusNotFound, "not_found")
	waitWebhooks(t)
}

func TestWebhookRegistrationBadInput(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	valid := func() map[string]any {
		return map[string]any{"name": "bad.example.com", "webhook_url": "https://h.example.com/x", "webhook_type": "validating", "operations": []string{"CREATE"}}
	}
	with := func(kv ...any) map[string]any {
		m := valid()
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		body  any
		paths []string
	}{
		{"missing everything", map[string]any{}, []string{"/name", "/webhook_url", "/webhook_type", "/operations"}},
		{"bad name", with("name", "Not_A_Name"), []string{"/name"}},
		{"relative url", with("webhook_url", "/admit"), []string{"/webhook_url"}},
		{"ftp url", with("webhook_url", "ftp://h/x"), []string{"/webhook_url"}},
		{"url with user", with("webhook_url", "https://u:p@h/x"), []string{"/webhook_url"}},
		{"bad type", with("webhook_type", "auditing"), []string{"/webhook_type"}},
		{"empty operations", with("operations", []string{}), []string{"/operations"}},
		{"bad operation", with("operations", []string{"CREATE", "PATCH"}), []string{"/operations/1"}},
		{"duplicate operation", with("operations", []string{"CREATE", "CREATE"}), []string{"/operations/1"}},
		{"mutating delete", with("webhook_type", "mutating", "operations", []string{"UPDATE", "DELETE"}), []string{"/operations/1"}},
		{"timeout zero", with("timeout_seconds", 0), []string{"/timeout_seconds"}},
		{"timeout 31", with("timeout_seconds", 31), []string{"/timeout_seconds"}},
		{"timeout string", with("timeout_seconds", "10"), []string{"/timeout_seconds"}},
		{"bad policy", with("failure_policy", "fail"), []string{"/failure_policy"}},
		{"ordering fraction", with("ordering", 1.5), []string{"/ordering"}},
		{"ordering too big", with("ordering", 1<<40), []string{"/ordering"}},
		{"empty type name", with("resource_type_name", ""), []string{"/resource_type_name"}},
		{"bad type name", with("resource_type_name", "lower"), []string{"/resource_type_name"}},
		{"bad version", with("resource_type_version", "1.0"), []string{"/resource_type_version"}},
		{"ca not pem", with("ca_bundle", "hello"), []string{"/ca_bundle"}},
		{"ca garbage cert", with("ca_bundle", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), []string{"/ca_bundle"}},
		{"ca trailing junk", with("ca_bundle", ca+"junk"), []string{"/ca_bundle"}},
		{"ca with http", with("ca_bundle", ca, "webhook_url", "http://h/x"), []string{"/ca_bundle"}},
		{"server fields", with("id", 3, "resource_version", 9), []string{"/id", "/resource_version"}},
		{"unknown field", with("side_effects", "None"), []string{"/side_effects"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			do(t, http.MethodPost, "/api/v1/admission-webhooks", tc.body).expectError(t, http.StatusBadRequest, "", tc.paths...)
		})
	}
	do(t, http.MethodPost, "/api/v1/admission-webhooks", "[1]").expectError(t, http.StatusBadRequest, "invalid")
	// A valid CA bundle and the extremes of the ranges are accepted.
	ok := do(t, http.MethodPost, "/api/v1/admission-webhooks?dry_run=true", with("ca_bundle", ca, "timeout_seconds", 30, "ordering", -2147483648))
	ok.expect(t, http.StatusCreated)
}

func TestWebhookChainOrderAndPatches(t *testing.T) {
	createType(t, "HookOrder", "v1", hookSchema)
	var log callLog
	// Each mutating webhook appends its name to /spec/trail, so the stored
	// trail shows that each saw the previous one's result.
	mut := func(name string, more ...map[string]any) *httptest.Server {
		return hookServer(t, &log, name, func(r hookRequest) any {
			var spec map[string]any
			_ = json.Unmarshal(r.Resource.Spec, &spec)
			if _, ok := spec["trail"]; !ok {
				return patch(append([]map[string]any{op("add", "/spec/trail", []string{name})}, more...)...)
			}
			return patch(append([]map[string]any{op("add", "/spec/trail/-", name)}, more...)...)
		})
	}
	m1 := mut("m1", op("replace", "/spec/size", 5), op("add", "/labels/team", "storage"))
	m2 := mut("m2", op("add", "/spec/backup", map[string]any{"enabled": true}), op("add", "/annotations/note", "patched by m2"))
	m3 := hookServer(t, &log, "m3", func(r hookRequest) any {
		ops := []map[string]any{op("add", "/spec/trail/-", "m3")}
		if _, ok := r.Resource.Labels["drop"]; ok {
			ops = append(ops, map[string]any{"op": "remove", "path": "/labels/drop"})
		}
		return patch(ops...)
	})
	v := func(name string) *httptest.Server {
		return hookServer(t, &log, name, func(r hookRequest) any {
			var spec map[string]any
			_ = json.Unmarshal(r.Resource.Spec, &spec)
			trail, _ := spec["trail"].([]any)
			if len(trail) == 0 || len(trail)%3 != 0 || trail[len(trail)-1] != "m3" {
				return map[string]any{"allowed": false, "message": "validating webhooks must see the mutated resource"}
			}
			return allow
		})
	}
	v1, v2 := v("v1"), v("v2")
	// Registration order differs from call order: ordering, then name.
	register(t, hook("m3.order.example.com", "HookOrder", m3.URL, "mutating", "ordering", 10))
	register(t, hook("v2.order.example.com", "HookOrder", v2.URL, "validating", "ordering", 1))
	register(t, hook("m2.order.example.com", "HookOrder", m2.URL, "mutating", "ordering", -1))
	register(t, hook("v1.order.example.com", "HookOrder", v1.URL, "validating", "ordering", 1))
	register(t, hook("m1.order.example.com", "HookOrder", m1.URL, "mutating", "ordering", -1))

	r := createResource(t, map[string]any{
		"name": "ordered", "resource_type_name": "HookOrder", "resource_type_version": "v1",
		"spec": map[string]any{}, "labels": map[string]string{"drop": "me", "keep": "yes"},
	})
	if got := log.names(); !slices.Equal(got, []string{"m1", "m2", "m3", "v1", "v2"}) {
		t.Fatalf("call order %v", got)
	}
	// The first webhook saw the schema's defaults.
	first := log.get(0).req
	if first.Operation != "CREATE" || first.UID == "" || first.DryRun || first.OldResource != nil || !strings.Contains(string(first.Resource.Spec), `"tier":"basic"`) {
		t.Fatalf("first request %+v spec %s", first, first.Resource.Spec)
	}
	for i := 1; i < 5; i++ {
		if log.get(i).req.UID != first.UID {
			t.Fatalf("uid differs across the chain")
		}
	}
	spec := specOf(t, r)
	want := `map[backup:map[days:7 enabled:true] size:5 tier:basic trail:[m1 m2 m3]]`
	if got := fmt.Sprint(spec); got != want {
		t.Fatalf("stored spec %s, want %s (defaults are applied to patched objects too)", got, want)
	}
	if fmt.Sprint(r.Labels) != "map[keep:yes team:storage]" || r.Annotations["note"] != "patched by m2" {
		t.Fatalf("labels %v annotations %v", r.Labels, r.Annotations)
	}
	stored := decode[resource.Resource](t, do(t, http.MethodGet, "/api/v1/resources/"+strconv.FormatInt(r.ID, 10), nil).expect(t, http.StatusOK))
	if fmt.Sprint(specOf(t, stored)) != want || fmt.Sprint(stored.Labels) != "map[keep:yes team:storage]" {
		t.Fatalf("stored %s %v", stored.Spec, stored.Labels)
	}

	// UPDATE through PUT and PATCH: old_resource is the current state.
	log.reset()
	id := strconv.FormatInt(r.ID, 10)
	up := decode[resource.Resource](t, do(t, http.MethodPut, "/api/v1/resources/"+id, map[string]any{"spec": map[string]any{"size": 2}}).expect(t, http.StatusOK))
	upd := log.get(0).req
	if upd.Operation != "UPDATE" || upd.OldResource == nil || upd.OldResource.ResourceVersion != r.ResourceVersion || upd.Resource.ID != r.ID {
		t.Fatalf("update request %+v", upd)
	}
	if got := fmt.Sprint(specOf(t, up)["trail"]); got != "[m1 m2 m3]" || specOf(t, up)["size"] != float64(5) {
		t.Fatalf("updated spec %s", up.Spec)
	}
	log.reset()
	pr := mergePatch(t, "/api/v1/resources/"+id, `{"labels":{"keep":null},"spec":{"tier":"gold"}}`).expect(t, http.StatusOK)
	if got := log.names(); len(got) != 5 || log.get(0).req.Operation != "UPDATE" {
		t.Fatalf("patch calls %v", got)
	}
	if p := decode[resource.Resource](t, pr); specOf(t, p)["tier"] != "gold" || fmt.Sprint(p.Labels) != "map[team:storage]" {
		t.Fatalf("patched %s %v", p.Spec, p.Labels)
	}

	// dry_run reaches the webhooks and stores nothing.
	log.reset()
	do(t, http.MethodPost, "/api/v1/resources?dry_run=true", hookResource("HookOrder", "dry", map[string]any{})).expect(t, http.StatusCreated)
	if !log.get(0).req.DryRun || countResources(t, "HookOrder") != 1 {
		t.Fatalf("dry run: %+v, %d resources", log.get(0).req, countResources(t, "HookOrder"))
	}
}

func TestWebhookDenialStopsChain(t *testing.T) {
	createType(t, "HookDeny", "v1", hookSchema)
	var log callLog
	ok1 := hookServer(t, &log, "ok", func(hookRequest) any { return allow })
	no := hookServer(t, &log, "no", func(r hookRequest) any {
		if r.Resource.Labels["env"] == "prod" {
			return map[string]any{"allowed": false, "message": "prod resources need a ticket"}
		}
		return allow
	})
	never := hookServer(t, &log, "never", func(hookRequest) any { return allow })
	register(t, hook("a-ok.deny.example.com", "HookDeny", ok1.URL, "validating"))
	register(t, hook("b-no.deny.example.com", "HookDeny", no.URL, "validating"))
	register(t, hook("c-never.deny.example.com", "HookDeny", never.URL, "validating"))

	body := hookResource("HookDeny", "denied", map[string]any{})
	body["labels"] = map[string]string{"env": "prod"}
	unchanged(t, func() {
		e := do(t, http.MethodPost, "/api/v1/resources", body).expectError(t, http.StatusForbidden, "denied")
		if !strings.Contains(e.Detail, "b-no.deny.example.com") || !strings.Contains(e.Detail, "prod resources need a ticket") {
			t.Fatalf("detail %q", e.Detail)
		}
	})
	if got := log.names(); !slices.Equal(got, []string{"ok", "no"}) {
		t.Fatalf("calls %v: the chain must stop at the denial", got)
	}
	body["labels"] = map[string]string{"env": "dev"}
	createResource(t, body)

	// A mutating webhook can deny too.
	createType(t, "HookDenyMut", "v1", hookSchema)
	deny := hookServer(t, &log, "mdeny", func(hookRequest) any { return map[string]any{"allowed": false} })
	register(t, hook("mdeny.deny.example.com", "HookDenyMut", deny.URL, "mutating"))
	e := do(t, http.MethodPost, "/api/v1/resources", hookResource("HookDenyMut", "x", map[string]any{})).expectError(t, http.StatusForbidden, "denied")
	if !strings.Contains(e.Detail, "mdeny.deny.example.com") {
		t.Fatalf("detail %q", e.Detail)
	}
}

func TestWebhookFailurePolicies(t *testing.T) {
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()
	hang := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the hang-up
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		url     string
		reason  string
	}{
		{name: "timeout", handler: hang, reason: "timed out"},
		{name: "http 500", handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, reason: "answered HTTP status 500"},
		{name: "bad json", handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"allowed":tru`)) }, reason: "invalid response"},
		{name: "nonsense", handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"ok":true}`)) }, reason: "invalid response"},
		{name: "patch outside spec", handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"allowed":true,"patches":[{"op":"replace","path":"/status","value":"ready"}]}`))
		}, reason: "invalid response"},
		{name: "connection refused", url: refusedURL, reason: "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typeName := "HookFail" + strings.NewReplacer(" ", "", "-", "").Replace(tc.name)
			typeName = typeName[:8] + strings.ToUpper(typeName[8:9]) + typeName[9:]
			createType(t, typeName, "v1", hookSchema)
			url := tc.url
			if url == "" {
				srv := httptest.NewServer(tc.handler)
				t.Cleanup(srv.Close)
				url = srv.URL
			}
			var log callLog
			after := hookServer(t, &log, "after", func(hookRequest) any { return patch(op("add", "/labels/after", "ran")) })
			// The failing webhook is mutating, so that a patch can be
			// refused; a second mutating webhook shows the chain goes on.
			w := register(t, hook("failing.fail.example.com", typeName, url, "mutating", "timeout_seconds", 1))
			register(t, hook("zz-after.fail.example.com", typeName, after.URL, "mutating"))

			unchanged(t, func() {
				e := do(t, http.MethodPost, "/api/v1/resources", hookResource(typeName, "failed", map[string]any{})).
					expectError(t, http.StatusServiceUnavailable, "webhook_failed")
				if !strings.Contains(e.Detail, "failing.fail.example.com") || !strings.Contains(e.Detail, strings.ReplaceAll(tc.reason, `\"`, `"`)) {
					t.Fatalf("detail %q, want the webhook's name and %q", e.Detail, tc.reason)
				}
			})
			if len(log.names()) != 0 {
				t.Fatal("the chain went on after a failure under policy Fail")
			}

			m := map[string]any{}
			raw := do(t, http.MethodGet, "/api/v1/admission-webhooks/"+strconv.FormatInt(w.ID, 10), nil).Body
			_ = json.Unmarshal(raw, &m)
			m["failure_policy"] = "Ignore"
			do(t, http.MethodPut, "/api/v1/admission-webhooks/"+strconv.FormatInt(w.ID, 10), m).expect(t, http.StatusOK)
			waitWebhooks(t)
			r := createResource(t, hookResource(typeName, "ignored", map[string]any{}))
			if r.Labels["after"] != "ran" || len(r.Labels) != 1 || r.Status != "pending" {
				t.Fatalf("under Ignore the failing webhook is skipped and the chain goes on: %+v", r)
			}
		})
	}
}

func TestWebhookPatchMakesResourceInvalid(t *testing.T) {
	createType(t, "HookInvalid", "v1", hookSchema)
	var log callLog
	bad := hookServer(t, &log, "bad", func(r hookRequest) any {
		switch r.Resource.Name {
		case "spec":
			return patch(op("replace", "/spec/size", "huge"), op("add", "/spec/backup", map[string]any{"days": -1.5}))
		case "label":
			return patch(op("add", "/labels/bad key", "x"))
		case "spec-gone":
			return patch(map[string]any{"op": "remove", "path": "/spec"})
		}
		return allow
	})
	// Policy Ignore does not excuse an invalid patch: it is not a failure.
	register(t, hook("bad.invalid.example.com", "HookInvalid", bad.URL, "mutating", "failure_policy", "Ignore"))
	for _, tc := range []struct {
		name  string
		paths []string
	}{
		{"spec", []string{"/spec/size", "/spec/backup/days"}},
		{"label", []string{"/labels/bad key"}},
		{"spec-gone", []string{"/spec"}},
	} {
		unchanged(t, func() {
			e := do(t, http.MethodPost, "/api/v1/resources", hookResource("HookInvalid", tc.name, map[string]any{})).
				expectError(t, http.StatusBadRequest, "validation_failed", tc.paths...)
			if !strings.Contains(e.Detail, "bad.invalid.example.com") {
				t.Fatalf("%s: detail %q does not name the webhook", tc.name, e.Detail)
			}
		})
	}
	// A spec that is invalid before any webhook is refused without naming one.
	e := do(t, http.MethodPost, "/api/v1/resources", hookResource("HookInvalid", "ok", map[string]any{"size": 0})).
		expectError(t, http.StatusBadRequest, "validation_failed", "/spec/size")
	if strings.Contains(e.Detail, "webhook") || len(log.names()) != 3 {
		t.Fatalf("detail %q, calls %v", e.Detail, log.names())
	}
}

func TestWebhookDelete(t *testing.T) {
	createType(t, "HookDelete", "v1", hookSchema)
	var log callLog
	guard := hookServer(t, &log, "guard", func(r hookRequest) any {
		if r.Resource.Labels["protected"] == "true" {
			return map[string]any{"allowed": false, "message": "protected"}
		}
		return allow
	})
	mut := hookServer(t, &log, "mutating", func(hookRequest) any { return allow })
	register(t, hook("guard.delete.example.com", "HookDelete", guard.URL, "validating", "operations", []string{"DELETE"}))
	register(t, hook("mut.delete.example.com", "HookDelete", mut.URL, "mutating", "operations", []string{"UPDATE"}))

	body := hookResource("HookDelete", "keep", map[string]any{})
	body["labels"] = map[string]string{"protected": "true"}
	body["finalizers"] = []string{"example.com/cleanup"}
	r := createResource(t, body)
	if len(log.names()) != 0 {
		t.Fatalf("CREATE called %v", log.names())
	}
	path := "/api/v1/resources/" + strconv.FormatInt(r.ID, 10)
	unchanged(t, func() {
		e := do(t, http.MethodDelete, path, nil).expectError(t, http.StatusForbidden, "denied")
		if !strings.Contains(e.Detail, "guard.delete.example.com") || !strings.Contains(e.Detail, "protected") {
			t.Fatalf("detail %q", e.Detail)
		}
	})
	got := log.get(0).req
	if got.Operation != "DELETE" || got.OldResource != nil || got.Resource.ID != r.ID || got.Resource.ResourceVersion != r.ResourceVersion ||
		got.Resource.UID != r.UID || got.Resource.Status != "pending" || len(log.names()) != 1 {
		t.Fatalf("DELETE request %+v, calls %v", got, log.names())
	}
	// Authentication is off here: the webhook is told the anonymous user
	// asks.
	if got.User == nil || got.User.Username != "anonymous" || got.User.Groups == nil {
		t.Fatalf("DELETE request's user %+v", got.User)
	}
	// A stale precondition is refused before any webhook is asked.
	log.reset()
	do(t, http.MethodDelete, path+"?resource_version=1", nil).expectError(t, http.StatusConflict, "conflict")
	if len(log.names()) != 0 {
		t.Fatal("a stale delete was admitted")
	}

	mergePatch(t, path, `{"labels":{"protected":null}}`).expect(t, http.StatusOK)
	log.reset()
	d := decode[resource.Resource](t, do(t, http.MethodDelete, path, nil).expect(t, http.StatusAccepted))
	if d.Status != "deleting" || !slices.Equal(log.names(), []string{"guard"}) {
		t.Fatalf("deleted %+v, calls %v", d, log.names())
	}
	// Deleting what is already deleting does not ask again.
	do(t, http.MethodDelete, path, nil).expect(t, http.StatusAccepted)
	if len(log.names()) != 1 {
		t.Fatalf("calls %v", log.names())
	}
}

func TestWebhookScoping(t *testing.T) {
	createType(t, "HookScopeA", "v1", hookSchema)
	createType(t, "HookScopeA", "v7", hookSchema)
	createType(t, "HookScopeB", "v7", hookSchema)
	createType(t, "HookScopeB", "v1", hookSchema)
	var log callLog
	typeOnly := hookServer(t, &log, "typeOnly", func(hookRequest) any { return allow })
	versionOnly := hookServer(t, &log, "versionOnly", func(hookRequest) any { return allow })
	both := hookServer(t, &log, "both", func(hookRequest) any { return allow })
	updateOnly := hookServer(t, &log, "updateOnly", func(hookRequest) any { return allow })
	register(t, hook("type.scope.example.com", "HookScopeA", typeOnly.URL, "validating", "ordering", 1))
	register(t, hook("version.scope.example.com", nil, versionOnly.URL, "validating", "resource_type_version", "v7", "ordering", 2))
	register(t, hook("both.scope.example.com", "HookScopeB", both.URL, "validating", "resource_type_version", "v7", "ordering", 3))
	register(t, hook("update.scope.example.com", "HookScopeB", updateOnly.URL, "validating", "operations", []string{"UPDATE"}, "ordering", 4))

	for _, tc := range []struct {
		typ, version string
		want         []string
	}{
		{"HookScopeA", "v1", []string{"typeOnly"}},
		{"HookScopeA", "v7", []string{"typeOnly", "versionOnly"}},
		{"HookScopeB", "v7", []string{"versionOnly", "both"}},
		{"HookScopeB", "v1", []string{}},
	} {
		log.reset()
		b := hookResource(tc.typ, "s", map[string]any{})
		b["resource_type_version"] = tc.version
		do(t, http.MethodPost, "/api/v1/resources?dry_run=true", b).expect(t, http.StatusCreated)
		if got := log.names(); !slices.Equal(got, tc.want) {
			t.Errorf("%s/%s: called %v, want %v", tc.typ, tc.version, got, tc.want)
		}
	}
	r := createResource(t, hookResource("HookScopeB", "u", map[string]any{}))
	log.reset()
	do(t, http.MethodPut, "/api/v1/resources/"+strconv.FormatInt(r.ID, 10), map[string]any{"spec": map[string]any{"size": 3}}).expect(t, http.StatusOK)
	if got := log.names(); !slices.Equal(got, []string{"updateOnly"}) {
		t.Errorf("update called %v", got)
	}

	// A webhook with neither type nor version sees every type.
	var all callLog
	any1 := hookServer(t, &all, "any", func(hookRequest) any { return allow })
	register(t, map[string]any{"name": "any.scope.example.com", "webhook_url": any1.URL, "webhook_type": "validating", "operations": []string{"CREATE"}, "failure_policy": "Ignore"})
	for _, typ := range []string{"HookScopeA", "HookScopeB"} {
		do(t, http.MethodPost, "/api/v1/resources?dry_run=true", hookResource(typ, "s", map[string]any{})).expect(t, http.StatusCreated)
	}
	if got := all.names(); len(got) != 2 {
		t.Errorf("catch-all webhook called %v", got)
	}
}

func TestWebhookHTTPS(t *testing.T) {
	createType(t, "HookTLS", "v1", hookSchema)
	var log callLog
	srv := httptest.NewUnstartedServer(hookHandler(t, &log, "tls", func(hookRequest) any {
		return patch(op("add", "/annotations/tls", "yes"))
	}))
	srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // the refused handshake below
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))

	w := register(t, hook("tls.example.com", "HookTLS", srv.URL, "mutating", "ca_bundle", ca))
	for i := range 3 { // connections are reused: one TLS handshake serves all
		r := createResource(t, hookResource("HookTLS", fmt.Sprintf("tls-%d", i), map[string]any{}))
		if r.Annotations["tls"] != "yes" {
			t.Fatalf("annotations %v", r.Annotations)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 3 calls: they are not reused", n)
	}
	// Without the private CA the server's certificate is not trusted.
	m := map[string]any{}
	_ = json.Unmarshal(do(t, http.MethodGet, "/api/v1/admission-webhooks/"+strconv.FormatInt(w.ID, 10), nil).Body, &m)
	m["ca_bundle"] = nil
	do(t, http.MethodPut, "/api/v1/admission-webhooks/"+strconv.FormatInt(w.ID, 10), m).expect(t, http.StatusOK)
	waitWebhooks(t)
	e := do(t, http.MethodPost, "/api/v1/resources", hookResource("HookTLS", "untrusted", map[string]any{})).
		expectError(t, http.StatusServiceUnavailable, "webhook_failed")
	if !strings.Contains(e.Detail, "tls.example.com") || !strings.Contains(e.Detail, "TLS handshake failed") {
		t.Fatalf("detail %q", e.Detail)
	}
	if n := len(log.names()); n != 3 {
		t.Fatalf("%d calls reached the server, want 3", n)
	}
}

// TestWebhookClearsLabelsOnUpdate shows that metadata a mutating webhook
// changes on UPDATE is stored even when the request did not touch it.
func TestWebhookClearsLabelsOnUpdate(t *testing.T) {
	createType(t, "HookLabels", "v1", hookSchema)
	var log callLog
	clearer := hookServer(t, &log, "clear", func(hookRequest) any {
		return patch(op("replace", "/labels", map[string]string{}), op("replace", "/annotations", map[string]string{"cleared": "yes"}))
	})
	body := hookResource("HookLabels", "labelled", map[string]any{})
	body["labels"] = map[string]string{"a": "1", "b": "2"}
	r := createResource(t, body)
	register(t, hook("clear.labels.example.com", "HookLabels", clearer.URL, "mutating", "operations", []string{"UPDATE"}))
	up := decode[resource.Resource](t, do(t, http.MethodPut, "/api/v1/resources/"+strconv.FormatInt(r.ID, 10),
		map[string]any{"spec": map[string]any{"size": 2}}).expect(t, http.StatusOK))
	if len(up.Labels) != 0 || up.Annotations["cleared"] != "yes" {
		t.Fatalf("labels %v annotations %v", up.Labels, up.Annotations)
	}
}
