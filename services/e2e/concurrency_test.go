package e2e

import (
	"fmt"
	"sync"
	"testing"
)

// TestOptimisticConcurrency runs two stores, two admissions and two gateways
// (each gateway on its own store) and sends concurrent updates naming the
// same resource_version through both gateways: exactly one wins per round,
// every other gets 409.
func TestOptimisticConcurrency(t *testing.T) {
	c := newCluster(t)
	c.startStore("")
	c.startStore("")
	g1 := c.startGateway(c.storeAddrs[0], c.startAdmission(c.storeAddrs[0]))
	g2 := c.startGateway(c.storeAddrs[1], c.startAdmission(c.storeAddrs[1]))

	if r := do(t, "POST", g1+"/api/v1/resource-types", map[string]any{
		"name": "Counter", "version": "v1",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}},
	}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	// A reconciler serves Counter (the live-reconciler rule); without a
	// scheduler nothing is dispatched, so only the writers change it.
	c.startReconciler(c.storeAddrs[0], "Counter/v1")
	r := do(t, "POST", g2+"/api/v1/resources", map[string]any{
		"name": "shared", "resource_type_name": "Counter", "resource_type_version": "v1", "spec": map[string]any{"n": 0},
	})
	if r.status != 201 {
		t.Fatalf("create resource: %d %s", r.status, r.body)
	}
	res := r.json(t)
	id := int64(res["id"].(float64))
	rv := int64(res["resource_version"].(float64))

	const writers = 24
	rounds := rounds(5, 50)
	for round := range rounds {
		var wg sync.WaitGroup
		codes := make([]int, writers)
		bodies := make([]map[string]any, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				gw := g1
				if w%2 == 1 {
					gw = g2
				}
				resp := do(t, "PUT", fmt.Sprintf("%s/api/v1/resources/%d", gw, id), map[string]any{
					"spec": map[string]any{"n": round*1000 + w + 1}, "resource_version": rv,
				})
				codes[w] = resp.status
				if resp.status == 200 || resp.status == 409 {
					bodies[w] = resp.json(t)
				}
			}()
		}
		wg.Wait()
		wins := 0
		for w, code := range codes {
			switch code {
			case 200:
				wins++
				rv = int64(bodies[w]["resource_version"].(float64))
			case 409:
				if bodies[w]["code"] != "conflict" {
					t.Fatalf("round %d: 409 with code %v", round, bodies[w]["code"])
				}
			default:
				t.Fatalf("round %d: writer %d got %d", round, w, code)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d updates won, want exactly 1 (codes %v)", round, wins, codes)
		}
	}
	got := do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", g1, id), nil).json(t)
	if int64(got["resource_version"].(float64)) != rv || got["generation"] != float64(rounds+1) {
		t.Fatalf("final resource %v, want resource_version %d and generation %d", got, rv, rounds+1)
	}
}
