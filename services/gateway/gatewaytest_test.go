package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/no8s/no8s/services/internal/authn"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/worker"

	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsembed"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/rbac"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/reconcilerworker/noop"
	"github.com/no8s/no8s/services/store"
)

// stack is the real control plane behind the gateway under test: a fresh
// PostgreSQL database, an embedded JetStream, the store and admission
// services over real gRPC, and the gateway on an httptest server. One stack
// serves the whole test package. createType starts the noop reconciler (the
// real SDK worker runtime, in-process) for each type, so that resources can
// be created (the live-reconciler rule). No scheduler runs: nothing is
// reconciled behind a test's back; a test that needs a reconcile (the
// cleanup that lets a deleted resource go) dispatches one with reconcileNow.
type stack struct {
	gateway   *Service
	server    *httptest.Server
	store     storev1.StoreServiceClient
	admission admissionv1.AdmissionServiceClient
	conns     map[string]*grpc.ClientConn
	// js reaches the stack's event stream (watch tests).
	js jetstream.JetStream
	// admissionSvc tells which webhook set admission has in force.
	admissionSvc *admission.Service
	// nc and workerConn (the store's worker listener) are what the
	// reconcilers connect with; storeConn is the store's main listener.
	nc         *nats.Conn
	storeConn  *grpc.ClientConn
	workerConn *grpc.ClientConn
	log        *slog.Logger
	// ctx ends when the stack stops; workers run on it.
	ctx     context.Context
	wg      *sync.WaitGroup
	mu      sync.Mutex
	workers map[string]*worker.Worker
}

var env *stack

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	st, stop, err := startStack()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway tests: start stack:", err)
		return 1
	}
	env = st
	code := m.Run()
	stop()
	return code
}

func startStack() (*stack, func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	var cleanups []func()
	stop := func() {
		cancel()
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) (*stack, func(), error) {
		stop()
		return nil, nil, err
	}
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("NO8S_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	dbURL, drop, err := testenv.CreateDatabase(ctx, "gateway")
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, drop)
	dir, err := os.MkdirTemp("", "no8s-gateway-nats-")
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = os.RemoveAll(dir) })
	ns, err := natsembed.Start(dir, -1, nil)
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, nc.Close)

	var wg sync.WaitGroup
	serve := func(name string, fn func(context.Context, net.Listener) error) (string, error) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx, lis); err != nil {
				fmt.Fprintf(os.Stderr, "%s stopped: %v\n", name, err)
			}
		}()
		return lis.Addr().String(), nil
	}
	// Services stop (ctx canceled) before the database and NATS go.
	cleanups = append(cleanups, func() { cancel(); wg.Wait() })

	scfg := store.DefaultConfig()
	scfg.DatabaseURL = dbURL
	scfg.MaxConns = 8
	scfg.ShutdownGrace = 2 * time.Second
	storeSvc, err := store.New(ctx, scfg, nc, log.With("service", "store"))
	if err != nil {
		return fail(err)
	}
	workerLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	storeAddr, err := serve("store", func(ctx context.Context, lis net.Listener) error { return storeSvc.Serve(ctx, lis, workerLis) })
	if err != nil {
		return fail(err)
	}
	workerConn, err := grpcserver.Dial(workerLis.Addr().String())
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = workerConn.Close() })
	storeConn, err := grpcserver.Dial(storeAddr)
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = storeConn.Close() })
	storeClient := storev1.NewStoreServiceClient(storeConn)

	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	acfg := admission.DefaultConfig()
	acfg.ShutdownGrace = 2 * time.Second
	acfg.WebhookRefresh = 20 * time.Millisecond
	acfg.JetStream = js
	acfg.Outbound = outbound.DevPolicy() // the webhooks under test listen on loopback
	// The secret references that TestHttpSourceAdmission and
	// TestTenantTypesAdmission admit (nothing is granted without grants).
	if acfg.Grants, err = grants.New(
		grants.Grant{Secret: secret.Env("NO8S_REGISTRY_TOKEN"), Use: grants.UseHTTPHeader, Namespaces: []string{"default"}, Destinations: []string{"http://127.0.0.1:9"}},
		grants.Grant{Secret: secret.Env("REGISTRY_PW"), Use: grants.UseDatasource, Namespaces: []string{"default"}, Destinations: []string{"127.0.0.1:3306"}},
		// TestCredentialGrantBoundToSubjects: service account dba's alone.
		grants.Grant{Secret: secret.Env("BOUND_PW"), Use: grants.UseDatasource, Namespaces: []string{"default"}, Destinations: []string{"127.0.0.1:3306"},
			Subjects: []rbac.Subject{{Kind: rbac.SubjectServiceAccount, Name: "dba"}}},
	); err != nil {
		return fail(err)
	}
	admissionSvc := admission.New(acfg, storeClient, log.With("service", "admission"))
	admissionAddr, err := serve("admission", admissionSvc.Serve)
	if err != nil {
		return fail(err)
	}
	admissionConn, err := grpcserver.Dial(admissionAddr)
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = admissionConn.Close() })
	admissionClient := admissionv1.NewAdmissionServiceClient(admissionConn)

	conns := map[string]*grpc.ClientConn{"store": storeConn, "worker": workerConn, "admission": admissionConn}
	cfg := testConfig()
	cfg.Health.Ready = []health.Check{health.GRPC("store", storeConn), health.GRPC("admission", admissionConn), health.NATS(nc)}
	cfg.JetStream, cfg.Watch = js, watchTestConfig
	cfg.Reconcile = reconcilev1.NewReconcileServiceClient(storeConn)
	cfg.Outbound = outbound.DevPolicy()
	cfg.Input.Config = inputTestConfig
	gw := New(cfg, storeClient, admissionClient, log.With("service", "gateway"))
	ectx, stopEvents := context.WithCancel(ctx)
	wg.Add(2)
	go func() { defer wg.Done(); _ = gw.RunEvents(ectx) }()
	go func() { defer wg.Done(); _ = gw.RunInput(ectx) }()
	srv := httptest.NewServer(gw.Handler())
	cleanups = append(cleanups, srv.Close, stopEvents) // watches end before the server closes
	return &stack{gateway: gw, server: srv, store: storeClient, admission: admissionClient, conns: conns, admissionSvc: admissionSvc, js: js,
		nc: nc, storeConn: storeConn, workerConn: workerConn, log: log, ctx: ctx, wg: &wg, workers: map[string]*worker.Worker{}}, stop, nil
}

