package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/worker"
)

// The "relationships" scenario (issue 39): how fast a reconciler hears of
// what it owns and what it names, with two SDK reconcilers running in
// this process on the worker runtime (as a user's would) and the noop
// reconciler serving the children and the secrets; resync is an hour
// away, so only Owns, Watches and WaitFor can answer. It prints, without
// targets:
//   - Owns: over 100 cases, one at a time, the time from a hand edit of a
//     child's spec to the spec put back by its owner's reconcile (100
//     owners of one child each);
//   - WaitFor: over 100 cases, the time from a referenced resource's
//     creation to its referrer, Failed waiting for it, being Ready;
//   - coalescing: the reconciles of one owner of 100 children while all
//     100 are edited by hand at once (16 at a time) under load (8 writers
//     editing the other owners' children meanwhile), until every child is
//     restored and the owner is quiet.
const (
	relParent = "RelParent"
	relChild  = "RelChild"
	relRef    = "RelRef"
	relSecret = "RelSecret"
	relCases  = 100
)

type relParentSpec struct {
	Children int    `json:"children"`
	Value    string `json:"value"`
}

type relRefSpec struct {
	SecretRef struct {
		Name string `json:"name"`
	} `json:"secretRef"`
}

// relChildName is the name of parent's i-th child.
func relChildName(parent string, i int) string { return fmt.Sprintf("%s-c%03d", parent, i) }

