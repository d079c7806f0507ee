// Package leader runs the leader election of a singleton (the scheduler,
// registry-sync): a lease with a fencing epoch held in the store
// (HARD-PARTS 3). A process campaigns until
// it is granted the lease, then runs its term until the lease is lost; the
// term's context ends the moment the process can no longer prove that it
// holds the lease, and Term.Valid lets the term check that before each
// action. The store refuses every write fenced by a stale epoch, so a leader
// that paused past its lease acts on nothing when it resumes.
package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Grant is the store's answer to a campaign.
type Grant struct {
	Leader bool
	Epoch  int64
	// Holder is the current leader.
	Holder string
}

// Store is the lease in the store.
type Store interface {
	// Campaign takes or renews the lease; epoch is the one held so far (0
	// when campaigning afresh).
	Campaign(ctx context.Context, epoch int64) (Grant, error)
	// Release gives up the lease of epoch (graceful stop).
	Release(ctx context.Context, epoch int64) error
}

// Config tunes the election.
type Config struct {
	// Lease is the lease's length.
	Lease time.Duration
	// Renew is how often a leader renews and a standby campaigns.
	Renew time.Duration
	// Name names the singleton in log lines ("scheduler" when empty).
	Name string
}

// Term is one stretch of leadership.
type Term struct {
	// Epoch is the fencing token: the store refuses writes presenting an
	// older one.
	Epoch int64
	// Since is when the lease was granted.
	Since time.Time

	mu    sync.Mutex
	until time.Time
}

// Valid reports whether the lease is still known to be held: the last
// successful renewal was sent less than one lease ago (monotonic clock; a
// process stopped past its lease finds its term invalid when it resumes).
func (t *Term) Valid() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Now().Before(t.until)
}

// ValidUntil is when the term stops being valid unless renewed.
func (t *Term) ValidUntil() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.until
}

func (t *Term) extend(until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if until.After(t.until) {
		t.until = until
	}
}

// ErrStale is returned by a term that found its epoch stale: the elector
// ends the term and campaigns again.
var ErrStale = errors.New("leader: epoch is stale")

// Elector campaigns for the lease and runs terms.
type Elector struct {
	store Store
	cfg   Config
	log   *slog.Logger
}

// New returns an elector.
func New(store Store, cfg Config, log *slog.Logger) *Elector {
	if cfg.Renew <= 0 {
		cfg.Renew = cfg.Lease / 3
	}
	if cfg.Name == "" {
		cfg.Name = "scheduler"
	}
	return &Elector{store: store, cfg: cfg, log: log}
}

// Run campaigns until ctx ends. Each time the lease is granted it runs lead
// with a context that ends when the lease is lost (a renewal refused, or not
// confirmed within the lease) or when ctx ends; it waits for lead to return
// before campaigning again. On the way out it releases a held lease so that
// a standby takes over at once.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, t *Term) error) error {
	var epoch int64 // the epoch to present: the last one held
	standbyLogged := ""
	for {
		sent := time.Now()
		g, err := e.campaign(ctx, epoch, sent.Add(e.cfg.Renew))
		if ctx.Err() != nil {
			// Stopping while a campaign was answered: a lease it won
			// is given up like one held.
			if err == nil && g.Leader {
				e.release(ctx, g.Epoch)
			}
			return nil
		}
		switch {
		case err != nil:
			e.log.Warn(e.cfg.Name+" campaign failed", "error", err)
		case !g.Leader:
			epoch = 0
			if standbyLogged != g.Holder {
				e.log.Info(e.cfg.Name+" standby", "leader", g.Holder, "epoch", g.Epoch)
				standbyLogged = g.Holder
			}
		default:
			standbyLogged = ""
			t := &Term{Epoch: g.Epoch, Since: sent, until: sent.Add(e.cfg.Lease)}
			epoch = g.Epoch
			e.log.Info(e.cfg.Name+" leader", "epoch", g.Epoch)
			stale := e.runTerm(ctx, t, lead)
			if ctx.Err() != nil {
				e.release(ctx, t.Epoch)
				return nil
			}
			if stale {
				epoch = 0
			}
			e.log.Info(e.cfg.Name+" term ended", "epoch", t.Epoch)
			sent = time.Now() // campaign again one interval after the term, not at once
		}
		if !sleep(ctx, time.Until(sent.Add(e.cfg.Renew))) {
			return nil
		}
	}
}

// campaign calls the store with a deadline. The call is not cancelled
// with ctx: a stop during it waits for the answer (within the deadline),
// so that a lease the store granted meanwhile is known and released rather
// than left to expire with no leader.
func (e *Elector) campaign(ctx context.Context, epoch int64, deadline time.Time) (Grant, error) {
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	return e.store.Campaign(cctx, epoch)
}

// release gives up the lease of epoch on the way out, within one renew
// interval.
func (e *Elector) release(ctx context.Context, epoch int64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Renew)
	defer cancel()
	if err := e.store.Release(rctx, epoch); err != nil {
		e.log.Warn(e.cfg.Name+" lease release failed", "epoch", epoch, "error", err)
		return
	}
	e.log.Info(e.cfg.Name+" lease released", "epoch", epoch)
}

// runTerm runs lead and renews the lease beside it until the lease is lost,
// lead returns, or ctx ends. It reports whether the epoch was found stale.
func (e *Elector) runTerm(ctx context.Context, t *Term, lead func(context.Context, *Term) error) (stale bool) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- lead(tctx, t) }()
	renew := time.NewTimer(e.cfg.Renew)
	defer renew.Stop()
	expiry := time.NewTimer(time.Until(t.ValidUntil()))
	defer expiry.Stop()
	end := func(why string, args ...any) {
		e.log.Warn(e.cfg.Name+" leadership lost: "+why, append([]any{"epoch", t.Epoch}, args...)...)
		cancel()
		<-done
	}
	for {
		select {
		case <-ctx.Done():
			cancel()
			<-done
			return false
		case err := <-done:
			if errors.Is(err, ErrStale) {
				e.log.Warn(e.cfg.Name+" epoch found stale; stopping at once", "epoch", t.Epoch)
				return true
			}
			if err != nil && ctx.Err() == nil {
				e.log.Error(e.cfg.Name+" term failed", "epoch", t.Epoch, "error", err)
			}
			return false
		case <-expiry.C:
			if !t.Valid() {
				end("the lease was not renewed in time")
				return false
			}
			expiry.Reset(time.Until(t.ValidUntil()))
		case <-renew.C:
			sent := time.Now()
			g, err := e.campaign(tctx, t.Epoch, t.ValidUntil())
			switch {
			case err != nil:
				e.log.Warn(e.cfg.Name+" lease renewal failed", "epoch", t.Epoch, "error", err)
				if !t.Valid() {
					end("renewals failed for a whole lease")
					return false
				}
			case !g.Leader || g.Epoch != t.Epoch:
				end("deposed", "leader", g.Holder, "new_epoch", g.Epoch)
				return true
			default:
				t.extend(sent.Add(e.cfg.Lease))
				expiry.Reset(time.Until(t.ValidUntil()))
			}
			renew.Reset(time.Until(sent.Add(e.cfg.Renew)))
		}
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