// serveType runs the noop reconciler for name/version (once per type, for
// the rest of the package) and waits until it is registered.
func serveType(t testing.TB, name, version string) {
	t.Helper()
	key := name + "/" + version
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.workers[key] != nil {
		return
	}
	rname := strings.ToLower("noop-" + name + "-" + version)
	if len(rname) > 63 {
		rname = rname[:63]
	}
	startWorker(t, name, version, noop.New(rname))
}

// startWorker runs rec as the reconciler of name/version for the rest of the
// package and waits until it is registered. The caller holds env.mu.
func startWorker(t testing.TB, name, version string, rec worker.Reconciler) {
	t.Helper()
	key := name + "/" + version
	rname := rec.Name()
	w, err := worker.New(rec, worker.Config{Types: []sdk.TypeRef{sdk.Type(name, version)}, NATS: env.nc, Store: env.workerConn},
		worker.WithReplicaID("gateway-test"), worker.WithShutdownGrace(time.Second, time.Second), worker.WithFetchWait(time.Second),
		worker.WithLogger(env.log.With("reconciler", rname)))
	if err != nil {
		t.Fatal(err)
	}
	env.wg.Add(1)
	go func() {
		defer env.wg.Done()
		if err := w.Run(env.ctx); err != nil {
			fmt.Fprintf(os.Stderr, "reconciler %s: %v\n", rname, err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !w.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("reconciler %s did not become ready", rname)
		}
		time.Sleep(5 * time.Millisecond)
	}
	env.workers[key] = w
}

// reconcileNow dispatches one work item for a resource, as the scheduler
// would (outside any scheduler epoch), to the type's noop reconciler.
func reconcileNow(t testing.TB, r resource.Resource) {
	t.Helper()
	data, err := proto.Marshal(&reconcilev1.WorkItem{ResourceId: r.ID, ResourceUid: r.UID, ResourceTypeName: r.ResourceTypeName,
		ResourceTypeVersion: r.ResourceTypeVersion, Reason: reconcilev1.Reason_REASON_MANUAL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := env.js.Publish(ctx, worker.Subject(sdk.Type(r.ResourceTypeName, r.ResourceTypeVersion)), data); err != nil {
		t.Fatalf("dispatch %d: %v", r.ID, err)
	}
}

// cleanupAndWaitGone dispatches the deletion reconcile of a deleting
// resource and waits until it is purged.
func cleanupAndWaitGone(t testing.TB, r resource.Resource) {
	t.Helper()
	reconcileNow(t, r)
	path := fmt.Sprintf("/api/v1/resources/%d", r.ID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := do(t, http.MethodGet, path, nil)
		if got.Status == http.StatusNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("resource %d not gone after its cleanup: %d %s", r.ID, got.Status, got.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// response is one HTTP answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// errorDoc is the JSON error body.
type errorDoc struct {
	Detail    string               `json:"detail"`
	Code      string               `json:"code"`
	Errors    []problem.FieldError `json:"errors"`
	RequestID string               `json:"request_id"`
}

// do sends a request to the gateway. body is sent as is when it is a string
// or []byte, as JSON otherwise; headers are name, value pairs (a body gets
// Content-Type application/json unless one is given).
func do(t testing.TB, method, path string, body any, headers ...string) response {
	t.Helper()
	r, err := send(method, path, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// doNoFatal is do for other goroutines: a transport error is status 0.
func doNoFatal(method, path string, body any, headers ...string) response {
	r, err := send(method, path, body, headers...)
	if err != nil {
		return response{Body: []byte(err.Error())}
	}
	return r
}

func send(method, path string, body any, headers ...string) (response, error) {
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
			return response{}, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, env.server.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := env.server.Client().Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// expect fails unless r has the status; it returns r for chaining.
func (r response) expect(t testing.TB, status int) response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body: %s", r.Status, status, r.Body)
	}
	return r
}

func decode[T any](t testing.TB, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, r.Body, err)
	}
	return v
}

// expectError checks status, code and that every wanted path is among the
// error's field paths; it returns the error document.
func (r response) expectError(t testing.TB, status int, code string, paths ...string) errorDoc {
	t.Helper()
	r.expect(t, status)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q, want application/json", ct)
	}
	e := decode[errorDoc](t, r)
	if e.Detail == "" {
		t.Errorf("error without detail: %s", r.Body)
	}
	if code != "" && e.Code != code {
		t.Errorf("code %q, want %q; body: %s", e.Code, code, r.Body)
	}
	got := make([]string, 0, len(e.Errors))
	for _, f := range e.Errors {
		got = append(got, f.Path)
	}
	for _, p := range paths {
		if !slices.Contains(got, p) {
			t.Errorf("error paths %q lack %q; body: %s", got, p, r.Body)
		}
	}
	return e
}

// snapshot is everything the store holds, read through the store client.
func snapshot(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	types, err := env.store.ListResourceTypes(ctx, &storev1.ListResourceTypesRequest{})
	if err != nil {
		t.Fatalf("list types: %v", err)
	}
	var all []*storev1.Resource
	tok := ""
	for {
		page, err := env.store.ListResources(ctx, &storev1.ListResourcesRequest{Limit: 1000, ContinueToken: tok})
		if err != nil {
			t.Fatalf("list resources: %v", err)
		}
		all = append(all, page.GetResources()...)
		if tok = page.GetContinueToken(); tok == "" {
			break
		}
	}
	var b strings.Builder
	for _, ty := range types.GetResourceTypes() {
		fmt.Fprintf(&b, "type %d %s/%s rv=%d\n", ty.GetId(), ty.GetName(), ty.GetVersion(), ty.GetResourceVersion())
	}
	for _, r := range all {
		fmt.Fprintf(&b, "resource %d %s rv=%d gen=%d fin=%v\n", r.GetId(), r.GetName(), r.GetResourceVersion(), r.GetGeneration(), r.GetFinalizers())
	}
	return b.String()
}

// unchanged runs fn and fails if the store's content changed meanwhile.
func unchanged(t *testing.T, fn func()) {
	t.Helper()
	before := snapshot(t)
	fn()
	if after := snapshot(t); after != before {
		t.Fatalf("the store changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// countResources counts the resources of a type through the store client.
func countResources(t testing.TB, typeName string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := env.store.ListResources(ctx, &storev1.ListResourcesRequest{ResourceTypeName: typeName, Limit: 1000})
	if err != nil {
		t.Fatalf("list resources: %v", err)
	}
	return len(resp.GetResources())
}

// createType registers a resource type, starts the noop reconciler for it,
// and returns it.
func createType(t testing.TB, name, version, schema string) resource.Type {
	t.Helper()
	typ := createTypeUnserved(t, name, version, schema)
	serveType(t, name, version)
	return typ
}

// createTypeUnserved registers a resource type that no reconciler serves.
func createTypeUnserved(t testing.TB, name, version, schema string) resource.Type {
	t.Helper()
	r := do(t, http.MethodPost, "/api/v1/resource-types", map[string]any{
		"name": name, "version": version, "description": name + " " + version, "schema": json.RawMessage(schema),
	}).expect(t, http.StatusCreated)
	return decode[resource.Type](t, r)
}

// createResource creates a resource and returns its document.
func createResource(t testing.TB, body map[string]any) resource.Resource {
	t.Helper()
	r := do(t, http.MethodPost, "/api/v1/resources", body).expect(t, http.StatusCreated)
	return decode[resource.Resource](t, r)
}

// specOf decodes a resource's spec.
func specOf(t testing.TB, r resource.Resource) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Spec, &m); err != nil {
		t.Fatalf("decode spec %s: %v", r.Spec, err)
	}
	return m
}

// testConfig is DefaultConfig with authentication off: the tests of
// everything but authentication (auth_test.go) call the API anonymously.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Auth.Mode = authn.ModeNone
	// Every test of the package calls the shared gateway from one address,
	// as one identity, faster than a client would: no rate limit (its tests,
	// limits_test.go, set their own).
	cfg.RateLimit = 0
	return cfg
}
