package scheduler

// The garbage collector (package collector) runs in the scheduler process
// as a leader of its own: the lease garbage-collector, campaigned for
// through the store's ReconcileService, whose epoch fences every write it
// sends through the gateway (docs/design/relationships.md).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/api/subjects"
	apiclient "github.com/no8s/no8s/libs/client"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/leader"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/scheduler/collector"
)

// runCollector campaigns for the collector's lease and collects while it
// leads, until ctx ends.
func (s *Service) runCollector(ctx context.Context) error {
	log := s.log.With("component", "garbage-collector")
	el := leader.New(collectorLease{rc: s.rc, holder: s.cfg.Holder, lease: s.cfg.Lease},
		leader.Config{Lease: s.cfg.Lease, Renew: s.cfg.Renew, Name: "garbage collector"}, log)
	return el.Run(ctx, func(ctx context.Context, t *leader.Term) error {
		c := collector.New(grpcOwners{rc: s.rc, timeout: s.cfg.CallTimeout}, &restWriter{api: s.api, term: t}, 0, log)
		return s.collect(ctx, t, c)
	})
}

// collect runs one term: a full pass at once (the sweep, then the owners
// deleting with a propagation finalizer), again at every GCSweep and when
// the backoff of a write admission refused runs out; between them, the
// event stream's hints drive passes of their own: the dependents of each
// purged resource (OwnerPurged, through the owner index), then the owners
// deleting with a propagation finalizer. Hints that arrive during a pass
// gather into the next.
func (s *Service) collect(ctx context.Context, t *leader.Term, c *collector.Collector) error {
	h := newHints()
	go s.followHints(ctx, h)
	tick := time.NewTicker(s.cfg.GCSweep)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	full := true
	for {
		var err error
		if full {
			err = s.gcPass(ctx, c)
		} else {
			err = s.hintPass(ctx, c, h.take())
		}
		if errors.Is(err, leader.ErrStale) {
			return err
		} else if err != nil && ctx.Err() == nil {
			// The next full pass finds what this one could not do.
			s.log.Warn("garbage collection pass failed; retrying at the next sweep or hint", "error", err, "epoch", t.Epoch)
		}
		retry.Stop()
		var due <-chan time.Time
		if at, ok := c.NextRetry(); ok {
			retry.Reset(time.Until(at))
			due = retry.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			full = true
		case <-due:
			full = true
		case <-h.wake:
			full = false
		}
	}
}

// hints gathers what the event stream said since the last pass: the uids
// of purged resources, and whether any resource was deleted or purged.
type hints struct {
	wake   chan struct{}
	mu     sync.Mutex
	purged map[string]struct{}
}

func newHints() *hints {
	return &hints{wake: make(chan struct{}, 1), purged: map[string]struct{}{}}
}

// add records an event of typ on the resource uid and wakes the collector.
func (h *hints) add(typ, uid string) {
	if typ == eventstream.Purged && uid != "" {
		h.mu.Lock()
		h.purged[uid] = struct{}{}
		h.mu.Unlock()
	}
	select {
	case h.wake <- struct{}{}:
	default: // a pass is due already
	}
}

// take returns the purged uids gathered since the last take.
func (h *hints) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.purged))
	for uid := range h.purged {
		out = append(out, uid)
	}
	clear(h.purged)
	return out
}

// hintPass collects the dependents of the purged resources, then advances
// the owners deleting with a propagation finalizer (a DELETED event may
// have been an owner's, or a Foreground dependent's going). Each reads the
// store as it is now: the events are hints.
func (s *Service) hintPass(ctx context.Context, c *collector.Collector, purged []string) error {
	for _, uid := range purged {
		if _, err := c.OwnerPurged(ctx, uid); err != nil {
			return err
		}
	}
	return s.propagatePass(ctx, c)
}

// gcPass sweeps the dangling dependents, then advances every owner deleting
// with a propagation finalizer. It reads the store as it is now.
func (s *Service) gcPass(ctx context.Context, c *collector.Collector) error {
	if _, err := c.Sweep(ctx); err != nil {
		return err
	}
	return s.propagatePass(ctx, c)
}

// propagatePass advances every owner deleting with a propagation
// finalizer.
func (s *Service) propagatePass(ctx context.Context, c *collector.Collector) error {
	var after int64
	for {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		resp, err := s.rc.ListPropagating(cctx, &reconcilev1.ListPropagatingRequest{AfterId: after})
		cancel()
		if err != nil {
			return fmt.Errorf("list owners deleting with propagation: %w", err)
		}
		for _, p := range resp.GetResources() {
			if _, err := c.Propagate(ctx, resourcepb.FromProto(p)); err != nil {
				return err
			}
			after = p.GetId()
		}
		if len(resp.GetResources()) == 0 {
			return nil
		}
	}
}

// followHints records a hint for every DELETED and PURGED event from now
// on, until ctx ends; a consumer that fails is opened again (what it
// missed meanwhile, the next sweep finds). Events are hints only (the pass
// reads the store), so provenance is not checked here.
func (s *Service) followHints(ctx context.Context, h *hints) {
	for ctx.Err() == nil {
		err := s.hintsOnce(ctx, h)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("garbage collector: event stream lost; following it again", "error", err)
		if !sleep(ctx, s.cfg.RetryDelay) {
			return
		}
	}
}

func (s *Service) hintsOnce(ctx context.Context, h *hints) error {
	cons, err := s.js.OrderedConsumer(ctx, subjects.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.EventsAll}, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			return err
		}
		ev, err := eventstream.DecodeHead(msg.Data())
		if err != nil || (ev.Type != eventstream.Purged && ev.Type != eventstream.Deleted) {
			continue
		}
		h.add(ev.Type, ev.ResourceUID)
	}
}

