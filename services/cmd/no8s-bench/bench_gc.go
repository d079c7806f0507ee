package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The "gc" scenario: 100 owners with 100 dependents each (10,000), every
// one served by the noop reconciler (so each goes through its finalizer,
// as a client's delete does), all Ready; then the 100 owners are deleted
// (Background) and the scenario prints the time until every dependent is
// purged: the garbage collector's pace, in the scheduler, writing through
// the gateway. There is no target.
const (
	gcOwners     = 100
	gcDependents = 10000
	gcType       = "GCBench"
)

func benchGC(ctx context.Context, env *benchEnv) error {
	if err := env.Fresh(ctx); err != nil {
		return err
	}
	if env.pool == nil {
		return fmt.Errorf("the gc scenario needs the PostgreSQL backend")
	}
	apiURL, err := env.serviceAPI(ctx)
	if err != nil {
		return err
	}
	sched, err := env.startScheduler(ctx, "bench-gc", "--api-url", apiURL)
	if err != nil {
		return err
	}
	if err := env.startNoopReplicas(ctx, "noop-gc", []string{gcType + "/v1"}, []string{"gc1"}, "--concurrency", "32"); err != nil {
		return err
	}
	if _, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{"name": gcType, "version": "v1", "schema": map[string]any{"type": "object"}}); err != nil {
		return err
	}
	type owner struct {
		ID  int64  `json:"id"`
		UID string `json:"uid"`
	}
	create := func(ctx context.Context, name string, ref map[string]any) (owner, error) {
		b := map[string]any{"name": name, "resource_type_name": gcType, "resource_type_version": "v1", "spec": map[string]any{}}
		if ref != nil {
			b["owner_references"] = []any{ref}
		}
		data, err := env.postJSON(ctx, "/api/v1/resources", b)
		if err != nil {
			return owner{}, err
		}
		var o owner
		return o, json.Unmarshal(data, &o)
	}
	owners := make([]owner, gcOwners)
	if _, err := runLoad(ctx, loadSpec{Concurrency: 16, Count: gcOwners}, true, func(ctx context.Context, seq int64) error {
		o, err := create(ctx, fmt.Sprintf("owner-%03d", seq), nil)
		owners[seq] = o
		return err
	}); err != nil {
		return fmt.Errorf("create the owners: %w", err)
	}
	start := time.Now()
	if _, err := runLoad(ctx, loadSpec{Concurrency: 32, Count: gcDependents}, true, func(ctx context.Context, seq int64) error {
		o := owners[seq%gcOwners]
		_, err := create(ctx, fmt.Sprintf("dep-%05d", seq), map[string]any{"uid": o.UID, "resource_type_name": gcType,
			"resource_type_version": "v1", "name": fmt.Sprintf("owner-%03d", seq%gcOwners)})
		return err
	}); err != nil {
		return fmt.Errorf("create the dependents: %w", err)
	}
	fmt.Printf("created %d owners and %d dependents in %s\n", gcOwners, gcDependents, time.Since(start).Round(100*time.Millisecond))
	count := func(ready bool) (int, error) {
		q := `SELECT count(*) FROM resources WHERE resource_type_name = $1`
		if ready {
			q += ` AND status = 'ready'`
		}
		var n int
		return n, env.pool.QueryRow(ctx, q, gcType).Scan(&n)
	}
	if err := waitFor(ctx, 10*time.Minute, "every resource Ready", sched, func() error {
		n, err := count(true)
		if err == nil && n < gcOwners+gcDependents {
			err = fmt.Errorf("%d ready", n)
		}
		return err
	}); err != nil {
		return err
	}

	load := loadAverage()
	deleted := time.Now()
	if _, err := runLoad(ctx, loadSpec{Concurrency: 8, Count: gcOwners}, true, func(ctx context.Context, seq int64) error {
		status, _, data, err := env.do(ctx, http.MethodDelete, "/api/v1/resources/"+strconv.FormatInt(owners[seq].ID, 10)+"?propagation_policy=Background", nil)
		if err == nil && status != http.StatusAccepted {
			err = fmt.Errorf("delete owner %d: %d %s", owners[seq].ID, status, truncateBytes(data, 300))
		}
		return err
	}); err != nil {
		return err
	}
	last := time.Now()
	if err := waitFor(ctx, 30*time.Minute, "every dependent purged", sched, func() error {
		n, err := count(false)
		if err != nil {
			return err
		}
		if time.Since(last) > 15*time.Second {
			fmt.Printf("  %s: %d left\n", time.Since(deleted).Round(time.Second), n)
			last = time.Now()
		}
		if n > 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	}); err != nil {
		return err
	}
	took := time.Since(deleted)
	fmt.Printf("stack: %s; the collector in the scheduler, its writes through the gateway at %s; noop (32 at once) serving %s\n", describeServices(env), apiURL, gcType)
	fmt.Printf("load average at the deletion %s, at the end %s\n", load, loadAverage())
	fmt.Printf("%d owners deleted (Background) → their %d dependents purged: %s (%.0f dependents/s); no target\n",
		gcOwners, gcDependents, took.Round(100*time.Millisecond), gcDependents/took.Seconds())
	return nil
}
