package testkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/testkit"
)

// TestNamespaces runs a reconciler across namespaces on the real control
// plane (its scheduler included): one name in two namespaces is two
// resources, each reconciled with its own namespace (req.Namespace(), and a
// read by name in it); lists name a namespace; deleting a namespace runs
// the reconciler's cleanup of its resources and then the namespace is gone,
// while the other namespace's resource stays.
func TestNamespaces(t *testing.T) {
	env := testkit.Start(t)
	env.CreateType(t, widget.Name, widget.Version, widgetSchema)
	var mu sync.Mutex
	var seen []string
	rec := sdk.New("spaces", sdk.Func[json.RawMessage](func(ctx context.Context, req *sdk.Request[json.RawMessage]) (sdk.Result, error) {
		self, err := req.Client.GetByName(ctx, widget, req.Namespace(), req.Resource.Name)
		if err != nil || self.ID != req.Resource.ID {
			return sdk.Result{}, fmt.Errorf("read %s by name in %s: %v (got %v)", req.Resource.Name, req.Namespace(), err, self)
		}
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s/%s deleting=%v", req.Namespace(), req.Resource.Name, req.Deleting()))
		mu.Unlock()
		return sdk.Result{}, nil
	}))
	env.RunReconciler(t, rec, widget)
	if ns := env.CreateNamespace(t, "team-a"); ns.Status != "active" || ns.UID == "" {
		t.Fatalf("namespace %+v", ns)
	}
	a := env.CreateResource(t, widget, "same", map[string]any{"size": 1}, testkit.WithNamespace("team-a"))
	d := env.CreateResource(t, widget, "same", map[string]any{"size": 2})
	if a.Namespace != "team-a" || d.Namespace != "default" || a.ID == d.ID {
		t.Fatalf("resources %v and %v", a, d)
	}
	a = env.WaitFor(t, a, testkit.Ready(), wait)
	d = env.WaitFor(t, d, testkit.Ready(), wait)

	list, err := env.Client.List(t.Context(), sdk.ListOptions{Namespace: "team-a", Type: widget})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != a.ID {
		t.Fatalf("list team-a: %+v %v", list, err)
	}
	if got, err := env.Client.GetByName(t.Context(), widget, "", "same"); err != nil || got.ID != d.ID {
		t.Fatalf("by name without a namespace: %v %v", got, err)
	}

	if ns := env.DeleteNamespace(t, "team-a"); ns.Status != "terminating" || ns.DeletedAt == nil {
		t.Fatalf("deleted namespace %+v", ns)
	}
	env.WaitFor(t, a, testkit.Gone(), wait)
	env.WaitNamespaceGone(t, "team-a", wait)
	mu.Lock()
	cleaned := slices.Contains(seen, "team-a/same deleting=true")
	mu.Unlock()
	if !cleaned {
		t.Fatalf("the reconciler never cleaned up team-a/same: %v", seen)
	}
	if got, ok := env.Get(t, d); !ok || got.Status != client.StatusReady || got.Deleting() {
		t.Fatalf("the default namespace's resource: %v", got)
	}
}
