package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/worker"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// Dispatch publishes a work item for r as the scheduler would, but outside
// any scheduler epoch (scheduler_epoch 0 and no dispatch id, which the store
// accepts from tools and tests). Use it with WithoutScheduler to drive a
// reconciler step by step. The work item stream must exist (a running
// worker creates it).
func (e *Env) Dispatch(t testing.TB, r *sdk.Resource, reason reconcilev1.Reason) {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	data, err := proto.Marshal(&reconcilev1.WorkItem{
		ResourceId: r.ID, ResourceUid: r.UID, ResourceTypeName: r.Type.Name, ResourceTypeVersion: r.Type.Version,
		Reason: reason, DispatchedAt: timestamppb.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(e.NATS)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, worker.Subject(r.Type), data, jetstream.WithMsgID("testkit-"+hex.EncodeToString(b))); err != nil {
		t.Fatalf("dispatch %s: %v", r, err)
	}
}
