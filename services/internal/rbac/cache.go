package rbac

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// Defaults of a Cache.
const (
	// DefaultRefresh is how often a Cache reads the roles and bindings.
	DefaultRefresh = time.Second
	// DefaultMaxStaleness is the oldest Policy a Cache answers with: a
	// decision is never made on roles and bindings read longer ago.
	DefaultMaxStaleness = 2 * time.Second
)

// ErrStale is the error of a Cache whose Policy is too old to decide with
// (the store has not answered for MaxStaleness).
var ErrStale = errors.New("the roles and bindings could not be read recently enough to decide")

// Loader reads every role and binding.
type Loader func(ctx context.Context) ([]Object, error)

// Cache holds the current Policy, read again every Refresh.
type Cache struct {
	load            Loader
	reconcilerTypes func(string) []string
	refresh         time.Duration
	maxStaleness    time.Duration
	log             *slog.Logger
	cur             atomic.Pointer[Policy]
	now             func() time.Time
}

// NewCache returns a Cache reading with load every refresh (DefaultRefresh
// when zero) and refusing to decide on a Policy older than maxStaleness
// (DefaultMaxStaleness when zero). reconcilerTypes, which may be nil, gives
// the types a reconciler serves, for its built-in role.
func NewCache(load Loader, reconcilerTypes func(string) []string, refresh, maxStaleness time.Duration, log *slog.Logger) *Cache {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	if maxStaleness <= 0 {
		maxStaleness = DefaultMaxStaleness
	}
	return &Cache{load: load, reconcilerTypes: reconcilerTypes, refresh: refresh, maxStaleness: maxStaleness, log: log, now: time.Now}
}

// Run reads the roles and bindings every Refresh until ctx ends.
func (c *Cache) Run(ctx context.Context) {
	t := time.NewTicker(c.refresh)
	defer t.Stop()
	for {
		if err := c.Refresh(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("reading roles and bindings failed; decisions use the last read while it is recent enough", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh reads the roles and bindings once.
func (c *Cache) Refresh(ctx context.Context) error {
	started := c.now()
	objs, err := c.load(ctx)
	if err != nil {
		return fmt.Errorf("read roles and bindings: %w", err)
	}
	p, errs := NewPolicy(objs, c.reconcilerTypes)
	for _, err := range errs {
		c.log.Warn("a role or binding is left out", "error", err)
	}
	p.Read = started
	c.cur.Store(p)
	return nil
}

// Policy returns the current Policy, or ErrStale when the last one read is
// older than MaxStaleness (or none has been read).
func (c *Cache) Policy() (*Policy, error) {
	p := c.cur.Load()
	if p == nil || c.now().Sub(p.Read) > c.maxStaleness {
		return nil, ErrStale
	}
	return p, nil
}