// collectorLease is the collector's leader lease in the store.
type collectorLease struct {
	rc     reconcilev1.ReconcileServiceClient
	holder string
	lease  time.Duration
}

func (l collectorLease) Campaign(ctx context.Context, epoch int64) (leader.Grant, error) {
	resp, err := l.rc.CampaignCollector(ctx, &reconcilev1.CampaignCollectorRequest{
		Holder: l.holder, LeaseSeconds: int32(l.lease / time.Second), Epoch: epoch,
	})
	if err != nil {
		return leader.Grant{}, err
	}
	return leader.Grant{Leader: resp.GetLeader(), Epoch: resp.GetEpoch(), Holder: resp.GetCurrentHolder()}, nil
}

func (l collectorLease) Release(ctx context.Context, epoch int64) error {
	_, err := l.rc.CampaignCollector(ctx, &reconcilev1.CampaignCollectorRequest{Holder: l.holder, Epoch: epoch, Release: true})
	return err
}

// grpcOwners is the collector's Reader: the store's ReconcileService.
type grpcOwners struct {
	rc      reconcilev1.ReconcileServiceClient
	timeout time.Duration
}

func (g grpcOwners) Dependents(ctx context.Context, uid string, after int64, limit int) ([]*resource.Resource, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	resp, err := g.rc.ListDependents(ctx, &reconcilev1.ListDependentsRequest{OwnerUid: uid, AfterId: after, Limit: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]*resource.Resource, 0, len(resp.GetResources()))
	for _, r := range resp.GetResources() {
		out = append(out, resourcepb.FromProto(r))
	}
	return out, nil
}

func (g grpcOwners) Dangling(ctx context.Context, after int64, limit int) ([]collector.Dangling, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	resp, err := g.rc.ListDangling(ctx, &reconcilev1.ListDanglingRequest{AfterId: after, Limit: int32(limit)})
	if err != nil {
		return nil, 0, err
	}
	out := make([]collector.Dangling, 0, len(resp.GetItems()))
	for _, d := range resp.GetItems() {
		out = append(out, collector.Dangling{Resource: resourcepb.FromProto(d.GetResource()), Refs: resourcepb.OwnerReferencesFromProto(d.GetRefs())})
	}
	return out, resp.GetNext(), nil
}

// restWriter is the collector's Writer: the public API, as a client, each
// write fenced by the term's epoch. A write the gateway refuses for a
// stale epoch ends the term (leader.ErrStale); one that finds the resource
// gone is skipped (collector.ErrSkip), one that finds it changed is judged
// again (collector.ErrConflict); one a webhook denies (or fails) is refused
// (collector.ErrDenied).
type restWriter struct {
	api  *apiclient.Client
	term *leader.Term
}

func (w *restWriter) fenced(op func(opts ...apiclient.CallOption) error) error {
	if !w.term.Valid() {
		return fmt.Errorf("garbage collector deposed: %w", leader.ErrStale)
	}
	err := op(apiclient.WithHeader(fence.HeaderLease, fence.GarbageCollectorLease),
		apiclient.WithHeader(fence.HeaderEpoch, strconv.FormatInt(w.term.Epoch, 10)))
	switch e := apiclient.AsError(err); {
	case err == nil:
		return nil
	case e != nil && e.Code == apiclient.CodeStaleEpoch:
		return fmt.Errorf("garbage collector deposed: %s: %w", e.Detail, leader.ErrStale)
	case apiclient.IsNotFound(err):
		return fmt.Errorf("%w: %w", collector.ErrSkip, err)
	case apiclient.IsConflict(err):
		return fmt.Errorf("%w: %w", collector.ErrConflict, err)
	case e != nil && (e.Code == apiclient.CodeDenied || e.Code == apiclient.CodeWebhookFailed):
		return fmt.Errorf("%w: %s", collector.ErrDenied, e.Detail)
	}
	return err
}

// Warn records a Warning Event on r, from the garbage collector. It is not
// fenced: an Event from a collector deposed a moment ago is still true.
func (w *restWriter) Warn(ctx context.Context, r *resource.Resource, reason, message string) error {
	_, err := w.api.RecordEvent(ctx, r.ID, apiclient.EventRecordCreate{Type: names.EventWarning, Reason: reason, Message: message, Source: fence.GarbageCollectorLease})
	return err
}

func (w *restWriter) Delete(ctx context.Context, r *resource.Resource, p lifecycle.Propagation) error {
	return w.fenced(func(opts ...apiclient.CallOption) error {
		_, err := w.api.DeleteResource(ctx, r.ID, append(opts, apiclient.WithPropagation(p), apiclient.IfResourceVersion(r.ResourceVersion))...)
		return err
	})
}

func (w *restWriter) SetOwnerReferences(ctx context.Context, r *resource.Resource, refs []resource.OwnerReference) error {
	if refs == nil {
		refs = []resource.OwnerReference{}
	}
	patch, err := json.Marshal(map[string]any{"owner_references": refs, "resource_version": r.ResourceVersion})
	if err != nil {
		return fmt.Errorf("owner references patch: %w", err)
	}
	return w.fenced(func(opts ...apiclient.CallOption) error {
		_, err := w.api.PatchResource(ctx, r.ID, patch, opts...)
		return err
	})
}

func (w *restWriter) RemoveFinalizer(ctx context.Context, r *resource.Resource, f string) error {
	return w.fenced(func(opts ...apiclient.CallOption) error {
		_, err := w.api.UpdateFinalizers(ctx, r.ID, apiclient.FinalizersUpdate{Remove: []string{f}}, opts...)
		return err
	})
}
