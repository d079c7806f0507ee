package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/store/storage"
)

// RebuildCommand is what an operator runs to rebuild the event stream of a
// database after a mismatch; MismatchError names it.
const RebuildCommand = "no8s-store rebuild-stream --database-url <NO8S_DATABASE_URL> --nats-url <NO8S_NATS_URL>"

// DefaultRevisionMargin is how far past the highest revision either side has
// seen a rebuild moves the database's revision.
const DefaultRevisionMargin = 1000

// MismatchError means the event stream does not belong to the database: it
// was filled by another database, or the database is behind it (restored
// from a backup). Publishing would skip or reuse revisions in silence, so
// the store refuses to start until the stream is rebuilt.
type MismatchError struct {
	// Reason says what does not match.
	Reason string
	// StoreID is the database's identity; StreamStoreID the stream's.
	StoreID, StreamStoreID string
	// DatabaseRevision is the newest revision the database has handed out;
	// StreamRevision the newest the stream has seen.
	DatabaseRevision, StreamRevision int64
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("event stream %s does not belong to this database: %s (database %s at revision %d, stream of %s at revision %d); "+
		"publishing would skip or repeat revisions. Rebuild the stream with `%s` "+
		"(it moves the database's revision past both and marks everything at or below it compacted: watchers list again)",
		eventstream.StreamName, e.Reason, e.StoreID, e.DatabaseRevision, orUnknown(e.StreamStoreID), e.StreamRevision, RebuildCommand)
}

func orUnknown(s string) string {
	if s == "" {
		return "no recorded database"
	}
	return s
}

// streamState is what the broker says about the event stream.
type streamState struct {
	stream  jetstream.Stream // nil when the stream does not exist
	id      eventstream.Identity
	hasID   bool
	msgs    uint64
	lastSeq uint64
	lastRev int64 // revision of the store's newest event held, 0 when none
	last    *jetstream.RawStreamMsg
	// foreign are the messages after the newest event that the store did
	// not publish (ownEvent), newest first.
	foreign []*jetstream.RawStreamMsg
}

// high is the newest revision the stream has seen: its newest event, or the
// revision it was rebuilt at.
func (s streamState) high() int64 { return max(s.lastRev, s.id.Base) }

