package testkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// Predicate is a condition on a resource that WaitFor waits for. gone is
// true when the resource no longer exists (r is then nil).
type Predicate struct {
	Desc  string
	Match func(r *sdk.Resource, gone bool) bool
}

// Ready: status ready and phase Ready.
func Ready() Predicate {
	return Predicate{"ready", func(r *sdk.Resource, gone bool) bool {
		return !gone && r.Status == client.StatusReady && r.Phase == conditions.PhaseReady
	}}
}

// Status: the lifecycle status is s.
func Status(s string) Predicate {
	return Predicate{"status " + s, func(r *sdk.Resource, gone bool) bool { return !gone && r.Status == s }}
}

// Phase: the phase is p.
func Phase(p string) Predicate {
	return Predicate{"phase " + p, func(r *sdk.Resource, gone bool) bool { return !gone && r.Phase == p }}
}

// Condition: condition typ has status s.
func Condition(typ string, s conditions.Status) Predicate {
	return Predicate{fmt.Sprintf("condition %s=%s", typ, s), func(r *sdk.Resource, gone bool) bool {
		if gone {
			return false
		}
		c, ok := r.Condition(typ)
		return ok && c.Status == s
	}}
}

// ObservedGeneration: observed_generation is at least n.
func ObservedGeneration(n int64) Predicate {
	return Predicate{fmt.Sprintf("observed_generation >= %d", n), func(r *sdk.Resource, gone bool) bool {
		return !gone && r.ObservedGeneration >= n
	}}
}

// Gone: the resource was purged.
func Gone() Predicate {
	return Predicate{"gone", func(_ *sdk.Resource, gone bool) bool { return gone }}
}

// Match wraps a function.
func Match(desc string, f func(r *sdk.Resource) bool) Predicate {
	return Predicate{desc, func(r *sdk.Resource, gone bool) bool { return !gone && f(r) }}
}

// All: every predicate holds.
func All(ps ...Predicate) Predicate {
	descs := make([]string, len(ps))
	for i, p := range ps {
		descs[i] = p.Desc
	}
	return Predicate{strings.Join(descs, " and "), func(r *sdk.Resource, gone bool) bool {
		for _, p := range ps {
			if !p.Match(r, gone) {
				return false
			}
		}
		return true
	}}
}

// WaitFor polls the store until p holds for the resource and returns it (nil
// when gone); on timeout it fails the test with the last state seen.
func (e *Env) WaitFor(t testing.TB, r *sdk.Resource, p Predicate, timeout time.Duration) *sdk.Resource {
	t.Helper()
	got, err := e.Await(r.ID, p, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Await is WaitFor returning an error instead of failing the test.
func (e *Env) Await(id int64, p Predicate, timeout time.Duration) (*sdk.Resource, error) {
	deadline := time.Now().Add(timeout)
	var last *sdk.Resource
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := e.Client.Get(ctx, id)
		cancel()
		gone := isNotFound(err)
		if err != nil && !gone {
			return nil, fmt.Errorf("wait for resource %d to be %s: %w", id, p.Desc, err)
		}
		if p.Match(got, gone) {
			return got, nil
		}
		if got != nil {
			last = got
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("resource %d not %s within %s; last seen: %s", id, p.Desc, timeout, describe(last, gone))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isNotFound(err error) bool { return err != nil && errors.Is(err, wire.ErrNotFound) }

func describe(r *sdk.Resource, gone bool) string {
	if gone {
		return "gone"
	}
	if r == nil {
		return "nothing"
	}
	var cs []string
	for _, c := range r.Conditions {
		cs = append(cs, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("status=%s phase=%s generation=%d observed=%d message=%q conditions=[%s] finalizers=%v annotations=%v",
		r.Status, r.Phase, r.Generation, r.ObservedGeneration, r.StatusMessage, strings.Join(cs, " "), r.Finalizers, r.Annotations)
}
