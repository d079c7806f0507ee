package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/testkit"
)

// A step is plain Go: test it on a Request built from a resource.
func TestGreetStep(t *testing.T) {
	req, err := sdk.NewRequest[Spec](&sdk.Resource{ID: 1, Name: "g", Type: Type, Generation: 1,
		Spec: json.RawMessage(`{"name":"world","style":"shout"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (greet{}).Do(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := req.Outputs()["message"]; got != "HELLO, WORLD!" {
		t.Fatalf("message %v", got)
	}
	if c, _ := req.Condition(ConditionGreeted); c.Status != conditions.True {
		t.Fatalf("condition %+v", c)
	}
}

// The whole reconciler against a real control plane (PostgreSQL, NATS,
// store, admission, gateway and scheduler, started by the test kit).
func TestGreetingLifecycle(t *testing.T) {
	env := testkit.Start(t)
	env.CreateType(t, Type.Name, Type.Version, Schema)
	env.RunReconciler(t, New(), Type)

	g := env.CreateResource(t, Type, "hello-world", map[string]any{"name": "world"})
	if !g.HasFinalizer(names.ReconcilerFinalizer("hello")) {
		t.Fatalf("finalizers %v", g.Finalizers)
	}
	g = env.WaitFor(t, g, testkit.Ready(), 20*time.Second)
	if string(g.Outputs) != `{"message":"Hello, world!"}` {
		t.Fatalf("outputs %s", g.Outputs)
	}

	g = env.UpdateSpec(t, g, map[string]any{"name": "world", "style": "shout"})
	g = env.WaitFor(t, g, testkit.All(testkit.Ready(), testkit.ObservedGeneration(2)), 20*time.Second)
	if string(g.Outputs) != `{"message":"HELLO, WORLD!"}` {
		t.Fatalf("outputs %s", g.Outputs)
	}

	env.Delete(t, g)
	env.WaitFor(t, g, testkit.Gone(), 20*time.Second)
}

// A Greeting that asks for a reply gets a child Greeting, written through
// the request's API client as the reconciler, owned by it (written again
// when deleted by hand: the reconciler Owns it), and gone with it.
func TestGreetingReply(t *testing.T) {
	env := testkit.Start(t)
	env.CreateType(t, Type.Name, Type.Version, Schema)
	env.RunReconciler(t, New(), Type)

	g := env.CreateResource(t, Type, "hi", map[string]any{"name": "world", "reply": true})
	g = env.WaitFor(t, g, testkit.Ready(), 20*time.Second)
	if string(g.Outputs) != `{"message":"Hello, world!","reply":"hi-reply"}` {
		t.Fatalf("outputs %s", g.Outputs)
	}
	child, err := env.API.GetResource(t.Context(), Type.Name, Type.Version, g.Namespace, ReplyName("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if len(child.OwnerReferences) != 1 || child.OwnerReferences[0].UID != g.UID || !child.OwnerReferences[0].Controller {
		t.Fatalf("owner references %+v", child.OwnerReferences)
	}
	c := env.WaitFor(t, &sdk.Resource{ID: child.ID}, testkit.Ready(), 20*time.Second)
	if string(c.Outputs) != `{"message":"Hello, hi!"}` {
		t.Fatalf("the reply's outputs %s", c.Outputs)
	}

	// The Greeting owns its reply: one deleted by hand is written again at
	// once, with no resync and no trigger.
	if _, err := env.API.DeleteResource(t.Context(), child.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		again, err := env.API.GetResource(t.Context(), Type.Name, Type.Version, g.Namespace, ReplyName("hi"))
		if err == nil && again.UID != child.UID {
			c = env.WaitFor(t, &sdk.Resource{ID: again.ID}, testkit.Ready(), 20*time.Second)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reply deleted by hand was not written again: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	env.Delete(t, g)
	env.WaitFor(t, g, testkit.Gone(), 20*time.Second)
	env.WaitFor(t, c, testkit.Gone(), 20*time.Second)
}
