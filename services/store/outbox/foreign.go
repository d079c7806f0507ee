package outbox

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/services/internal/eventstream"
)

// MismatchRetry is how often a relay that found a stream not belonging to
// its database looks again (an operator may have rebuilt it meanwhile).
const MismatchRetry = 5 * time.Second

// maxForeignLogged bounds the ERROR lines one report writes; the rest are
// counted in a summary line.
const maxForeignLogged = 10

// reportForeign reports the foreign messages the relay passed over (newest
// first) that it has not reported before: an ERROR line each (subject,
// sequence, headers, a short excerpt of the body), the Foreign count, and
// the degraded reason.
func (r *Relay) reportForeign(foreign []*jetstream.RawStreamMsg) {
	var fresh []*jetstream.RawStreamMsg
	for _, m := range foreign {
		if m.Sequence > r.reportedSeq {
			fresh = append(fresh, m)
		}
	}
	if len(fresh) == 0 {
		return
	}
	r.reportedSeq = fresh[0].Sequence
	r.foreign.Add(int64(len(fresh)))
	for i := len(fresh) - 1; i >= 0 && i >= len(fresh)-maxForeignLogged; i-- {
		r.log.Error("a message in the event stream was not published by this store; ignored (it is not an event: readers drop it)",
			eventstream.Describe(fresh[i])...)
	}
	if len(fresh) > maxForeignLogged {
		r.log.Error("more foreign messages in the event stream; ignored", "count", len(fresh)-maxForeignLogged, "newest_seq", fresh[0].Sequence)
	}
	r.degraded.set(fmt.Sprintf("%d foreign message(s) in %s, newest at sequence %d (subject %s): ignored; keep other publishers off no8s.events.> (docs/operations.md)",
		len(fresh), eventstream.StreamName, fresh[0].Sequence, fresh[0].Subject), time.Now())
}

// errCodeWrongLastMsgID is JetStream's JSStreamWrongLastMsgIDErr, which
// nats.go names no constant for.
const errCodeWrongLastMsgID jetstream.ErrorCode = 10070

// wrongLastSequence reports whether a publish failed because the stream's
// last message was not the one expected (by sequence or by id): another
// publisher got in between.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant, errCodeWrongLastMsgID:
		return true
	}
	return false
}

// degradation is the relay's degraded reason and when it was last set.
type degradation struct {
	mu  sync.Mutex
	why string
	at  time.Time // zero: held until cleared by a successful align
}

// set records why the relay is degraded; a zero at holds it until the
// next clean publish, whatever the hold.
func (d *degradation) set(why string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.why, d.at = why, at
}

// clean is called after a clean publish at now: the reason clears once
// hold has passed since it was set.
func (d *degradation) clean(now time.Time, hold time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.why != "" && (d.at.IsZero() || now.Sub(d.at) >= hold) {
		d.why, d.at = "", time.Time{}
	}
}

func (d *degradation) reason() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.why
}
