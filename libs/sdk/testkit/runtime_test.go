package testkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/registry"
	"github.com/no8s/no8s/libs/sdk/testkit"
	"github.com/no8s/no8s/libs/sdk/worker"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// These tests drive the worker runtime against the real store and NATS,
// dispatching work items by hand (no scheduler), so that every attempt is
// deliberate.

const wait = 10 * time.Second

func start(t *testing.T, opts ...testkit.Option) (*testkit.Env, *probe) {
	t.Helper()
	env := testkit.Start(t, append([]testkit.Option{testkit.WithoutScheduler()}, opts...)...)
	env.CreateType(t, widget.Name, widget.Version, widgetSchema)
	return env, newProbe()
}

func TestLifecycle(t *testing.T) {
	env, p := start(t)
	env.RunReconciler(t, p.engine("widgets"), widget)
	w := env.CreateResource(t, widget, "w1", map[string]any{"size": 3})

	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	w = env.WaitFor(t, w, testkit.All(testkit.Ready(), testkit.ObservedGeneration(1)), wait)
	if !w.HasFinalizer(names.ReconcilerFinalizer("widgets")) {
		t.Fatalf("own finalizer missing: %v", w.Finalizers)
	}
	if ready, _ := w.Condition(conditions.Ready); !ready.IsTrue() || ready.ObservedGeneration != 1 {
		t.Fatalf("Ready %+v", ready)
	}
	if string(w.Outputs) != `{"size":3}` {
		t.Fatalf("outputs %s", w.Outputs)
	}
	h := env.History(t, w)
	if len(h) != 1 || !h[0].GetSuccess() || h[0].GetGeneration() != 1 || h[0].GetResourcesCreated() != 1 ||
		!strings.HasPrefix(h[0].GetHolder(), "widgets/") || h[0].GetReason() != reconcilev1.Reason_REASON_PENDING {
		t.Fatalf("history %v", h)
	}
	firstA, _ := w.Condition("A")

	// A new generation.
	w = env.UpdateSpec(t, w, map[string]any{"size": 5})
	if w.Generation != 2 {
		t.Fatalf("generation %d", w.Generation)
	}
	env.Dispatch(t, w, reconcilev1.Reason_REASON_GENERATION)
	w = env.WaitFor(t, w, testkit.All(testkit.Ready(), testkit.ObservedGeneration(2)), wait)
	a, _ := w.Condition("A")
	if a.ObservedGeneration != 2 || !a.LastTransitionTime.Equal(firstA.LastTransitionTime) {
		t.Fatalf("condition A %+v (first %+v): generation must move, transition time must not", a, firstA)
	}
	if string(w.Outputs) != `{"size":5}` {
		t.Fatalf("outputs %s", w.Outputs)
	}

	// Deletion: cleanup in reverse order, then the finalizer goes and the
	// resource is purged.
	env.Delete(t, w)
	env.Dispatch(t, w, reconcilev1.Reason_REASON_DELETION)
	env.WaitFor(t, w, testkit.Gone(), wait)
	wantCalls(t, p.callsFor("w1"), "do-a", "do-b", "post-b", "do-a", "do-b", "post-b", "cleanup-b", "cleanup-a", "post-b")
	settled(t, env, "widgets")
}

func TestExternalFinalizerKeepsDeleting(t *testing.T) {
	env, p := start(t)
	env.RunReconciler(t, p.engine("widgets"), widget)
	w := env.CreateResource(t, widget, "held", map[string]any{}, testkit.WithFinalizers("example.com/hold"))
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	env.WaitFor(t, w, testkit.Ready(), wait)
	env.Delete(t, w)
	env.Dispatch(t, w, reconcilev1.Reason_REASON_DELETION)
	w = env.WaitFor(t, w, testkit.Match("own finalizer removed", func(r *sdk.Resource) bool {
		return !r.HasFinalizer(names.ReconcilerFinalizer("widgets"))
	}), wait)
	if w.Status != client.StatusDeleting || w.Phase != conditions.PhaseTerminating {
		t.Fatalf("status %s phase %s", w.Status, w.Phase)
	}
	env.UpdateFinalizers(t, w, nil, []string{"example.com/hold"})
	env.WaitFor(t, w, testkit.Gone(), wait)
}

