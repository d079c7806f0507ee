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

	"github.com/no8s/no8s/libs/sdk/health"
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
	cctx, cancel := context.WithTimeout(ctx, health.DefaultTimeout)
	resp, err := healthpb.NewHealthClient(k.conn).Check(cctx, &healthpb.HealthCheckRequest{})
	cancel()
	if ctx.Err() != nil {
		return
	}
	var storeErr, serving error
	switch code := status.Code(err); {
	case err == nil:
		if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
			serving = fmt.Errorf("store worker address %s answers but is not serving (%s): the store cannot reach its database", k.addr, s)
		}
	case code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Canceled:
		storeErr = fmt.Errorf("store worker address %s unreachable: %w", k.addr, err)
	default:
		// It answered (without the health service, for instance).
	}
	var natsErr error
	if k.nc != nil && !k.nc.IsConnected() {
		natsErr = fmt.Errorf("nats %s: not connected (%s)", natsServers(k.nc), k.nc.Status())
	}

	k.mu.Lock()
	first := !k.checked
	wasStore, wasServing, wasNATS := k.storeErr, k.serving, k.natsErr
	k.checked, k.storeErr, k.serving, k.natsErr = true, storeErr, serving, natsErr
	changed := first || (wasStore == nil) != (storeErr == nil) || (wasServing == nil) != (serving == nil) || (wasNATS == nil) != (natsErr == nil)
	since := k.since
	if storeErr != nil {
		k.failures++
		if wasStore == nil {
			k.since = time.Now()
		}
	} else {
		k.failures = 0
	}
	failures := k.failures
	if changed {
		close(k.changed)
		k.changed = make(chan struct{})
	}
	k.mu.Unlock()

	switch {
	case storeErr != nil && (first || wasStore == nil):
		k.log.Warn("store worker address unreachable: not ready, and not registered, until it answers",
			"store_addr", k.addr, "error", storeErr)
	case storeErr != nil:
		k.log.Debug("store worker address still unreachable", "store_addr", k.addr, "failures", failures, "error", storeErr)
	case wasStore != nil:
		k.log.Info("store worker address reachable again", "store_addr", k.addr, "after", time.Since(since).Round(time.Millisecond))
	}
	switch {
	case serving != nil && (first || wasServing == nil):
		k.log.Warn("store answers but is not serving: not ready until it is", "store_addr", k.addr, "error", serving)
	case serving == nil && wasServing != nil:
		k.log.Info("store serving again", "store_addr", k.addr)
	}
	switch {
	case natsErr != nil && (first || wasNATS == nil):
		k.log.Warn("nats unreachable: not ready until it answers", "nats", natsServers(k.nc), "error", natsErr)
	case natsErr != nil:
		k.log.Debug("nats still unreachable", "nats", natsServers(k.nc))
	case natsErr == nil && wasNATS != nil:
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
