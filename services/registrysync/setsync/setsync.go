// Package setsync makes a set of objects equal to a desired set: it creates
// the missing, updates the changed and deletes the extra, with a bounded
// number of writes in flight. It knows nothing of where either set comes
// from: registry-sync feeds it datasource rows × templates against the
// Tenants it finds, and an HTTP source can feed it anything keyed the same
// way. Its one safety rule: when the desired set is not known to be
// complete (a failed or partial read), nothing is deleted.
package setsync

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
)

// Ops are the writes, each for one key. An error fails that key only,
// unless it wraps ErrStop, which stops the sync (no further write starts).
type Ops[K comparable, D, C any] struct {
	// Equal reports whether current c already matches desired d.
	Equal func(d D, c C) bool
	// Create makes the object of key k.
	Create func(ctx context.Context, k K, d D) error
	// Update changes c into d.
	Update func(ctx context.Context, k K, d D, c C) error
	// Delete removes c. Objects already going away should be left out of
	// the current set by the caller.
	Delete func(ctx context.Context, k K, c C) error
}

// ErrStop stops a sync: the writer may no longer write (a deposed leader).
var ErrStop = errors.New("setsync: stop")

// Result counts what a sync did.
type Result[K comparable] struct {
	Created, Updated, Deleted, Unchanged int
	// Failed maps each key whose write failed to its error.
	Failed map[K]error
	// DeletesSkipped is the number of extra objects kept because the
	// desired set was not complete.
	DeletesSkipped int
	// Stopped is set when a write returned ErrStop.
	Stopped error
}

// Sync makes current equal to desired through ops, at most parallel writes
// at a time (1 when below). complete says whether desired is the whole
// desired set; when it is not, extra objects are kept. Keys are written in
// sorted order of their String form when K is a string (deterministic
// logs); creates and updates go before deletes.
func Sync[K comparable, D, C any](ctx context.Context, desired map[K]D, current map[K]C, complete bool, parallel int, ops Ops[K, D, C], less func(a, b K) int) Result[K] {
	res := Result[K]{Failed: map[K]error{}}
	type job struct {
		k   K
		run func(context.Context) error
		n   *int
	}
	var jobs []job
	for _, k := range slices.SortedFunc(maps.Keys(desired), less) {
		d := desired[k]
		c, ok := current[k]
		switch {
		case !ok:
			jobs = append(jobs, job{k, func(ctx context.Context) error { return ops.Create(ctx, k, d) }, &res.Created})
		case !ops.Equal(d, c):
			jobs = append(jobs, job{k, func(ctx context.Context) error { return ops.Update(ctx, k, d, c) }, &res.Updated})
		default:
			res.Unchanged++
		}
	}
	var deletes []job
	for _, k := range slices.SortedFunc(maps.Keys(current), less) {
		if _, ok := desired[k]; ok {
			continue
		}
		if !complete {
			res.DeletesSkipped++
			continue
		}
		c := current[k]
		deletes = append(deletes, job{k, func(ctx context.Context) error { return ops.Delete(ctx, k, c) }, &res.Deleted})
	}
	parallel = max(parallel, 1)
	var mu sync.Mutex
	run := func(batch []job) {
		sem := make(chan struct{}, parallel)
		var wg sync.WaitGroup
		for _, j := range batch {
			sem <- struct{}{}
			mu.Lock()
			stopped := res.Stopped != nil
			mu.Unlock()
			if stopped || ctx.Err() != nil {
				<-sem
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				err := j.run(ctx)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, ErrStop):
					if res.Stopped == nil {
						res.Stopped = err
					}
				case err != nil:
					res.Failed[j.k] = err
				default:
					*j.n++
				}
			}()
		}
		wg.Wait()
	}
	run(jobs)
	run(deletes)
	if res.Stopped == nil && ctx.Err() != nil {
		res.Stopped = ctx.Err()
	}
	return res
}