// readStreamState reads the stream's identity and finds the database's
// newest event in it, passing over foreign messages (ownEvent).
func readStreamState(ctx context.Context, js jetstream.JetStream, el storage.EventLog, db storage.LogState) (streamState, error) {
	var st streamState
	s, err := js.Stream(ctx, eventstream.StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("open stream %s: %w", eventstream.StreamName, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return st, fmt.Errorf("stream info: %w", err)
	}
	st.stream = s
	st.id, st.hasID = eventstream.IdentityOf(info.Config)
	st.msgs, st.lastSeq = info.State.Msgs, info.State.LastSeq
	if st.msgs == 0 {
		return st, nil
	}
	// The stream's own store id ("" for one made before identities: any
	// store id header). Another database's stream (check refuses it) is
	// read by its headers alone, for the revision it reached.
	storeID := st.id.StoreID
	own := func(m *jetstream.RawStreamMsg) (int64, error) { return ownEvent(ctx, el, db, storeID, m) }
	if st.hasID && st.id.StoreID != db.StoreID {
		own = func(m *jetstream.RawStreamMsg) (int64, error) { return eventstream.Own(m.Header, storeID) }
	}
	st.lastRev, st.last, st.foreign, err = eventstream.NewestOwn(ctx, s, info.State.LastSeq, eventstream.Floor(info.State), own)
	return st, err
}

// ownEvent is the relay's rule for "this message is the database's event"
// (docs/design/outbox.md, "Foreign messages"): it carries the database's
// store id and a revision (eventstream.Own), and, where the outbox can
// tell, it is byte for byte the outbox row of that revision. A revision the
// outbox no longer holds counts when it was pruned; one past the database's
// newest revision counts too, so that check reports the stream as ahead
// (a database restored from a backup) rather than the relay publishing
// revisions the stream already has.
func ownEvent(ctx context.Context, el storage.EventLog, db storage.LogState, storeID string, m *jetstream.RawStreamMsg) (int64, error) {
	rev, err := eventstream.Own(m.Header, storeID)
	if err != nil {
		return 0, err
	}
	if rev > db.Revision {
		return rev, nil
	}
	payload, ok, err := el.Payload(ctx, rev)
	if err != nil {
		return 0, err
	}
	switch {
	case ok && !bytes.Equal(payload, m.Data):
		return 0, fmt.Errorf("%w: revision %d is not this database's change at that revision", eventstream.ErrForeign, rev)
	case !ok && rev > db.Pruned:
		return 0, fmt.Errorf("%w: the database has no change at revision %d", eventstream.ErrForeign, rev)
	}
	return rev, nil
}

// fresh reports whether the stream holds nothing and never did: it is
// missing, or was created (perhaps by another service) and never written.
func (s streamState) fresh() bool { return s.stream == nil || s.lastSeq == 0 }

// check finds a mismatch between the database and the stream, or nil.
func check(ctx context.Context, el storage.EventLog, db storage.LogState, st streamState) (*MismatchError, error) {
	mis := func(reason string) *MismatchError {
		return &MismatchError{Reason: reason, StoreID: db.StoreID, StreamStoreID: st.id.StoreID, DatabaseRevision: db.Revision, StreamRevision: st.high()}
	}
	if st.fresh() {
		return nil, nil
	}
	if st.hasID && st.id.StoreID != db.StoreID {
		return mis("the stream was filled by another database"), nil
	}
	if h := st.high(); h > db.Revision {
		return mis(fmt.Sprintf("the stream has seen revision %d, which the database has not reached (restored from a backup, or a new database?)", h)), nil
	}
	if st.last != nil && db.LastEventKnown && st.lastRev > db.LastEvent {
		// The relay may have published before it saved its cursor; then
		// the newest event is this database's own outbox row.
		payload, ok, err := el.Payload(ctx, st.lastRev)
		if err != nil {
			return nil, err
		}
		if !ok || !bytes.Equal(payload, st.last.Data) {
			return mis(fmt.Sprintf("the stream's revision %d is not this database's change at that revision", st.lastRev)), nil
		}
		if sid := st.last.Header.Get(eventstream.StoreIDHeader); sid != "" && sid != db.StoreID {
			return mis("the stream's newest event came from another database"), nil
		}
	}
	return nil, nil
}

// Prepare makes sure the event stream exists and belongs to the database
// before a store serves. A missing stream is created (the relay republishes
// what the outbox still holds); a stream from a release without identities
// is adopted; a mismatch is returned as a *MismatchError unless rebuild is
// set, in which case the stream is rebuilt as Rebuild does.
func Prepare(ctx context.Context, el storage.EventLog, js jetstream.JetStream, sc eventstream.StreamConfig, rebuild bool, margin int64, log *slog.Logger) error {
	db, err := el.State(ctx)
	if err != nil {
		return err
	}
	st, err := readStreamState(ctx, js, el, db)
	if err != nil {
		return err
	}
	mis, err := check(ctx, el, db, st)
	if err != nil {
		return err
	}
	if mis != nil {
		if !rebuild {
			return mis
		}
		log.Warn("the event stream does not belong to this database; rebuilding it (no8s dev does this by default)", "reason", mis.Reason)
		_, err := Rebuild(ctx, el, js, sc, margin, log)
		return err
	}
	id := eventstream.Identity{StoreID: db.StoreID}
	switch {
	case st.fresh():
		// Nothing in it: the relay republishes every outbox row after the
		// pruned revision, and resumes before that are gone.
		id.Base = db.Pruned
	case st.hasID:
		id = st.id
	}
	_, err = eventstream.Ensure(ctx, js, sc, id)
	return err
}

// Rebuild makes the stream this database's again after a mismatch, as
// `etcdutl snapshot restore --bump-revision --mark-compacted` does: it moves
// the database's revision to B = max(stream's, database's) + margin, empties
// the stream and records B as its base, so a watcher resuming before B gets
// 410 and lists again, and every later change is published exactly once.
// Outbox rows at or below B are dropped: those changes are in the database
// but not in the stream, and clients see them by listing. It refuses while
// a relay is running. It returns B.
func Rebuild(ctx context.Context, el storage.EventLog, js jetstream.JetStream, sc eventstream.StreamConfig, margin int64, log *slog.Logger) (int64, error) {
	if margin < 0 {
		return 0, fmt.Errorf("rebuild stream: negative revision margin %d", margin)
	}
	lock, err := el.LockRelay(ctx)
	if err != nil {
		return 0, fmt.Errorf("rebuild stream: %w", err)
	}
	if lock == nil {
		return 0, errors.New("rebuild stream: an outbox relay is running on this database: stop every store first")
	}
	defer lock.Release()
	db, err := el.State(ctx)
	if err != nil {
		return 0, err
	}
	st, err := readStreamState(ctx, js, el, db)
	if err != nil {
		return 0, err
	}
	bump := max(st.high(), db.Revision) + margin
	// The stream first: if we stop half way, its base is past the database's
	// revision and the next start reports the mismatch again.
	id := eventstream.Identity{StoreID: db.StoreID, Base: bump}
	if st.stream != nil {
		if id.BaseSeq, err = purge(ctx, st.stream); err != nil {
			return 0, fmt.Errorf("rebuild stream: %w", err)
		}
	}
	if _, err := eventstream.Ensure(ctx, js, sc, id); err != nil {
		return 0, fmt.Errorf("rebuild stream: %w", err)
	}
	if err := lock.BumpRevision(ctx, bump); err != nil {
		return 0, fmt.Errorf("rebuild stream: %w", err)
	}
	log.Warn("rebuilt the event stream: every revision at or below the bump is compacted; watchers resuming before it get 410 and list again",
		"bump", bump, "database_revision", db.Revision, "stream_revision", st.high(), "store_id", db.StoreID)
	return bump, nil
}

// align runs when the relay becomes leader: it checks that the stream
// belongs to the database, recreates a missing stream, and finds where
// publishing resumes so that the stream ends up holding every event after
// its base exactly once:
//   - a missing or never-written stream gets every outbox row after the
//     pruned revision again;
//   - a stream ahead of the cursor (published, cursor not yet saved) is
//     skipped past, once check has verified that its newest event is this
//     database's own;
//   - a stream that lost its newest events (the broker acknowledges before
//     it syncs to disk) gets them again from the outbox, or, when the outbox
//     no longer holds them, is emptied and based after the pruned revision.
func (r *Relay) align(ctx context.Context, epoch, cursor int64) (int64, error) {
	db, err := r.events.State(ctx)
	if err != nil {
		return 0, err
	}
	st, err := readStreamState(ctx, r.js, r.events, db)
	if err != nil {
		return 0, err
	}
	r.reportForeign(st.foreign)
	mis, err := check(ctx, r.events, db, st)
	if err != nil {
		return 0, err
	}
	if mis != nil {
		r.identityMismatch.Add(1)
		r.log.Error("the event stream does not belong to this database; not publishing", "err", mis)
		return 0, mis
	}
	r.identityOK.Add(1)
	r.storeID = db.StoreID
	if !db.LastEventKnown {
		// Upgraded from a release that did not record it: the stream's
		// chain of sequences makes its newest event the last one published.
		db.LastEvent = max(st.lastRev, db.Pruned)
	}
	id := eventstream.Identity{StoreID: db.StoreID}
	from := cursor     // where publishing resumes
	tail := st.lastSeq // the stream's last sequence once aligned
	switch {
	case st.fresh():
		id.Base = max(st.id.Base, db.Pruned)
		if cursor > id.Base || db.LastEvent > id.Base {
			r.log.Warn("the event stream is missing or empty; republishing the outbox", "after_revision", id.Base, "cursor", cursor)
		}
		from = id.Base
	case !st.hasID:
		r.log.Info("adopting an event stream made before stream identities", "store_id", db.StoreID)
	default:
		id = st.id
	}
	if st.stream == nil || !st.hasID || id != st.id {
		if _, err := eventstream.Ensure(ctx, r.js, r.streamCfg, id); err != nil {
			return 0, err
		}
	}
	if !st.fresh() && st.last != nil {
		switch {
		case st.lastRev > db.LastEvent:
			r.log.Info("the stream holds events past the cursor; continuing after them", "cursor", cursor, "stream_revision", st.lastRev)
			from = max(cursor, st.lastRev)
		case st.lastRev < db.LastEvent && st.lastRev >= db.Pruned:
			r.log.Warn("the stream lost its newest events; republishing them from the outbox", "stream_revision", st.lastRev, "published_event", db.LastEvent)
			from = st.lastRev
		case st.lastRev < db.LastEvent:
			r.log.Warn("the stream lost events the outbox no longer holds; emptying it and republishing after the pruned revision",
				"stream_revision", st.lastRev, "published_event", db.LastEvent, "pruned_revision", db.Pruned)
			if id.BaseSeq, err = purge(ctx, st.stream); err != nil {
				return 0, err
			}
			tail = id.BaseSeq
			id.Base = db.Pruned
			if _, err := eventstream.Ensure(ctx, r.js, r.streamCfg, id); err != nil {
				return 0, err
			}
			from = db.Pruned
		}
	}
	s, err := r.js.Stream(ctx, eventstream.StreamName)
	if err != nil {
		return 0, fmt.Errorf("open stream %s: %w", eventstream.StreamName, err)
	}
	r.stream = s
	// The next publish expects the tail as read above, foreign messages
	// included (reported): anything published since fails it.
	r.lastSeq, r.lastSeqKnown = tail, true
	r.base = strconv.FormatInt(id.Base, 10)
	if from != cursor {
		if err := r.events.SetCursor(ctx, epoch, from, min(from, max(db.LastEvent, st.lastRev))); err != nil {
			return 0, err
		}
	}
	return from, nil
}

// purge empties the stream and returns its last sequence: the history that
// follows starts after it.
func purge(ctx context.Context, s jetstream.Stream) (uint64, error) {
	if err := s.Purge(ctx); err != nil {
		return 0, fmt.Errorf("purge %s: %w", eventstream.StreamName, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	return info.State.LastSeq, nil
}
