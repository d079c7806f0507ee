package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/platform/health"
)

// DefaultLinkCheck is how often a worker checks that it reaches the store's
// worker address and NATS.
const DefaultLinkCheck = time.Second

// link is the worker's view of its two dependencies: the store's worker
// address and NATS. A goroutine (watch) checks both every interval; a
// change of state is logged once (WARN when one becomes unreachable, INFO
// when it answers again; the checks in between log at DEBUG) and wakes
// whoever waits on changed.
type link struct {
	addr     string
	conn     grpc.ClientConnInterface
	nc       *nats.Conn
	log      *slog.Logger
	interval time.Duration

	mu       sync.Mutex
	checked  bool
	storeErr error // the store's worker address cannot be reached
	serving  error // the store answers but reports not serving
	natsErr  error
	since    time.Time // when the current store failure began
	failures int       // checks failed in a row
	changed  chan struct{}
}

func newLink(conn grpc.ClientConnInterface, nc *nats.Conn, interval time.Duration, log *slog.Logger) *link {
	addr := "the store's worker address"
	if t, ok := conn.(interface{ Target() string }); ok && t.Target() != "" {
		addr = t.Target()
	}
	return &link{addr: addr, conn: conn, nc: nc, log: log, interval: interval, changed: make(chan struct{})}
}

// storeDown returns why the store's worker address cannot be reached, or
// nil; before the first check it is "not checked yet".
func (k *link) storeDown() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.checked {
		return fmt.Errorf("store worker address %s: not checked yet", k.addr)
	}
	return k.storeErr
}

// readiness returns the store's and NATS's readiness errors (nil: ready).
func (k *link) readiness() (store, nc error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case !k.checked:
		store = fmt.Errorf("store worker address %s: not checked yet", k.addr)
	case k.storeErr != nil:
		store = k.storeErr
	default:
		store = k.serving
	}
	return store, k.natsErr
}

// wait returns a channel closed at the next change of state.
func (k *link) wait() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.changed
}

// waitUsable waits until the store's worker address and NATS both answer,
// or ctx ends.
func (k *link) waitUsable(ctx context.Context) error {
	for {
		ch := k.wait()
		k.mu.Lock()
		usable := k.checked && k.storeErr == nil && k.natsErr == nil
		k.mu.Unlock()
		if usable {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// watch checks every interval until ctx ends.
func (k *link) watch(ctx context.Context) {
	t := time.NewTicker(k.interval)
	defer t.Stop()
	for {
		k.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check checks both once and records the outcome.
func (k *link) check(ctx context.Context) {
	now, ok := k.probeStore(ctx)
	if !ok {
		return
	}
	now.nats = k.probeNATS()
	t := k.record(now)
	k.logStore(t)
	k.logServing(t)
	k.logNATS(t)
}

// linkState is the outcome of one check: why the store's worker address
// cannot be reached, why the store answers but does not serve, and why NATS
// cannot be reached (nil: fine).
type linkState struct{ store, serving, nats error }

// linkChange is a check's outcome beside the one before it: first for
// the first check; failures are the store checks failed in a row, since
// when the store failure before this check began.
type linkChange struct {
	now, was linkState
	first    bool
	failures int
	since    time.Time
}

// probeStore asks the store's health service; ok is false when ctx ended
// meanwhile (the outcome then says nothing).
func (k *link) probeStore(ctx context.Context) (st linkState, ok bool) {
	cctx, cancel := context.WithTimeout(ctx, health.DefaultTimeout)
	resp, err := healthpb.NewHealthClient(k.conn).Check(cctx, &healthpb.HealthCheckRequest{})
	cancel()
	if ctx.Err() != nil {
		return st, false
	}
	switch code := status.Code(err); {
	case err == nil:
		if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
			st.serving = fmt.Errorf("store worker address %s answers but is not serving (%s): the store cannot reach its database", k.addr, s)
		}
	case code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Canceled:
		st.store = fmt.Errorf("store worker address %s unreachable: %w", k.addr, err)
	default:
		// It answered (without the health service, for instance).
	}
	return st, true
}

// probeNATS returns why NATS is not connected (nil when it is, or when
// the worker has no connection).
func (k *link) probeNATS() error {
	if k.nc != nil && !k.nc.IsConnected() {
		return fmt.Errorf("nats %s: not connected (%s)", natsServers(k.nc), k.nc.Status())
	}
	return nil
}

// record stores now as the link's state, waking whoever waits on changed
// when a dependency changed state, and returns the change.
func (k *link) record(now linkState) linkChange {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := linkChange{now: now, was: linkState{store: k.storeErr, serving: k.serving, nats: k.natsErr}, first: !k.checked, since: k.since}
	k.checked, k.storeErr, k.serving, k.natsErr = true, now.store, now.serving, now.nats
	if now.store != nil {
		k.failures++
		if c.was.store == nil {
			k.since = time.Now()
		}
	} else {
		k.failures = 0
	}
	c.failures = k.failures
	if c.first || (c.was.store == nil) != (now.store == nil) || (c.was.serving == nil) != (now.serving == nil) || (c.was.nats == nil) != (now.nats == nil) {
		close(k.changed)
		k.changed = make(chan struct{})
	}
	return c
}

// logStore logs a change of the store's reachability (WARN, INFO), and a
// failure that goes on at DEBUG.
func (k *link) logStore(c linkChange) {
	switch {
	case c.now.store != nil && (c.first || c.was.store == nil):
		k.log.Warn("store worker address unreachable: not ready, and not registered, until it answers",
			"store_addr", k.addr, "error", c.now.store)
	case c.now.store != nil:
		k.log.Debug("store worker address still unreachable", "store_addr", k.addr, "failures", c.failures, "error", c.now.store)
	case c.was.store != nil:
		k.log.Info("store worker address reachable again", "store_addr", k.addr, "after", time.Since(c.since).Round(time.Millisecond))
	}
}

// logServing logs a change of whether the store serves.
func (k *link) logServing(c linkChange) {
	switch {
	case c.now.serving != nil && (c.first || c.was.serving == nil):
		k.log.Warn("store answers but is not serving: not ready until it is", "store_addr", k.addr, "error", c.now.serving)
	case c.now.serving == nil && c.was.serving != nil:
		k.log.Info("store serving again", "store_addr", k.addr)
	}
}

// logNATS logs a change of NATS's reachability (WARN, INFO), and a
// failure that goes on at DEBUG.
func (k *link) logNATS(c linkChange) {
	switch {
	case c.now.nats != nil && (c.first || c.was.nats == nil):
		k.log.Warn("nats unreachable: not ready until it answers", "nats", natsServers(k.nc), "error", c.now.nats)
	case c.now.nats != nil:
		k.log.Debug("nats still unreachable", "nats", natsServers(k.nc))
	case c.now.nats == nil && c.was.nats != nil:
		k.log.Info("nats reachable again", "nats", natsServers(k.nc))
	}
}

// natsServers names the servers of nc: the connected one, else the ones
// it tries.
func natsServers(nc *nats.Conn) string {
	if nc == nil {
		return "(no connection)"
	}
	if u := nc.ConnectedUrlRedacted(); u != "" {
		return u
	}
	var out []string
	for _, s := range nc.Servers() {
		if u, err := url.Parse(s); err == nil {
			u.User = nil // no credentials in logs and probes
			out = append(out, u.String())
		}
	}
	if len(out) == 0 {
		return "(no server)"
	}
	return strings.Join(out, ",")
}
