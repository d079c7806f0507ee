package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/worker"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
)

// Dispatch publishes a work item for r as the scheduler would, but outside
// any scheduler epoch (scheduler_epoch 0 and no dispatch id, which the store
// accepts from tools and tests). Use it with WithoutScheduler to drive a
// reconciler step by step. Without a scheduler the kit made the work item
// stream when it started.
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

// ensureWorkQueue creates the work queue stream, as the scheduler does,
// unless it exists.
func ensureWorkQueue(nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, worker.WorkStreamConfig(worker.DefaultStream, subjects.ReconcileSettings()))
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("work queue %s: %w", worker.DefaultStream, err)
	}
	return nil
}
