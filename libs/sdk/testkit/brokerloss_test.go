package testkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/registry"
	"github.com/no8s/no8s/libs/sdk/testkit"
	"github.com/no8s/no8s/libs/sdk/worker"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// What a broker that lost its storage does to a worker, one object at a
// time: the registry bucket and the work stream vanish; the worker
// recreates the bucket and registers again, and once the work stream is
// back (the scheduler's to make) its consumer, and goes on consuming.
func TestWorkerRecreatesLostBrokerObjects(t *testing.T) {
	env, p := start(t)
	env.RunWorker(t, p.engine("widgets"), []sdk.TypeRef{widget}, worker.WithHeartbeat(200*time.Millisecond, 2*time.Second))
	js, err := jetstream.New(env.NATS)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	registryBucketEventually(t, env)

	if err := js.DeleteKeyValue(ctx, registry.Bucket); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the registration renewed in a recreated bucket", func() bool {
		kv, err := js.KeyValue(ctx, registry.Bucket)
		if err != nil {
			return false
		}
		h, _ := registry.Holder(ctx, kv, widget)
		return h == "widgets"
	})

	if err := js.DeleteStream(ctx, worker.DefaultStream); err != nil {
		t.Fatal(err)
	}
	// The work stream is the scheduler's to make again (a worker with a
	// NATS user may not); this kit runs none, so the test does.
	if _, err := js.CreateStream(ctx, worker.WorkStreamConfig(worker.DefaultStream, subjects.ReconcileSettings())); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the consumer recreated", func() bool {
		_, err := js.Consumer(ctx, worker.DefaultStream, "widgets")
		return err == nil
	})
	w := env.CreateResource(t, widget, "after-loss", map[string]any{})
	env.Dispatch(t, w, reconcilev1.Reason_REASON_PENDING)
	env.WaitFor(t, w, testkit.Ready(), wait)
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", wait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
