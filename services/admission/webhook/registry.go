package webhook

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// Source lists the registered webhooks: the store, behind admission's gRPC
// client.
type Source interface {
	// ListWebhooks returns every webhook and the version of the set, or only
	// notModified when the version is still unless.
	ListWebhooks(ctx context.Context, unless string) (hooks []*webhookconf.Webhook, version string, notModified bool, err error)
}

// Matched is the webhooks one request goes through, each list in call order.
type Matched struct {
	Mutating   []*Hook
	Validating []*Hook
}

// Empty reports whether no webhook matched.
func (m Matched) Empty() bool { return len(m.Mutating) == 0 && len(m.Validating) == 0 }

type hookSet struct {
	version    string
	mutating   []*Hook
	validating []*Hook
}

// Registry is the current set of webhooks, refreshed from a Source.
type Registry struct {
	src      Source
	interval time.Duration
	log      *slog.Logger

	set       atomic.Pointer[hookSet]
	ready     chan struct{}
	readyOnce sync.Once

	// refreshMu serializes refreshes, which own pool.
	refreshMu sync.Mutex
	pool      clientPool
	// failing is set while refreshes fail, to log the change once.
	failing bool
}

// NewRegistry returns a registry that, once Run, polls src every interval.
// Its webhooks connect through dialer, which applies the outbound address
// rule.
func NewRegistry(src Source, interval time.Duration, dialer *outbound.Dialer, log *slog.Logger) *Registry {
	return &Registry{src: src, interval: interval, log: log, ready: make(chan struct{}), pool: clientPool{dialer: dialer}}
}

// Run refreshes the registry at once and then every interval until ctx
// ends. Requests wait for the first successful refresh; after that, a
// failing source leaves the last known set in force.
func (r *Registry) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	defer func() {
		r.refreshMu.Lock()
		r.pool.closeAll()
		r.refreshMu.Unlock()
	}()
	for {
		rctx, cancel := context.WithTimeout(ctx, max(r.interval, 5*time.Second))
		err := r.Refresh(rctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		r.refreshMu.Lock()
		switch {
		case err != nil && !r.failing:
			r.failing = true
			r.log.Warn("cannot refresh admission webhooks; keeping the last known set", "error", err)
		case err == nil && r.failing:
			r.failing = false
			r.log.Info("admission webhooks refreshed again")
		}
		r.refreshMu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads the set from the source when it changed.
func (r *Registry) Refresh(ctx context.Context) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	unless := ""
	if cur := r.set.Load(); cur != nil {
		unless = cur.version
	}
	confs, version, notModified, err := r.src.ListWebhooks(ctx, unless)
	if err != nil {
		return err
	}
	if !notModified {
		hooks := make([]*Hook, 0, len(confs))
		for _, c := range confs {
			hooks = append(hooks, &Hook{Webhook: *c})
		}
		r.pool.rebuild(hooks)
		set := &hookSet{version: version}
		for _, h := range hooks {
			if h.Type == webhookconf.TypeMutating {
				set.mutating = append(set.mutating, h)
			} else {
				set.validating = append(set.validating, h)
			}
		}
		byOrder := func(a, b *Hook) int {
			if webhookconf.Less(&a.Webhook, &b.Webhook) {
				return -1
			}
			if webhookconf.Less(&b.Webhook, &a.Webhook) {
				return 1
			}
			return 0
		}
		slices.SortStableFunc(set.mutating, byOrder)
		slices.SortStableFunc(set.validating, byOrder)
		r.set.Store(set)
		r.log.Info("admission webhooks loaded", "version", version, "mutating", len(set.mutating), "validating", len(set.validating))
	}
	r.readyOnce.Do(func() { close(r.ready) })
	return nil
}

// Version is the version of the set in force ("" before the first load).
func (r *Registry) Version() string {
	if s := r.set.Load(); s != nil {
		return s.version
	}
	return ""
}

// Match returns the webhooks that intercept op on a resource of the type and
// version in the namespace, in call order. It waits for the first load of
// the registry.
func (r *Registry) Match(ctx context.Context, op, typeName, typeVersion, namespace string) (Matched, error) {
	select {
	case <-r.ready:
	case <-ctx.Done():
		return Matched{}, problem.New(problem.Unavailable, problem.CodeUnavailable, "the admission webhooks are not loaded yet: %v", ctx.Err())
	}
	s := r.set.Load()
	var m Matched
	for _, h := range s.mutating {
		if h.Matches(op, typeName, typeVersion, namespace) {
			m.Mutating = append(m.Mutating, h)
		}
	}
	for _, h := range s.validating {
		if h.Matches(op, typeName, typeVersion, namespace) {
			m.Validating = append(m.Validating, h)
		}
	}
	return m, nil
}
