// Package testkit boots a real no8s control plane inside a test, as
// controller-runtime's envtest boots a real API server: a fresh PostgreSQL
// database on the local server, an embedded NATS server with JetStream, the
// store, admission and api-gateway services (and the scheduler) talking
// over real gRPC on loopback ports. Reconcilers under test run in the same
// process with the real worker runtime.
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
// Everything is torn down when the test ends (t.Cleanup). PostgreSQL is
// reached through NO8S_TEST_DATABASE_URL (an admin connection; default
// postgres://postgres@127.0.0.1:5432/postgres). NO8S_TESTKIT_LOG=1 prints
// the services' logs.
//
// The test kit is its own module so that the SDK itself stays free of the
// services' dependencies. A reconciler module that uses it with GOWORK=off
// needs replace directives for every no8s module (sdk, testkit, proto,
// services, migrations), since replace directives of dependencies do not
// apply.
package testkit