// relEngines are the scenario's reconcilers: parents apply their children
// (and own them); refs wait for, then watch, the secret they name.
func relEngines() (*sdk.Engine[relParentSpec], *sdk.Engine[relRefSpec]) {
	childType, secretType := sdk.Type(relChild, "v1"), sdk.Type(relSecret, "v1")
	parents := sdk.New("bench-rel-parents", sdk.Func[relParentSpec](func(ctx context.Context, req *sdk.Request[relParentSpec]) (sdk.Result, error) {
		if req.Deleting() {
			return sdk.Result{}, nil
		}
		spec, err := json.Marshal(map[string]any{"value": req.Spec.Value})
		if err != nil {
			return sdk.Result{}, sdk.Terminal(err)
		}
		owners := []client.OwnerReference{{UID: req.Resource.UID, ResourceTypeName: relParent, ResourceTypeVersion: "v1",
			Name: req.Resource.Name, Controller: true}}
		for i := range req.Spec.Children {
			if _, _, err := req.API().Apply(ctx, client.ApplyRequest{Namespace: req.Namespace(), Name: relChildName(req.Resource.Name, i),
				ResourceTypeName: childType.Name, ResourceTypeVersion: childType.Version, Spec: spec, OwnerReferences: &owners}); err != nil {
				return sdk.Result{}, fmt.Errorf("apply child %d: %w", i, err)
			}
		}
		return sdk.Result{}, nil
	})).Owns(childType)
	refs := sdk.New("bench-rel-refs", sdk.Func[relRefSpec](func(ctx context.Context, req *sdk.Request[relRefSpec]) (sdk.Result, error) {
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
	return parents, refs
}

// runInProcess runs rec on the worker runtime in this process, with the
// stack's addresses and, with identities, its credentials as
// reconciler/<name> (the API, on the gateway's public listener, with the
// bench's bootstrap token), until ctx ends.
func (e *benchEnv) runInProcess(ctx context.Context, rec worker.Reconciler, types []string) (<-chan error, error) {
	vars, err := e.reconcilerEnv(rec.Name(), types)
	if err != nil {
		return nil, err
	}
	env := map[string]string{worker.EnvNATSURL: e.natsURL, worker.EnvStoreAddr: e.workerAddr, worker.EnvAPIURL: e.gatewayURL,
		worker.EnvToken: e.bootstrapToken, worker.EnvHealthListen: "off", worker.EnvMaxConcurrency: "32", worker.EnvReplicaID: rec.Name() + "-1", worker.EnvLogLevel: "warn"}
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	var refs []sdk.TypeRef
	for _, t := range types {
		name, version, _ := strings.Cut(t, "/")
		refs = append(refs, sdk.Type(name, version))
	}
	done := make(chan error, 1)
	go func() { done <- worker.RunMain(ctx, rec, refs, func(k string) string { return env[k] }) }()
	return done, nil
}

func benchRelationships(ctx context.Context, env *benchEnv) error {
	if err := env.Fresh(ctx); err != nil {
		return err
	}
	sched, err := env.startScheduler(ctx, "bench-relationships")
	if err != nil {
		return err
	}
	if err := env.startNoopReplicas(ctx, "noop-rel", []string{relChild + "/v1", relSecret + "/v1"}, []string{"rel1"}, "--concurrency", "32"); err != nil {
		return err
	}
	hour := map[string]any{"resync_seconds": 3600}
	for _, t := range []string{relParent, relChild, relRef, relSecret} {
		if _, err := env.postJSON(ctx, "/api/v1/resource-types", map[string]any{"name": t, "version": "v1",
			"schema": map[string]any{"type": "object"}, "reconcile_policy": hour}); err != nil {
			return err
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	parents, refs := relEngines()
	for _, w := range []struct {
		rec  worker.Reconciler
		typ  string
		name string
	}{{parents, relParent + "/v1", "parents"}, {refs, relRef + "/v1", "refs"}} {
		done, err := env.runInProcess(wctx, w.rec, []string{w.typ})
		if err != nil {
			return err
		}
		go func() {
			if err := <-done; err != nil && wctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "the %s reconciler stopped: %v\n", w.name, err)
			}
		}()
	}
	if err := waitFor(ctx, 30*time.Second, "the in-process reconcilers registered", sched, func() error {
		return env.registered(ctx, []string{relParent + "/v1", relRef + "/v1"})
	}); err != nil {
		return err
	}
	r := relRun{env: env, sched: sched}
	restore, err := r.ownsRestore(ctx)
	if err != nil {
		return fmt.Errorf("owns: %w", err)
	}
	wait, err := r.waitForReady(ctx)
	if err != nil {
		return fmt.Errorf("waitfor: %w", err)
	}
	reconciles, took, err := r.coalesced(ctx)
	if err != nil {
		return fmt.Errorf("coalescing: %w", err)
	}
	fmt.Printf("stack: %s, noop serving %s and %s (32 at once), two SDK reconcilers in this process (32 at once each); resync an hour away\n",
		describeServices(env), relChild, relSecret)
	fmt.Printf("Owns: hand edit of a child's spec → restored by its owner, over %d cases one at a time: p50 %s, p99 %s\n",
		relCases, fmtMS(percentile(restore, 50)), fmtMS(percentile(restore, 99)))
	fmt.Printf("WaitFor: referenced resource created → its referrer Ready, over %d cases one at a time: p50 %s, p99 %s\n",
		relCases, fmtMS(percentile(wait, 50)), fmtMS(percentile(wait, 99)))
	fmt.Printf("Owns, coalesced: 100 children of one owner edited by hand at once, under load → %d reconciles of the owner (all restored in %s)\n",
		reconciles, took.Round(10*time.Millisecond))
	env.figure("owns edit→restore p50 ms", ms(percentile(restore, 50)))
	env.figure("owns edit→restore p99 ms", ms(percentile(restore, 99)))
	env.figure("waitfor creation→Ready p50 ms", ms(percentile(wait, 50)))
	env.figure("waitfor creation→Ready p99 ms", ms(percentile(wait, 99)))
	env.figure("owner reconciles per 100 child changes", float64(reconciles))
	return nil
}

// fmtMS formats d in milliseconds.
func fmtMS(d time.Duration) string { return fmt.Sprintf("%.0f ms", ms(d)) }

// relRun is one run of the relationships scenario.
type relRun struct {
	env   *benchEnv
	sched *benchProc
}

// doc is a resource document as the API returns it.
type doc struct {
	ID     int64           `json:"id"`
	Name   string          `json:"name"`
	Status string          `json:"status"`
	Spec   json.RawMessage `json:"spec"`
}

func (r relRun) get(ctx context.Context, typ, name string) (doc, error) {
	var d doc
	status, _, body, err := r.env.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/resources/by-name/%s/v1/%s", typ, name), nil)
	if err != nil {
		return d, err
	}
	if status != http.StatusOK {
		return d, fmt.Errorf("get %s %s: %d %s", typ, name, status, body)
	}
	return d, json.Unmarshal(body, &d)
}

func (r relRun) create(ctx context.Context, typ, name string, spec any) error {
	_, err := r.env.postJSON(ctx, "/api/v1/resources", map[string]any{"name": name, "resource_type_name": typ, "resource_type_version": "v1", "spec": spec})
	return err
}

func (r relRun) setSpec(ctx context.Context, id int64, spec any) error {
	status, _, body, err := r.env.do(ctx, http.MethodPut, fmt.Sprintf("/api/v1/resources/%d", id), map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("update %d: %d %s", id, status, body)
	}
	return nil
}

// until polls cond every 5 ms until it holds, and returns how long that took.
func (r relRun) until(ctx context.Context, what string, cond func() (bool, error)) (time.Duration, error) {
	start := time.Now()
	for {
		ok, err := cond()
		if err != nil {
			return 0, err
		}
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > time.Minute {
			return 0, fmt.Errorf("%s: not within a minute", what)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ready waits until the named resources are Ready.
func (r relRun) ready(ctx context.Context, typ string, names []string) error {
	return waitFor(ctx, 2*time.Minute, fmt.Sprintf("%d %s Ready", len(names), typ), r.sched, func() error {
		for _, n := range names {
			d, err := r.get(ctx, typ, n)
			if err != nil {
				return err
			}
			if d.Status != "ready" {
				return fmt.Errorf("%s is %s", n, d.Status)
			}
		}
		return nil
	})
}

// ownsRestore: 100 owners of one child each; each child's spec edited by
// hand in turn, timed until its owner put it back.
func (r relRun) ownsRestore(ctx context.Context) ([]time.Duration, error) {
	var names, children []string
	for i := range relCases {
		n := fmt.Sprintf("owner-%03d", i)
		if err := r.create(ctx, relParent, n, relParentSpec{Children: 1, Value: "v"}); err != nil {
			return nil, err
		}
		names, children = append(names, n), append(children, relChildName(n, 0))
	}
	if err := r.ready(ctx, relParent, names); err != nil {
		return nil, err
	}
	if err := r.ready(ctx, relChild, children); err != nil {
		return nil, err
	}
	var out []time.Duration
	for _, c := range children {
		d, err := r.get(ctx, relChild, c)
		if err != nil {
			return nil, err
		}
		if err := r.setSpec(ctx, d.ID, map[string]any{"value": "by hand"}); err != nil {
			return nil, err
		}
		took, err := r.until(ctx, c+" restored", func() (bool, error) {
			d, err := r.get(ctx, relChild, c)
			return err == nil && strings.Contains(string(d.Spec), `"v"`), err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, took)
	}
	return out, nil
}

// waitForReady: 100 referrers of missing secrets, each Failed waiting;
// each secret created in turn, timed until its referrer is Ready.
func (r relRun) waitForReady(ctx context.Context) ([]time.Duration, error) {
	var names []string
	for i := range relCases {
		n := fmt.Sprintf("ref-%03d", i)
		if err := r.create(ctx, relRef, n, map[string]any{"secretRef": map[string]any{"name": "secret-" + n}}); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	if err := waitFor(ctx, 2*time.Minute, "the referrers Failed, waiting", r.sched, func() error {
		for _, n := range names {
			if d, err := r.get(ctx, relRef, n); err != nil || d.Status != "failed" {
				return fmt.Errorf("%s: %s %v", n, d.Status, err)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var out []time.Duration
	for _, n := range names {
		start := time.Now()
		if err := r.create(ctx, relSecret, "secret-"+n, map[string]any{}); err != nil {
			return nil, err
		}
		if _, err := r.until(ctx, n+" Ready", func() (bool, error) {
			d, err := r.get(ctx, relRef, n)
			return err == nil && d.Status == "ready", err
		}); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// coalesced: one owner of 100 children, all edited by hand at once while
// 8 writers edit the first scenario's children; the owner's reconciles
// (history rows) from the first edit until every child is restored and
// the owner has been quiet for 2 s (PostgreSQL backend).
func (r relRun) coalesced(ctx context.Context) (int, time.Duration, error) {
	const owner = "big-owner"
	if err := r.create(ctx, relParent, owner, relParentSpec{Children: 100, Value: "v"}); err != nil {
		return 0, 0, err
	}
	var children []string
	for i := range 100 {
		children = append(children, relChildName(owner, i))
	}
	if err := r.ready(ctx, relParent, []string{owner}); err != nil {
		return 0, 0, err
	}
	if err := r.ready(ctx, relChild, children); err != nil {
		return 0, 0, err
	}
	o, err := r.get(ctx, relParent, owner)
	if err != nil {
		return 0, 0, err
	}
	// Its attempts: the lease epoch grows by one with each (the history
	// keeps only the last 100).
	attempts := func() (int, error) {
		var n int
		err := r.env.pool.QueryRow(ctx, `SELECT lease_epoch FROM resources WHERE id = $1`, o.ID).Scan(&n)
		return n, err
	}
	quiet := func() (int, error) {
		n, since := -1, time.Now()
		for time.Since(since) < 2*time.Second {
			m, err := attempts()
			if err != nil {
				return 0, err
			}
			if m != n {
				n, since = m, time.Now()
			}
			time.Sleep(50 * time.Millisecond)
		}
		return n, nil
	}
	before, err := quiet()
	if err != nil {
		return 0, 0, err
	}
	ids := make([]int64, len(children))
	for i, c := range children {
		d, err := r.get(ctx, relChild, c)
		if err != nil {
			return 0, 0, err
		}
		ids[i] = d.ID
	}
	// The load: the first scenario's children, edited over and over.
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var edits atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			for i := w; lctx.Err() == nil; i += 8 {
				d, err := r.get(lctx, relChild, relChildName(fmt.Sprintf("owner-%03d", i%relCases), 0))
				if err == nil && r.setSpec(lctx, d.ID, map[string]any{"value": fmt.Sprintf("load %d", i)}) == nil {
					edits.Add(1)
				}
			}
		})
	}
	start := time.Now()
	if _, err := runLoad(ctx, loadSpec{Concurrency: 16, Count: len(ids)}, true, func(ctx context.Context, seq int64) error {
		return r.setSpec(ctx, ids[seq], map[string]any{"value": "by hand"})
	}); err != nil {
		stopLoad()
		wg.Wait()
		return 0, 0, err
	}
	var took time.Duration
	for _, c := range children {
		if _, err := r.until(ctx, c+" restored", func() (bool, error) {
			d, err := r.get(ctx, relChild, c)
			return err == nil && strings.Contains(string(d.Spec), `"v"`), err
		}); err != nil {
			stopLoad()
			wg.Wait()
			return 0, 0, err
		}
	}
	took = time.Since(start)
	stopLoad()
	wg.Wait()
	after, err := quiet()
	if err != nil {
		return 0, 0, err
	}
	fmt.Printf("  coalescing: %d edits of other owners' children ran meanwhile\n", edits.Load())
	return after - before, took, nil
}
