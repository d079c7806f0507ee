package outbox

// The relay moves its cursor past revisions it did not find in the outbox:
// revisions taken by transactions that rolled back. That is safe only if
// every transaction holding a revision up to the settled one had ended
// (storage.EventLog.SettledRevision). Should that ever fail, the row commits
// below the cursor and its event is never published, silently. So the relay
// remembers the revisions it passed as absent and reads them again a little
// later: a row found there is a lost event, reported at ERROR with its
// revisions and counted (Relay.Late). It is not published then: out of
// order, it would break the stream's revision order. The change itself is in
// the database: lists show it, the scheduler's relist finds it, and
// no8s-store rebuild-stream makes every watcher list again
// (docs/operations.md, "Events stop flowing").

import (
	"context"
	"time"

	"github.com/no8s/no8s/services/store/storage"
)

const (
	// maxGaps bounds the absent ranges remembered; the oldest go first.
	maxGaps = 4096
	// maxGapChecks bounds the ranges read again in one round.
	maxGapChecks = 256
)

// gap is a range of revisions (after, upTo] the relay passed as absent.
type gap struct {
	after, upTo int64
	at          time.Time
}

// gapWatch holds the ranges the relay passed as absent, oldest first.
type gapWatch struct {
	pending []gap
}

// note records the revisions in (cursor, upTo] that rows (in revision
// order, all within that range) do not hold.
func (g *gapWatch) note(cursor, upTo int64, rows []storage.OutboxRow, at time.Time) {
	next := cursor + 1
	for _, x := range rows {
		g.add(next, x.Revision-1, at)
		next = x.Revision + 1
	}
	g.add(next, upTo, at)
}

// add records the revisions from..to, when there are any.
func (g *gapWatch) add(from, to int64, at time.Time) {
	if to < from {
		return
	}
	if len(g.pending) >= maxGaps {
		g.pending = g.pending[1:]
	}
	g.pending = append(g.pending, gap{after: from - 1, upTo: to, at: at})
}

// due takes up to maxGapChecks ranges noted at or before cutoff.
func (g *gapWatch) due(cutoff time.Time) []gap {
	n := 0
	for n < len(g.pending) && n < maxGapChecks && !g.pending[n].at.After(cutoff) {
		n++
	}
	out := g.pending[:n:n]
	g.pending = g.pending[n:]
	return out
}

// checkGaps reads again the ranges the relay passed as absent at least
// GapCheckAfter ago, and reports any row found there.
func (r *Relay) checkGaps(ctx context.Context) error {
	for _, g := range r.gaps.due(time.Now().Add(-r.cfg.GapCheckAfter)) {
		rows, err := r.events.ReadOutbox(ctx, g.after, g.upTo, int(min(g.upTo-g.after, 1000)))
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			continue
		}
		revs := make([]int64, len(rows))
		for i, x := range rows {
			revs[i] = x.Revision
		}
		// Logged before counted: whoever sees the count can read the line.
		r.log.Error("outbox rows committed after the relay had passed their revisions: their events were not published (the changes are in the database; see the operations guide)",
			"revisions", revs, "passed_at", g.at, "cursor", r.cursor.Load())
		r.late.Add(int64(len(rows)))
	}
	return nil
}

// Late is the number of outbox rows found committed below the cursor after
// the relay had passed their revisions as absent: events never published.
// Anything but 0 is a bug.
func (r *Relay) Late() int64 { return r.late.Load() }
