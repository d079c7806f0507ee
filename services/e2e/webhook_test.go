package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestWebhookAppliesOnEveryAdmissionReplica registers, changes and removes
// an admission webhook through the API of one gateway and shows that each
// change is in force on two separate admission processes (each behind its
// own gateway) within one second, without a restart.
func TestWebhookAppliesOnEveryAdmissionReplica(t *testing.T) {
	c := newCluster(t)
	c.startStore("")
	g1 := c.startGateway(c.storeAddrs[0], c.startAdmission(c.storeAddrs[0]))
	g2 := c.startGateway(c.storeAddrs[0], c.startAdmission(c.storeAddrs[0]))

	var calls atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"allowed":true,"patches":[{"op":"add","path":"/annotations/tagged-by","value":"hook"}]}`))
	}))
	defer hook.Close()

	if r := do(t, http.MethodPost, g1+"/api/v1/resource-types", map[string]any{
		"name": "Replicated", "version": "v1", "schema": map[string]any{"type": "object"},
	}); r.status != http.StatusCreated {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Replicated/v1")
	// Both replicas answer before any webhook exists.
	for _, g := range []string{g1, g2} {
		if got := probe(t, g); got != "plain" {
			t.Fatalf("%s before registration: %s", g, got)
		}
	}

	// waitAll polls both gateways until each answers want, and fails when
	// one takes longer than a second from since.
	waitAll := func(what, want string, since time.Time) {
		t.Helper()
		for _, g := range []string{g1, g2} {
			for {
				got := probe(t, g)
				if got == want {
					t.Logf("%s: in force on %s after %s", what, g, time.Since(since).Round(time.Millisecond))
					break
				}
				if time.Since(since) > time.Second {
					t.Fatalf("%s: %s still answers %s after %s", what, g, got, time.Since(since))
				}
			}
		}
	}

	start := time.Now()
	r := do(t, http.MethodPost, g1+"/api/v1/admission-webhooks", map[string]any{
		"name": "tagger.example.com", "resource_type_name": "Replicated", "webhook_url": hook.URL,
		"webhook_type": "mutating", "operations": []string{"CREATE"},
	})
	if r.status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	waitAll("registration", "tagged", start)
	if calls.Load() < 2 {
		t.Fatalf("the webhook saw %d calls", calls.Load())
	}
	id := fmt.Sprint(r.json(t)["id"])

	// A changed registration takes over too: registered as validating, the
	// same webhook's patches make it a failing webhook (policy Fail).
	start = time.Now()
	if r := do(t, http.MethodPut, g2+"/api/v1/admission-webhooks/"+id, map[string]any{
		"name": "tagger.example.com", "resource_type_name": "Replicated", "webhook_url": hook.URL,
		"webhook_type": "validating", "operations": []string{"CREATE"},
	}); r.status != http.StatusOK {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	waitAll("update", "failed", start)

	start = time.Now()
	if r := do(t, http.MethodDelete, g1+"/api/v1/admission-webhooks/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	waitAll("removal", "plain", start)
}

// probe creates a resource with dry_run and says what admission did:
// "tagged" (patched by the webhook), "failed" (a failed webhook), or
// "plain".
func probe(t *testing.T, gateway string) string {
	t.Helper()
	r := do(t, http.MethodPost, gateway+"/api/v1/resources?dry_run=true", map[string]any{
		"name": "probe", "resource_type_name": "Replicated", "resource_type_version": "v1", "spec": map[string]any{},
	})
	switch r.status {
	case http.StatusServiceUnavailable:
		return "failed"
	case http.StatusCreated:
		var doc struct {
			Annotations map[string]string `json:"annotations"`
		}
		if err := json.Unmarshal(r.body, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Annotations["tagged-by"] == "hook" {
			return "tagged"
		}
		return "plain"
	}
	t.Fatalf("probe: %d %s", r.status, r.body)
	return ""
}