func TestOutcomes(t *testing.T) {
	env, p := start(t)
	run := env.RunReconciler(t, p.engine("widgets"), widget)
	for _, tc := range []struct {
		mode, message string
		reason        string
	}{
		{"fail", "step a: boom", conditions.ReasonReconcileError},
		{"terminal", "terminal: size 0 can never work", conditions.ReasonTerminalError},
		{"panic", "step a panicked: probe panicked", conditions.ReasonReconcileError},
	} {
		w := env.CreateResource(t, widget, tc.mode, map[string]any{"mode": tc.mode})
		env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
		w = env.WaitFor(t, w, testkit.Status(client.StatusFailed), wait)
		// A failed attempt observed its generation; the failure is
		// in Ready and the status.
		ready, _ := w.Condition(conditions.Ready)
		if w.Phase != conditions.PhaseProgressing || ready.Reason != tc.reason || !strings.Contains(w.StatusMessage, tc.message) || w.ObservedGeneration != w.Generation {
			t.Fatalf("%s: phase %s Ready %+v message %q observed %d", tc.mode, w.Phase, ready, w.StatusMessage, w.ObservedGeneration)
		}
		h := env.History(t, w)
		if len(h) != 1 || h[0].GetSuccess() || !strings.Contains(h[0].GetErrorMessage(), tc.message) {
			t.Fatalf("%s: history %v", tc.mode, h)
		}
		// Post ran even though a step failed.
		if calls := p.callsFor(tc.mode); !slices.Contains(calls, "post-b") || slices.Contains(calls, "do-b") {
			t.Fatalf("%s: calls %v", tc.mode, calls)
		}
	}
	w := env.CreateResource(t, widget, "requeue", map[string]any{"mode": "requeue"})
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	w = env.WaitFor(t, w, testkit.Match("requeue saved", func(r *sdk.Resource) bool { return !r.LastReconcileTime.IsZero() }), wait)
	if w.Status != client.StatusReconciling || w.Phase != conditions.PhaseProgressing {
		t.Fatalf("requeue: status %s phase %s", w.Status, w.Phase)
	}
	settled(t, env, "widgets")
	s := run.Worker.Stats()
	if s.Termed.Load() != 1 || s.Acked.Load() != 3 || s.Terminal.Load() != 1 || s.Failed.Load() != 2 || s.Requeued.Load() != 1 {
		t.Fatalf("acked %d termed %d (terminal %d failed %d requeued %d)", s.Acked.Load(), s.Termed.Load(), s.Terminal.Load(), s.Failed.Load(), s.Requeued.Load())
	}
}

func TestOperationAnnotations(t *testing.T) {
	env, p := start(t)
	env.RunReconciler(t, p.engine("widgets"), widget)

	// reconcile: one forced attempt, and the annotation is removed.
	w := env.CreateResource(t, widget, "forced", map[string]any{}, testkit.WithAnnotations(map[string]string{names.OperationAnnotation: names.OperationReconcile, "keep": "me"}))
	env.Dispatch(t, w, reconcilev1.Reason_REASON_ANNOTATION)
	w = env.WaitFor(t, w, testkit.Ready(), wait)
	if _, ok := w.Annotations[names.OperationAnnotation]; ok || w.Annotations["keep"] != "me" {
		t.Fatalf("annotations %v", w.Annotations)
	}
	p.mu.Lock()
	forced := p.forced["forced"]
	p.mu.Unlock()
	if forced != 1 {
		t.Fatalf("forced %d times", forced)
	}

	// ignore: no step runs.
	w = env.CreateResource(t, widget, "ignored", map[string]any{}, testkit.WithAnnotations(map[string]string{names.OperationAnnotation: names.OperationIgnore}))
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	settled(t, env, "widgets")
	if calls := p.callsFor("ignored"); len(calls) != 0 {
		t.Fatalf("steps ran on an ignored resource: %v", calls)
	}
	w, _ = env.Get(t, w)
	if w.Annotations[names.OperationAnnotation] != names.OperationIgnore || w.ObservedGeneration != 0 {
		t.Fatalf("ignored resource changed: %+v", w)
	}
}

