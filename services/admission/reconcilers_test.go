package admission

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/testenv"
)

// The live-reconciler rule's cache: no bucket → refused; a claim written a
// moment ago → admitted (read through when the watch has not seen it yet);
// a claim the bucket forgot by max age → refused again, although the watch
// was never told.
func TestLiveTypes(t *testing.T) {
	js, err := jetstream.New(testenv.Connect(t, testenv.NATS(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	l := newLiveTypes(js, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { defer close(done); l.run(ctx) }()
	defer func() { cancel(); <-done }()

	refused := func(name string) {
		t.Helper()
		_, err := l.requireReconciler(ctx, name, "v1")
		if pe := problem.As(err); pe == nil || pe.Code != problem.CodeNoReconciler || pe.Kind != problem.Invalid {
			t.Fatalf("%s/v1: %v, want no_reconciler", name, err)
		}
	}
	refused("Widget") // no bucket at all

	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.RegistryBucket, TTL: 2 * time.Second, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	refused("Widget")
	if _, err := kv.PutString(ctx, "type.Widget.v1", "widgets"); err != nil {
		t.Fatal(err)
	}
	fin, err := l.requireReconciler(ctx, "Widget", "v1") // at once, watch or not
	if err != nil || fmt.Sprint(fin) != "[reconciler.no8s.io/widgets]" {
		t.Fatalf("finalizers %q, %v", fin, err)
	}
	refused("Gadget")
	// A reconciler that declares finalizers of its own (its action
	// plugins'): new resources carry them too.
	if _, err := kv.Put(ctx, "type.Gadget.v1", subjects.TypeClaim{Reconciler: "gadgets", Finalizers: []string{"github_actions"}}.Encode()); err != nil {
		t.Fatal(err)
	}
	fin, err = l.requireReconciler(ctx, "Gadget", "v1")
	if err != nil || fmt.Sprint(fin) != "[reconciler.no8s.io/gadgets github_actions]" {
		t.Fatalf("finalizers %q, %v", fin, err)
	}

	// Heartbeats keep it live; without them it is gone after the max age.
	for range 3 {
		time.Sleep(time.Second)
		if _, err := kv.PutString(ctx, "type.Widget.v1", "widgets"); err != nil {
			t.Fatal(err)
		}
		if _, err := l.requireReconciler(ctx, "Widget", "v1"); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := l.requireReconciler(ctx, "Widget", "v1"); err != nil {
			refused("Widget")
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a reconciler that stopped heartbeating is still admitted")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A graceful stop deletes the key: refused at once.
	if _, err := kv.PutString(ctx, "type.Widget.v1", "widgets"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.requireReconciler(ctx, "Widget", "v1"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "type.Widget.v1"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, err := l.requireReconciler(ctx, "Widget", "v1"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a deleted claim is still admitted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
