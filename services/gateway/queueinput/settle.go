package queueinput

import (
	"fmt"
	"time"
)

// verb is what becomes of a fire-and-forget message.
type verb int

const (
	// record: remember the outcome under the key, publish it, ack.
	record verb = iota + 1
	// retry: nak with a delay; the claim stays, so the redelivery takes
	// it over.
	retry
	// deadLetter: publish the message to the dead-letter subject with the
	// reason, publish the error outcome, release the key, ack.
	deadLetter
)

func (v verb) String() string {
	switch v {
	case record:
		return "record"
	case retry:
		return "retry"
	case deadLetter:
		return "dead-letter"
	}
	return "none"
}

// action is the decision about one message.
type action struct {
	verb   verb
	delay  time.Duration // retry
	reason string        // deadLetter
}

// settle decides what becomes of a message whose request was answered a,
// on its delivered-th delivery (1 on the first), with at most maxDeliver
// deliveries and retries starting at base (doubling, at most maxDelay).
// It is the one place this is decided:
//
//	answer                               delivery        verb
//	malformed                            any             dead-letter (retrying cannot fix it)
//	2xx, or 4xx but 408 and 429          any             record
//	5xx, 408, 429                        < maxDeliver    retry after base·2^(delivered-1), at most maxDelay
//	5xx, 408, 429                        = maxDeliver    dead-letter (gave up)
//
// A delivery past maxDeliver never reaches settle: it is dead-lettered
// before it runs (see Listener.handle).
func settle(a Answer, delivered, maxDeliver int, base, maxDelay time.Duration) action {
	switch {
	case a.Malformed:
		return action{verb: deadLetter, reason: "malformed: " + a.Detail}
	case !retryable(a.Status):
		return action{verb: record}
	case delivered < maxDeliver:
		return action{verb: retry, delay: backoff(delivered, base, maxDelay)}
	}
	return action{verb: deadLetter, reason: fmt.Sprintf("gave up after %d deliveries: status %d: %s", delivered, a.Status, a.Detail)}
}

// backoff is base·2^(delivered-1), at most maxDelay.
func backoff(delivered int, base, maxDelay time.Duration) time.Duration {
	d := base
	for i := 1; i < delivered && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}