func TestSecretReference(t *testing.T) {
	env, p := start(t)
	schema := `{"type":"object","properties":{"mode":{"type":"string"},"token":{"type":"object"}}}`
	typ := sdk.Type("Keyed", "v1")
	env.CreateType(t, typ.Name, typ.Version, schema)
	resolver := secret.Local{LookupEnv: func(k string) (string, bool) { return "s3cr3t-value", k == "KEYED_TOKEN" }}
	env.RunWorker(t, p.engine("keyed"), []sdk.TypeRef{typ}, worker.WithSecretResolver(resolver))

	ok := env.CreateResource(t, typ, "ok", map[string]any{"mode": "secret", "token": map[string]string{"env": "KEYED_TOKEN"}})
	env.Dispatch(t, ok, reconcilev1.Reason_REASON_PENDING)
	ok = env.WaitFor(t, ok, testkit.Ready(), wait)
	if string(ok.Outputs) != `{"size":0,"token_length":12}` {
		t.Fatalf("outputs %s", ok.Outputs)
	}
	missing := env.CreateResource(t, typ, "missing", map[string]any{"mode": "secret", "token": map[string]string{"file": "/nonexistent/token"}})
	env.Dispatch(t, missing, reconcilev1.Reason_REASON_PENDING)
	missing = env.WaitFor(t, missing, testkit.Status(client.StatusFailed), wait)
	if !strings.Contains(missing.StatusMessage, `secret reference file "/nonexistent/token"`) {
		t.Fatalf("message %q", missing.StatusMessage)
	}
	for _, r := range []*sdk.Resource{ok, missing} {
		r, _ = env.Get(t, r)
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "s3cr3t") {
			t.Fatalf("the secret leaked into the resource: %s", b)
		}
	}
}

func TestRegistration(t *testing.T) {
	env, p := start(t)
	first := env.RunWorker(t, p.engine("widgets"), []sdk.TypeRef{widget}, worker.WithReplicaID("r1"))
	second := env.RunWorker(t, p.engine("widgets"), []sdk.TypeRef{widget}, worker.WithReplicaID("r2"))

	// Another reconciler for the same type is refused.
	_, err := env.StartWorker(newProbe().engine("rival"), []sdk.TypeRef{widget})
	if !errors.Is(err, worker.ErrTypeTaken) || !strings.Contains(err.Error(), `"widgets"`) {
		t.Fatalf("rival registration: %v", err)
	}

	ctx := context.Background()
	kv := registryBucket(t, env)
	live, err := registry.Live(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].Name != "widgets" || len(live[0].Replicas) != 2 || !slices.Equal(live[0].Types, []sdk.TypeRef{widget}) {
		t.Fatalf("live %+v", live)
	}
	if first.Worker.Holder() != "widgets/r1" || second.Worker.Holder() != "widgets/r2" {
		t.Fatalf("holders %s %s", first.Worker.Holder(), second.Worker.Holder())
	}

	// The replicas share one consumer: items go to either.
	for i := range 6 {
		w := env.CreateResource(t, widget, "w"+string(rune('a'+i)), map[string]any{})
		env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
		env.WaitFor(t, w, testkit.Ready(), wait)
	}

	// Stopping one replica keeps the type; stopping the last frees it.
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	if h, _ := registry.Holder(ctx, kv, widget); h != "widgets" {
		t.Fatalf("holder after one replica stopped: %q", h)
	}
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	if h, _ := registry.Holder(ctx, kv, widget); h != "" {
		t.Fatalf("holder after every replica stopped: %q", h)
	}
	// Now the rival may serve it.
	rival, err := env.StartWorker(newProbe().engine("rival"), []sdk.TypeRef{widget})
	if err != nil {
		t.Fatalf("rival after the type was freed: %v", err)
	}
	_ = rival.Stop()
}

