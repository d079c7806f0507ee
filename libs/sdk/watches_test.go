package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

type refSpec struct {
	SecretRef struct {
		Name string `json:"name"`
	} `json:"secretRef"`
	Peers []any `json:"peers"` // names, and a number the path skips
}

var secretType = sdk.Type("Secret", "v1")

// reconcileRefs runs one attempt of an engine declared by declare on a
// resource of spec raw, whose only step is do, and returns what it saved.
func reconcileRefs(t *testing.T, raw string, declare func(*sdk.Engine[refSpec]), do sdk.Func[refSpec]) *wire.Completion {
	t.Helper()
	var calls []string
	rec := &recorder{calls: &calls}
	e := sdk.New("refs", sdk.Step[refSpec](do))
	declare(e)
	res := resource()
	res.Namespace, res.Spec = "team-a", json.RawMessage(raw)
	res.Finalizers = []string{e.Finalizer()}
	e.Reconcile(context.Background(), &wire.Attempt{ID: "r1", Resource: res, Client: rec})
	if len(rec.completed) != 1 {
		t.Fatalf("saves: %d", len(rec.completed))
	}
	return rec.completed[0]
}

func done(context.Context, *sdk.Request[refSpec]) (sdk.Result, error) { return sdk.Result{}, nil }

func dep(name string, wait bool) wire.Dependency {
	return wire.Dependency{Type: secretType, Namespace: "team-a", Name: name, Wait: wait}
}

// Watches by field path reports the names found in the spec (a name, a
// list of names), in the resource's namespace, each once; WatchesFunc
// adds its own; a path that names nothing reports nothing.
func TestWatchesReportsTheNamedResources(t *testing.T) {
	c := reconcileRefs(t, `{"secretRef":{"name":"db"},"peers":["a","db",7,"b"]}`, func(e *sdk.Engine[refSpec]) {
		e.Watches(secretType, "spec.secretRef.name").Watches(secretType, "spec.peers").Watches(secretType, "spec.missing.name").
			WatchesFunc(sdk.Type("Widget", "v1"), func(req *sdk.Request[refSpec]) []string { return []string{"w-" + req.Spec.SecretRef.Name} })
	}, done)
	want := []wire.Dependency{dep("db", false), dep("a", false), dep("b", false), {Type: sdk.Type("Widget", "v1"), Namespace: "team-a", Name: "w-db"}}
	if !slices.Equal(c.Dependencies, want) {
		t.Fatalf("dependencies\n got %+v\nwant %+v", c.Dependencies, want)
	}
	if c.Outcome != lifecycle.OutcomeSuccess {
		t.Fatalf("outcome %v", c.Outcome)
	}
	if c := reconcileRefs(t, `{}`, func(e *sdk.Engine[refSpec]) { e.Watches(secretType, "spec.secretRef.name") }, done); len(c.Dependencies) != 0 {
		t.Fatalf("an empty spec: %+v", c.Dependencies)
	}
}

// WaitFor ends the attempt terminal, Ready False with the reason given
// (WaitingForDependency when none), and reports what it waits for as a
// dependency to wait for, merged with the same resource watched.
func TestWaitForIsATerminalFailureThatWaits(t *testing.T) {
	c := reconcileRefs(t, `{"secretRef":{"name":"db"}}`, func(e *sdk.Engine[refSpec]) { e.Watches(secretType, "spec.secretRef.name") },
		func(_ context.Context, req *sdk.Request[refSpec]) (sdk.Result, error) {
			return sdk.Result{}, fmt.Errorf("connect: %w", req.WaitFor(secretType, req.Spec.SecretRef.Name, "SecretNotFound"))
		})
	if c.Outcome != lifecycle.OutcomeTerminal || !slices.Equal(c.Dependencies, []wire.Dependency{dep("db", true)}) {
		t.Fatalf("outcome %v dependencies %+v", c.Outcome, c.Dependencies)
	}
	ready, _ := conditions.Find(c.Conditions, conditions.Ready)
	if ready.Status != conditions.False || ready.Reason != "SecretNotFound" || !strings.HasSuffix(ready.Message, "connect: terminal: waiting for Secret/v1 team-a/db") {
		t.Fatalf("Ready %+v", ready)
	}
	c = reconcileRefs(t, `{}`, func(*sdk.Engine[refSpec]) {}, func(_ context.Context, req *sdk.Request[refSpec]) (sdk.Result, error) {
		return sdk.Result{}, sdk.Degraded(req.WaitFor(secretType, "tls", ""))
	})
	ready, _ = conditions.Find(c.Conditions, conditions.Ready)
	if c.Outcome != lifecycle.OutcomeTerminal || !c.Degraded || ready.Reason != "WaitingForDependency" || !slices.Equal(c.Dependencies, []wire.Dependency{dep("tls", true)}) {
		t.Fatalf("degraded wait: outcome %v degraded %v Ready %+v dependencies %+v", c.Outcome, c.Degraded, ready, c.Dependencies)
	}
	// A WaitFor whose error the step does not return waits for nothing.
	c = reconcileRefs(t, `{}`, func(*sdk.Engine[refSpec]) {}, func(_ context.Context, req *sdk.Request[refSpec]) (sdk.Result, error) {
		_ = req.WaitFor(secretType, "tls", "")
		return sdk.Result{}, nil
	})
	if c.Outcome != lifecycle.OutcomeSuccess || len(c.Dependencies) != 0 {
		t.Fatalf("a dropped WaitFor: outcome %v dependencies %+v", c.Outcome, c.Dependencies)
	}
}

// An attempt reports at most wire.MaxDependencies.
func TestDependenciesAreBounded(t *testing.T) {
	var peers []string
	for i := range wire.MaxDependencies + 10 {
		peers = append(peers, fmt.Sprintf("p%d", i))
	}
	raw, _ := json.Marshal(map[string]any{"peers": peers})
	c := reconcileRefs(t, string(raw), func(e *sdk.Engine[refSpec]) { e.Watches(secretType, "spec.peers") }, done)
	if len(c.Dependencies) != wire.MaxDependencies {
		t.Fatalf("%d dependencies", len(c.Dependencies))
	}
}

// Watches refuses a path outside the spec at declaration.
func TestWatchesRefusesABadPath(t *testing.T) {
	for _, p := range []string{"", "spec", "metadata.name", "spec..name", "spec.name.", "secretRef.name"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Watches(%q) did not panic", p)
				}
			}()
			sdk.New[refSpec]("refs").Watches(secretType, p)
		}()
	}
}
