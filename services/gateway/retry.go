package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/no8s/no8s/services/internal/problem"
)

// Pauses between the attempts of a write that lost a race: from
// raceBackoffBase doubling to raceBackoffMax, each drawn at random from
// its upper half so that racing writers fall out of step.
const (
	raceBackoffBase = 2 * time.Millisecond
	raceBackoffMax  = 250 * time.Millisecond
)

// raceRetry paces a write without a precondition: server-side apply, and a
// PATCH, DELETE or webhook change that names no resource_version. Such a
// write reads the current state and stores its change conditionally on it;
// when another writer got in between (409 conflict), it is made again
// against the newer state. The client asked for an outcome, not for a
// particular version, so losing a race it could not see is not its error,
// however many writers race: a fixed small number of attempts would fail
// clients exactly when a resource is busiest. Attempts go on until the
// request's deadline (RequestTimeout after the write began, or the
// client's own, when sooner) and stop at once when the client goes away.
type raceRetry struct {
	ctx      context.Context
	start    time.Time
	deadline time.Time
	attempts int
}

// raceRetry starts pacing one write of the request whose context is ctx.
func (s *Service) raceRetry(ctx context.Context) *raceRetry {
	now := time.Now()
	deadline := now.Add(s.cfg.RequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return &raceRetry{ctx: ctx, start: now, deadline: deadline, attempts: 1}
}

// again is called after an attempt lost a race with lost: it pauses and
// returns nil for another attempt, or the error to answer when the
// deadline leaves no room for one (lost, saying how long the write tried)
// or the client went away.
func (r *raceRetry) again(lost error) error {
	d := min(raceBackoffBase<<min(r.attempts-1, 16), raceBackoffMax)
	pause := d/2 + rand.N(d/2+1)
	if time.Now().Add(pause).After(r.deadline) {
		return r.gaveUp(lost)
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-t.C:
	}
	r.attempts++
	return nil
}

// gaveUp is the answer of a write that kept losing races until its
// deadline: the last conflict, saying so.
func (r *raceRetry) gaveUp(err error) error {
	pe := problem.As(err)
	if pe == nil {
		return err
	}
	out := *pe
	out.Detail = fmt.Sprintf("%s; other writers kept changing it for %s (%d attempts)", pe.Detail, time.Since(r.start).Round(time.Millisecond), r.attempts)
	return &out
}
