package rbac

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/no8s/no8s/services/internal/authn"
)

// Defaults of a Cache.
const (
	// DefaultRefresh is the age at which a Cache reads the roles and
	// bindings again (in the background, while the Policy it has serves).
	DefaultRefresh = time.Second
	// DefaultMaxStaleness is the oldest Policy a Cache decides with: past
	// it a decision waits for a fresh read.
	DefaultMaxStaleness = 2 * time.Second
	// loadTimeout bounds one read of the roles and bindings.
	loadTimeout = 10 * time.Second
)

// ErrUnavailable wraps the error of a Cache that could not read the roles
// and bindings when its Policy was too old to decide with.
var ErrUnavailable = errors.New("the roles and bindings cannot be read")

// Loader reads every role and binding.
type Loader func(ctx context.Context) ([]Object, error)

// Cache holds the current Policy and reads the roles and bindings again
// when it is asked for one older than Refresh: decisions are never made on
// a read older than MaxStaleness. Administrators need no Policy.
type Cache struct {
	load            Loader
	reconcilerTypes func(string) []string
	refresh         time.Duration
	maxStaleness    time.Duration
	log             *slog.Logger
	now             func() time.Time

	cur atomic.Pointer[Policy]
	// mu serializes reads; loading is true while a background read runs.
	mu      sync.Mutex
	loading atomic.Bool
}

// NewCache returns a Cache reading with load; refresh and maxStaleness
// take their defaults when zero. reconcilerTypes, which may be nil, gives
// the types a reconciler serves, for its built-in role.
func NewCache(load Loader, reconcilerTypes func(string) []string, refresh, maxStaleness time.Duration, log *slog.Logger) *Cache {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	if maxStaleness <= 0 {
		maxStaleness = DefaultMaxStaleness
	}
	if maxStaleness < refresh {
		maxStaleness = refresh
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{load: load, reconcilerTypes: reconcilerTypes, refresh: refresh, maxStaleness: maxStaleness, log: log, now: time.Now}
}

// Policy returns a Policy read at most MaxStaleness ago: the one it has, or
// (when that one is older) a fresh one read now. A Policy older than
// Refresh is read again in the background.
func (c *Cache) Policy(ctx context.Context) (*Policy, error) {
	p := c.cur.Load()
	if p != nil {
		age := c.now().Sub(p.Read)
		if age <= c.refresh {
			return p, nil
		}
		if age <= c.maxStaleness {
			c.refreshInBackground(ctx)
			return p, nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.cur.Load(); p != nil && c.now().Sub(p.Read) <= c.maxStaleness {
		return p, nil
	}
	p, err := c.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return p, nil
}

// Peek returns the Policy the cache has, however old (nil before the first
// read), and reads again in the background when it is older than Refresh:
// for callers that must not wait (a watch's filter, asked while events fan
// out), whose staleness another check bounds.
func (c *Cache) Peek(ctx context.Context) *Policy {
	p := c.cur.Load()
	if p == nil || c.now().Sub(p.Read) > c.refresh {
		c.refreshInBackground(ctx)
	}
	return p
}

// Allowed is Policy(ctx).Allowed(pr, r), without reading anything for an
// administrator.
func (c *Cache) Allowed(ctx context.Context, pr *authn.Principal, r Request) (bool, error) {
	if IsAdmin(pr) {
		return true, nil
	}
	p, err := c.Policy(ctx)
	if err != nil {
		return false, err
	}
	return p.Allowed(pr, r), nil
}

// refreshInBackground starts one read unless one runs.
func (c *Cache) refreshInBackground(ctx context.Context) {
	if !c.loading.CompareAndSwap(false, true) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer c.loading.Store(false)
		c.mu.Lock()
		defer c.mu.Unlock()
		if p := c.cur.Load(); p != nil && c.now().Sub(p.Read) <= c.refresh {
			return
		}
		if _, err := c.read(ctx); err != nil {
			c.log.Warn("reading roles and bindings failed; decisions use the last read while it is recent enough", "error", err)
		}
	}()
}

// read reads the roles and bindings once, under c.mu.
func (c *Cache) read(ctx context.Context) (*Policy, error) {
	started := c.now()
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	objs, err := c.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("read roles and bindings: %w", err)
	}
	p, errs := NewPolicy(objs, c.reconcilerTypes)
	for _, err := range errs {
		c.log.Warn("a role or binding is left out", "error", err)
	}
	p.Read = started
	c.cur.Store(p)
	return p, nil
}
