package storage

import (
	"context"
	"errors"
	"time"
)

// ErrLostLeadership means another relay took over: a write fenced by the
// relay epoch found a newer one.
var ErrLostLeadership = errors.New("outbox relay: lost leadership")

// EventLog is what the outbox relay and the stream's identity checks
// (services/store/outbox) need from a backend: the outbox in revision
// order, the relay's cursor and its exclusive lock, and the database's
// identity.
type EventLog interface {
	// LockRelay takes the relay's exclusive lock, which at most one relay
	// or stream rebuild holds at a time, or returns nil when another holds
	// it.
	LockRelay(ctx context.Context) (RelayLock, error)
	// SettledRevision returns a revision V > cursor such that every
	// transaction that could still record an outbox row <= V has ended, or
	// 0 when nothing was written after cursor. It waits for the
	// transactions that hold revisions <= V to end.
	SettledRevision(ctx context.Context, cursor int64) (int64, error)
	// ReadOutbox returns the outbox rows in (after, upTo], by revision, at
	// most limit of them.
	ReadOutbox(ctx context.Context, after, upTo int64, limit int) ([]OutboxRow, error)
	// AdvanceCursor moves the published cursor forward to cursor and, when
	// lastEvent > 0, raises the newest published event to it; fenced by
	// epoch: ErrLostLeadership when another relay took over. A cursor not
	// past the current one changes nothing.
	AdvanceCursor(ctx context.Context, epoch, cursor, lastEvent int64) error
	// SetCursor sets the published cursor and the newest published event,
	// backwards too (a relay that republishes); fenced by epoch.
	SetCursor(ctx context.Context, epoch, cursor, lastEvent int64) error
	// Prune deletes outbox rows at or below cursor older than retention,
	// records the newest one deleted as the pruned revision, and returns
	// how many went; fenced by epoch (nothing is deleted when it is stale).
	Prune(ctx context.Context, epoch, cursor int64, retention time.Duration) (int64, error)
	// State reads the database's identity and the relay's state.
	State(ctx context.Context) (LogState, error)
	// Payload returns the payload of the outbox row of revision rev, and
	// false when the outbox does not hold it.
	Payload(ctx context.Context, rev int64) ([]byte, bool, error)
}

// LogState is what the database says about its revisions and the relay.
type LogState struct {
	// StoreID is the database's identity, made when it was created.
	StoreID string
	// Revision is the newest revision handed out (0: none yet).
	Revision int64
	// Cursor is the relay's published revision: every outbox row up to it
	// is published.
	Cursor int64
	// LastEvent is the newest event published; LastEventKnown is false for
	// a store upgraded from a release that did not record it, until its
	// relay next publishes.
	LastEvent      int64
	LastEventKnown bool
	// Pruned is the newest outbox row deleted: rows up to it are gone.
	Pruned int64
}

// RelayLock is the relay's exclusive lock, held until Release.
type RelayLock interface {
	// Lost is closed when the lock is lost (the database connection that
	// held it broke); Err then says why. A lock that cannot be lost
	// returns nil.
	Lost() <-chan struct{}
	// Err is why the lock was lost, nil while it is held.
	Err() error
	// Lead takes relay leadership under the lock: it bumps the relay epoch
	// and returns it with the published cursor.
	Lead(ctx context.Context) (epoch, cursor int64, err error)
	// BumpRevision moves the database's revision to b, sets the cursor,
	// the newest published event and the pruned revision to b, bumps the
	// relay epoch and deletes the outbox rows at or below b, in one
	// transaction: the database side of a stream rebuild.
	BumpRevision(ctx context.Context, b int64) error
	// Release gives the lock up.
	Release()
}
