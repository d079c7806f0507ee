// Package scheduler is the scheduler service: it decides which resources
// need a reconcile and when (generation drift, deletion, manual triggers,
// the reconcile annotation, resync, retries with backoff, requeues) and
// dispatches work items on NO8S_RECONCILE, at most one outstanding item per
// resource. One process leads at a time (a lease with a fencing epoch in the
// store); standbys campaign and take over within Lease + Renew. A new leader
// rebuilds its state from the store and follows NO8S_EVENTS from then on.
// See docs/design/reconcile.md.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	apiclient "github.com/no8s/no8s/libs/client"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/leader"
	"github.com/no8s/no8s/services/scheduler/dispatch"
)

// Service is a scheduler process: a leader or a standby.
type Service struct {
	cfg Config
	rc  reconcilev1.ReconcileServiceClient
	js  jetstream.JetStream
	log *slog.Logger

	mu     sync.Mutex
	status Status
	// dispatched counts published work items.
	dispatched atomic.Int64
	// foreign counts event messages dropped as not the store's.
	foreign atomic.Int64
	metrics *schedMetrics
	// api is the collector's client of the public API (nil: no collector).
	api *apiclient.Client
}

// Status is a snapshot of the scheduler.
type Status struct {
	// Leader is true while this process leads.
	Leader bool
	// Epoch is the current or last leader epoch this process held.
	Epoch int64
	// Since is when the current term began.
	Since time.Time
	// Ready is true once the leader rebuilt its state.
	Ready bool
	// Tracked is the number of resources the leader knows.
	Tracked int
	// Dispatched counts every work item this process published.
	Dispatched int64
	// Foreign counts the messages in the event stream this process dropped
	// because the store did not publish them (eventstream.Check).
	Foreign int64
}

// New returns a scheduler over the store's ReconcileService and JetStream.
func New(cfg Config, rc reconcilev1.ReconcileServiceClient, js jetstream.JetStream, log *slog.Logger) (*Service, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, rc: rc, js: js, log: log.With("holder", cfg.Holder)}
	s.metrics = newSchedMetrics(cfg.Metrics, s)
	if cfg.GarbageCollector {
		// Writes are not retried by the client: the next pass is the retry.
		s.api, err = apiclient.New(cfg.APIURL, apiclient.WithTimeout(cfg.CallTimeout), apiclient.WithRetries(0),
			apiclient.WithUserAgent("no8s-garbage-collector"), apiclient.WithHTTPClient(authz.GatewayHTTPClient(cfg.Identity, cfg.APIURL)))
		if err != nil {
			return nil, fmt.Errorf("scheduler: --api-url: %w", err)
		}
	}
	return s, nil
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

// Status returns a snapshot.
func (s *Service) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Dispatched = s.dispatched.Load()
	st.Foreign = s.foreign.Load()
	return st
}

func (s *Service) setStatus(f func(*Status)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.status)
}

// Run campaigns for leadership and leads whenever elected, until ctx ends;
// then it finishes the term in progress and releases the lease so that a
// standby takes over at once.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("scheduler starting", "lease", s.cfg.Lease, "renew", s.cfg.Renew, "item_lease", s.cfg.ItemLease)
	var gcDone chan error
	if s.api != nil {
		gcDone = make(chan error, 1)
		go func() { gcDone <- s.runCollector(ctx) }()
	}
	el := leader.New(storeLease{rc: s.rc, holder: s.cfg.Holder, lease: s.cfg.Lease}, leader.Config{Lease: s.cfg.Lease, Renew: s.cfg.Renew}, s.log)
	err := el.Run(ctx, s.lead)
	if gcDone != nil {
		err = errors.Join(err, <-gcDone)
	}
	s.log.Info("scheduler stopped")
	return err
}

// lead runs one term. The state is rebuilt within the term, without
// giving up the lease, when the loop asks for it (errRebuild: the NATS
// connection came back, and a restarted broker may have lost the work
// stream, its items and the event consumer).
func (s *Service) lead(ctx context.Context, t *leader.Term) error {
	s.setStatus(func(st *Status) { *st = Status{Leader: true, Epoch: t.Epoch, Since: t.Since} })
	defer s.setStatus(func(st *Status) { st.Leader, st.Ready = false, false })
	defer s.metrics.snap.Store(nil)
	var lastRebuild time.Time
	for {
		stream, err := s.workStream(ctx)
		if err != nil {
			return nil // ctx ended
		}
		err = newLoop(s, t, stream).run(ctx)
		if !errors.Is(err, errRebuild) || ctx.Err() != nil {
			return err
		}
		s.log.Info("rebuilding the scheduler state", "reason", err)
		s.setStatus(func(st *Status) { st.Ready = false })
		// Rebuilds in quick succession (an event stream that keeps
		// failing) are spaced by RetryDelay.
		if time.Since(lastRebuild) < 5*s.cfg.RetryDelay && !sleep(ctx, s.cfg.RetryDelay) {
			return nil
		}
		lastRebuild = time.Now()
	}
}

// workStream ensures NO8S_RECONCILE, retrying until ctx ends.
func (s *Service) workStream(ctx context.Context) (jetstream.Stream, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		stream, err := dispatch.Ensure(cctx, s.js, s.cfg.Stream)
		cancel()
		if err == nil {
			return stream, nil
		}
		s.log.Warn("work stream not available; retrying", "error", err)
		if !sleep(ctx, s.cfg.RetryDelay) {
			return nil, ctx.Err()
		}
	}
}

// storeLease is the leadership lease in the store.
type storeLease struct {
	rc     reconcilev1.ReconcileServiceClient
	holder string
	lease  time.Duration
}

func (l storeLease) Campaign(ctx context.Context, epoch int64) (leader.Grant, error) {
	resp, err := l.rc.BecomeScheduler(ctx, &reconcilev1.BecomeSchedulerRequest{
		Holder: l.holder, LeaseSeconds: int32(l.lease / time.Second), Epoch: epoch,
	})
	if err != nil {
		return leader.Grant{}, err
	}
	return leader.Grant{Leader: resp.GetLeader(), Epoch: resp.GetEpoch(), Holder: resp.GetCurrentHolder()}, nil
}

func (l storeLease) Release(ctx context.Context, epoch int64) error {
	_, err := l.rc.BecomeScheduler(ctx, &reconcilev1.BecomeSchedulerRequest{Holder: l.holder, Epoch: epoch, Release: true})
	return err
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// errLeaseLost: the term's lease could not be confirmed before an action.
var errLeaseLost = errors.New("scheduler lease not confirmed")

// errRebuild ends a loop so that the term starts a new one from the store.
var errRebuild = errors.New("scheduler state must be rebuilt")
