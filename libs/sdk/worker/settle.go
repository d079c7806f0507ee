package worker

import (
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// stage is how far an item got.
type stage int

const (
	// stageDecode: the message is not a WorkItem.
	stageDecode stage = iota + 1
	// stageAcquire: AcquireLease was refused or failed (err).
	stageAcquire
	// stageRun: the reconciler ran (report).
	stageRun
	// stageNotStarted: fetched, but the worker was stopping.
	stageNotStarted
	// stageAbandoned: still running when shutdown gave up on it.
	stageAbandoned
)

// outcome is what happened to one item, the input of settle.
type outcome struct {
	stage  stage
	err    error       // stageDecode, stageAcquire
	report wire.Report // stageRun
	// deliveries is the message's delivery count (1 on the first).
	deliveries uint64
}

// verb is a broker action.
type verb int

const (
	ack verb = iota + 1
	nak
	term
)

func (v verb) String() string {
	switch v {
	case ack:
		return "ack"
	case nak:
		return "nak"
	case term:
		return "term"
	}
	return "none"
}

// action is what to do with a message.
type action struct {
	verb  verb
	delay time.Duration // for nak: 0 redelivers at once
	why   string
}

// Delays of naks.
const (
	minRetryDelay = time.Second
	maxRetryDelay = 30 * time.Second
	// maxUnavailableDelay caps the naks of a store that could not reach
	// its database: the outage ends on its own, and the item should run
	// within seconds of its end, not after a delay grown during it.
	maxUnavailableDelay = 2 * time.Second
)

// settle maps the outcome of one item onto the broker. It is the only place
// that decides between Ack, NakWithDelay and Term (InProgress is sent by the
// keepalive while an attempt runs). See the table in the package doc.
func settle(o outcome, lease time.Duration) action {
	switch o.stage {
	case stageDecode:
		return action{verb: term, why: "not a work item"}
	case stageNotStarted:
		return action{verb: nak, why: "worker stopping before the attempt started"}
	case stageAbandoned:
		return action{verb: nak, why: "worker stopped before the attempt finished"}
	case stageAcquire:
		switch {
		case errors.Is(o.err, wire.ErrLeaseHeld):
			// Another attempt is running: come back once it can be over.
			return action{verb: nak, delay: backoff(o.deliveries, 2*time.Second, lease), why: "lease held by another worker"}
		case errors.Is(o.err, wire.ErrStaleDispatch):
			return action{verb: term, why: "stale dispatch"}
		case errors.Is(o.err, wire.ErrNotFound):
			return action{verb: term, why: "resource gone"}
		case errors.Is(o.err, wire.ErrIgnored):
			return action{verb: term, why: "resource ignored"}
		case errors.Is(o.err, wire.ErrUnavailable):
			return action{verb: nak, delay: backoff(o.deliveries, minRetryDelay, maxUnavailableDelay), why: "store unavailable"}
		}
		return action{verb: nak, delay: backoff(o.deliveries, minRetryDelay, maxRetryDelay), why: "acquire failed"}
	case stageRun:
		r := o.report
		switch {
		case r.SaveErr == nil && r.Outcome == lifecycle.OutcomeTerminal:
			return action{verb: term, why: "terminal error"}
		case r.SaveErr == nil:
			// Success, requeue-after and error all ack: the store recorded
			// requeue_at or the failure, and the scheduler re-dispatches.
			return action{verb: ack, why: r.Outcome.String()}
		case errors.Is(r.SaveErr, wire.ErrStaleEpoch):
			return action{verb: term, why: "result refused: stale lease epoch"}
		case errors.Is(r.SaveErr, wire.ErrNotFound):
			return action{verb: term, why: "resource gone"}
		case errors.Is(r.SaveErr, wire.ErrUnavailable):
			return action{verb: nak, delay: backoff(o.deliveries, minRetryDelay, maxUnavailableDelay), why: "saving the result failed: store unavailable"}
		}
		return action{verb: nak, delay: backoff(o.deliveries, minRetryDelay, maxRetryDelay), why: "saving the result failed"}
	}
	return action{verb: term, why: "unknown stage"}
}

// backoff doubles from base with the delivery count, capped at max.
func backoff(deliveries uint64, base, max time.Duration) time.Duration {
	d := base
	for i := uint64(1); i < deliveries && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// apply carries out an action on a message.
func apply(msg jetstream.Msg, a action) error {
	switch a.verb {
	case ack:
		return msg.Ack()
	case term:
		return msg.TermWithReason(a.why)
	case nak:
		if a.delay > 0 {
			return msg.NakWithDelay(a.delay)
		}
		return msg.Nak()
	}
	return nil
}
