package admission

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission/schema"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
)

// compiled is a type's schema compiled at one type revision.
type compiled struct {
	revision int64
	schema   *schema.Schema
}

type typeKey struct{ name, version string }

// schemaCache holds compiled schemas per type and version. An entry is
// replaced when a caller asks for a refresh (the store refused a write
// because the type's revision moved on) or when the store returns a newer
// revision than the cached one.
type schemaCache struct {
	store storev1.StoreServiceClient
	// hits and misses count lookups answered from the cache and those
	// that loaded (or refreshed) a schema.
	hits, misses prometheus.Counter

	mu      sync.RWMutex
	entries map[typeKey]*compiled
	// flights deduplicates concurrent loads of one type.
	flights map[typeKey]*flight
}

type flight struct {
	done chan struct{}
	c    *compiled
	err  error
}

func newSchemaCache(store storev1.StoreServiceClient, reg prometheus.Registerer) *schemaCache {
	lookups := metrics.MustVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "admission",
		Name: "schema_cache_lookups_total", Help: "Compiled schema lookups by result: hit (answered from the cache) or miss (loaded or refreshed from the store)."},
		[]string{"result"}))
	return &schemaCache{store: store, entries: map[typeKey]*compiled{}, flights: map[typeKey]*flight{},
		hits: lookups.WithLabelValues("hit"), misses: lookups.WithLabelValues("miss")}
}

// get returns the compiled schema of name/version, loading it from the
// store when absent or when refresh is set.
func (c *schemaCache) get(ctx context.Context, name, version string, refresh bool) (*compiled, error) {
	k := typeKey{name, version}
	if !refresh {
		c.mu.RLock()
		e := c.entries[k]
		c.mu.RUnlock()
		if e != nil {
			c.hits.Inc()
			return e, nil
		}
	}
	c.misses.Inc()
	c.mu.Lock()
	f := c.flights[k]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.flights[k] = f
		go c.load(context.WithoutCancel(ctx), k, f)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.c, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *schemaCache) load(ctx context.Context, k typeKey, f *flight) {
	defer close(f.done)
	defer func() {
		c.mu.Lock()
		delete(c.flights, k)
		if f.err == nil {
			c.entries[k] = f.c
		} else if problem.KindOf(f.err) == problem.Invalid {
			delete(c.entries, k)
		}
		c.mu.Unlock()
	}()
	resp, err := c.store.GetResourceType(ctx, &storev1.GetResourceTypeRequest{Name: k.name, Version: k.version})
	if err != nil {
		err = grpcstatus.FromStatus(err)
		if problem.KindOf(err) == problem.NotFound {
			err = problem.New(problem.Invalid, problem.CodeUnknownType, "resource type %s/%s does not exist", k.name, k.version).
				WithFields(problem.FieldError{Path: "/resource_type_name", Message: "no resource type " + k.name + "/" + k.version})
		}
		f.err = err
		return
	}
	t := resp.GetResourceType()
	s, err := schema.Compile(t.GetSchema())
	if err != nil {
		f.err = problem.New(problem.Internal, problem.CodeInvalidSchema, "the stored schema of %s/%s does not compile: %v", k.name, k.version, err)
		return
	}
	f.c = &compiled{revision: t.GetResourceVersion(), schema: s}
}
