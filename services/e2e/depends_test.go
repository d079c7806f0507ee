package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk"
)

// TestWatchesAndWaitFor: a reconciler (an SDK engine in this process, on
// the real worker runtime, against real processes) whose Linked resources
// name a Secret by spec.secretRef.name, watched with Watches and waited for
// with WaitFor; the type's resync is an hour away and its backoff base a
// second, so that only the new path passes and a retry would show.
//   - A Linked naming a missing Secret is Failed with reason SecretNotFound
//     and has one attempt in its history over 20 s; it is Ready once the
//     Secret is created (reason dependency; the Secret's own reconcile, a
//     status change, reaches it too).
//   - A change of the Secret reconciles it, and only it: 50 Linked naming
//     other Secrets have no new attempt; the Secret's going makes it wait
//     again.
func TestWatchesAndWaitFor(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	c.startReconciler(c.storeAddrs[0], "Secret/v1")
	for _, typ := range []map[string]any{
		{"name": "Secret", "version": "v1", "schema": map[string]any{"type": "object"}},
		{"name": "Linked", "version": "v1", "schema": map[string]any{"type": "object"},
			"reconcile_policy": map[string]any{"resync_seconds": 3600, "backoff_base_seconds": 1, "backoff_max_seconds": 4}},
	} {
		if r := do(t, "POST", base+"/api/v1/resource-types", typ); r.status != 201 {
			t.Fatalf("create type %s: %d %s", typ["name"], r.status, r.body)
		}
	}
	secretType := sdk.Type("Secret", "v1")
	type spec struct {
		SecretRef struct {
			Name string `json:"name"`
		} `json:"secretRef"`
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	engine := sdk.New("linked", sdk.Func[spec](func(ctx context.Context, req *sdk.Request[spec]) (sdk.Result, error) {
		mu.Lock()
		attempts[req.Resource.Name]++
		mu.Unlock()
		if req.Deleting() {
			return sdk.Result{}, nil
		}
		name := req.Spec.SecretRef.Name
		if _, err := req.Client.GetByName(ctx, secretType, req.Namespace(), name); errors.Is(err, sdk.ErrNotFound) {
			return sdk.Result{}, req.WaitFor(secretType, name, "SecretNotFound")
		} else if err != nil {
			return sdk.Result{}, err
		}
		return sdk.Result{}, nil
	})).Watches(secretType, "spec.secretRef.name")
	c.runWorker(engine, c.storeAddrs[0], sdk.Type("Linked", "v1"))

	create := func(typ, name, secret string) int64 {
		t.Helper()
		body := map[string]any{"name": name, "resource_type_name": typ, "resource_type_version": "v1", "spec": map[string]any{}}
		if secret != "" {
			body["spec"] = map[string]any{"secretRef": map[string]any{"name": secret}}
		}
		r := do(t, "POST", base+"/api/v1/resources", body)
		if r.status != 201 {
			t.Fatalf("create %s %s: %d %s", typ, name, r.status, r.body)
		}
		return int64(r.json(t)["id"].(float64))
	}
	// state returns a resource's status and its Ready condition's reason.
	state := func(id int64) (status, reason string) {
		t.Helper()
		r := do(t, "GET", base+"/api/v1/resources/"+strconv.FormatInt(id, 10), nil)
		if r.status != 200 {
			t.Fatalf("get %d: %d %s", id, r.status, r.body)
		}
		m := r.json(t)
		conds, _ := m["conditions"].([]any)
		for _, c := range conds {
			if c := c.(map[string]any); c["type"] == "Ready" {
				reason, _ = c["reason"].(string)
			}
		}
		return m["status"].(string), reason
	}
	waitState := func(what string, id int64, status, reason string) {
		t.Helper()
		waitFor(t, 30*time.Second, what, func() error {
			if s, r := state(id); s != status || (reason != "" && r != reason) {
				return fmt.Errorf("status %s, Ready reason %s", s, r)
			}
			return nil
		})
	}

	app := create("Linked", "app", "db")
	waitState("app failed, waiting for its secret", app, "failed", "SecretNotFound")
	failedAt := time.Now()
	// Meanwhile: 50 Linked naming other, existing Secrets.
	others := make([]int64, 50)
	for i := range others {
		create("Secret", fmt.Sprintf("s-%d", i), "")
		others[i] = create("Linked", fmt.Sprintf("other-%d", i), fmt.Sprintf("s-%d", i))
	}
	for i, id := range others {
		waitState(fmt.Sprintf("other-%d ready", i), id, "ready", "")
	}
	// Watched for 20 s from its failure: a backoff retry (base 1 s) would
	// show within the first seconds, and fails the test when it does.
	for time.Now().Before(failedAt.Add(20 * time.Second)) {
		if h := history(t, base, app); len(h) != 1 {
			t.Fatalf("app waiting: %d attempts within 20 s of its failure, want 1 (no backoff retries): %+v", len(h), h)
		}
		time.Sleep(250 * time.Millisecond)
	}
	othersBefore := make([]int, len(others))
	for i, id := range others {
		othersBefore[i] = len(history(t, base, id))
	}

	secret := create("Secret", "db", "")
	waitState("app ready once its secret exists", app, "ready", "")
	// Its Secret's creation, then the Secret's own reconcile (a status
	// change), each reach it.
	h := history(t, base, app)
	if len(h) < 2 || h[1].Reason != "dependency" {
		t.Fatalf("app's history after its secret came: %+v", h)
	}
	waitFor(t, 30*time.Second, "the secret ready", func() error {
		if s, _ := state(secret); s != "ready" {
			return fmt.Errorf("status %s", s)
		}
		return nil
	})
	n := len(history(t, base, app))

	if r := do(t, "PUT", fmt.Sprintf("%s/api/v1/resources/%d", base, secret), map[string]any{"spec": map[string]any{"rotated": true}}); r.status != 200 {
		t.Fatalf("change the secret: %d %s", r.status, r.body)
	}
	waitFor(t, 30*time.Second, "app reconciled for its secret's change", func() error {
		if h := history(t, base, app); len(h) <= n || h[len(h)-1].Reason != "dependency" {
			return fmt.Errorf("history %+v", h)
		}
		return nil
	})
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", base, secret), nil); r.status/100 != 2 {
		t.Fatalf("delete the secret: %d %s", r.status, r.body)
	}
	waitState("app waiting again once its secret is gone", app, "failed", "SecretNotFound")
	for i, id := range others {
		if n := len(history(t, base, id)); n != othersBefore[i] {
			t.Errorf("other-%d, naming another secret, was reconciled: %d attempts, then %d", i, othersBefore[i], n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("attempts: app %d, other-0 %d", attempts["app"], attempts["other-0"])
}
