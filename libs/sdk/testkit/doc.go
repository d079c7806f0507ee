// Package testkit boots a real no8s control plane for a test, as
// controller-runtime's envtest runs a real API server: the no8s binary
// (`no8s dev`: the embedded store, an embedded NATS server with JetStream,
// the store, admission, scheduler and api-gateway services) as a child
// process in a temporary directory, on free loopback ports. Reconcilers
// under test run in the test process with the real worker runtime.
//
//	func TestWidget(t *testing.T) {
//		env := testkit.Start(t)
//		env.CreateType(t, "Widget", "v1", `{"type":"object","properties":{"size":{"type":"integer"}}}`)
//		env.RunReconciler(t, myEngine, sdk.Type("Widget", "v1"))
//		w := env.CreateResource(t, sdk.Type("Widget", "v1"), "w1", map[string]any{"size": 3})
//		env.WaitFor(t, w, testkit.Ready(), 10*time.Second)
//		env.Delete(t, w)
//		env.WaitFor(t, w, testkit.Gone(), 10*time.Second)
//	}
//
// The control plane runs with identities on (no8s dev's default). The kit
// issues each worker it runs the credential of its reconciler, with exactly
// the types it serves, by running the same binary (`no8s identity issue`),
// and connects the worker to the store with it; ReconcilerIdentity and
// DialWorkers give a test such credentials or connections. The API client
// the worker gives its attempts (Request.API) calls the gateway's service
// listener as that reconciler, as a deployed worker's does with
// NO8S_IDENTITY_DIR.
//
// Reconcile runs one attempt of a reconciler in memory instead, with no
// control plane: a unit test of the whole engine (steps, conditions, Ready,
// phase, finalizers) that returns what the attempt would have saved.
//
// Everything is torn down when the test ends (t.Cleanup). The binary is
// $NO8S_BIN, else no8s on PATH (`make build` writes bin/no8s).
// WithDatabaseURL runs the store on PostgreSQL instead of the embedded
// store. NO8S_TESTKIT_LOG=1 prints the control plane's log.
//
// The test kit is its own module, and neither it nor the SDK depends on the
// control plane's code: a reconciler module that uses it with GOWORK=off
// needs replace directives only for the no8s library modules (libs/sdk,
// libs/sdk/testkit, libs/api, libs/client, libs/platform, proto), since
// replace directives of dependencies do not apply.
package testkit