func TestRegistryHeartbeatExpiry(t *testing.T) {
	env, p := start(t)
	// A short heartbeat and TTL: the store made the bucket with the default
	// TTL (and remakes it when it is gone), so the test shortens it, as an
	// operator with a NATS admin's credentials could.
	js, err := jetstream.New(env.NATS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.UpdateKeyValue(context.Background(), jetstream.KeyValueConfig{
		Bucket: registry.Bucket, TTL: time.Second, Storage: jetstream.MemoryStorage,
	}); err != nil {
		t.Fatal(err)
	}
	env.RunWorker(t, p.engine("widgets"), []sdk.TypeRef{widget}, worker.WithHeartbeat(200*time.Millisecond, time.Second))
	kv := registryBucket(t, env)
	ctx := context.Background()
	// A replica that registers and then dies (never refreshes).
	gadget := sdk.Type("Gadget", "v1")
	if _, err := registry.Register(ctx, kv, registry.Replica{Name: "ghost", ID: "g1", Types: []sdk.TypeRef{gadget}}); err != nil {
		t.Fatal(err)
	}
	if h, _ := registry.Holder(ctx, kv, gadget); h != "ghost" {
		t.Fatalf("ghost holder %q", h)
	}
	time.Sleep(2 * time.Second)
	// The live one is still there thanks to its heartbeat; the dead one is gone.
	if h, _ := registry.Holder(ctx, kv, widget); h != "widgets" {
		t.Fatalf("holder %q while heartbeating", h)
	}
	if h, _ := registry.Holder(ctx, kv, gadget); h != "" {
		t.Fatalf("dead replica still holds %s: %q", gadget, h)
	}
	live, err := registry.Live(ctx, kv)
	if err != nil || len(live) != 1 || live[0].Name != "widgets" {
		t.Fatalf("live %+v %v", live, err)
	}
}

func TestProbes(t *testing.T) {
	env, p := start(t)
	r := env.RunReconciler(t, p.engine("widgets"), widget)
	srv := httptest.NewServer(r.Worker.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d %s", code, body)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"Widget"`) {
		t.Fatalf("readyz %d %s", code, body)
	}
	_ = r.Stop()
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("readyz after stop %d %s", code, body)
	}
	if code, _ := get("/healthz"); code != 503 {
		t.Fatalf("healthz after stop %d", code)
	}
}

func TestRunMainFromEnvironment(t *testing.T) {
	env, p := start(t)
	vars := map[string]string{
		worker.EnvNATSURL: env.NATSURL, worker.EnvStoreAddr: env.WorkerConn.Target(), identity.EnvDir: env.ReconcilerIdentity(t, "widgets", widget),
		worker.EnvHealthListen: "off", worker.EnvMaxConcurrency: "4", worker.EnvReplicaID: "main-1", worker.EnvLogLevel: "error",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.RunMain(ctx, p.engine("widgets"), []sdk.TypeRef{widget}, func(k string) string { return vars[k] })
	}()
	kv := registryBucketEventually(t, env)
	deadline := time.Now().Add(wait)
	for {
		if h, _ := registry.Holder(context.Background(), kv, widget); h == "widgets" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("RunMain did not register")
		}
		time.Sleep(20 * time.Millisecond)
	}
	w := env.CreateResource(t, widget, "w", map[string]any{})
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	w = env.WaitFor(t, w, testkit.Ready(), wait)
	if h := env.History(t, w); h[0].GetHolder() != "widgets/main-1" {
		t.Fatalf("holder %s", h[0].GetHolder())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	vars[worker.EnvMaxConcurrency] = "many"
	if err := worker.RunMain(context.Background(), p.engine("widgets"), []sdk.TypeRef{widget}, func(k string) string { return vars[k] }); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Fatalf("bad concurrency: %v", err)
	}
}
