package litestore

// The commit path (see the package doc and docs/design/outbox.md). Invariant
// 1 rests on one sequence being right in every write, so it is written once,
// here, for this backend:
//
//  1. take the next revision from revision_counter, inside the write
//     transaction (writers are serialized: revisions commit in order);
//  2. set the resource's resource_version to its revision and updated_at to
//     the transaction's clock;
//  3. render the resource's document and encode the event
//     (storage.RenderEvent), then write the row;
//  4. write the outbox row.
//
// emit does all four for a change to a resource; takeVersion does step 1 for
// a resource type or a webhook, which have no event. No other code in this
// package names revision_counter or the outbox table for writing
// (TestOneCommitPath checks).

import (
	"context"
	"fmt"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// takeRevision takes the next revision.
func (tx *wtx) takeRevision(ctx context.Context) (int64, error) {
	var rev int64
	if err := tx.QueryRowContext(ctx, `UPDATE revision_counter SET value = value + 1 WHERE id = 1 RETURNING value`).Scan(&rev); err != nil {
		return 0, fmt.Errorf("take revision: %w", err)
	}
	return rev, nil
}

// takeVersion takes one revision for an object that has no event: a
// resource type's or a webhook's resource_version.
func (tx *wtx) takeVersion(ctx context.Context) (int64, error) { return tx.takeRevision(ctx) }

// change is one committed change to a resource: one revision, one event.
type change struct {
	// event is the event type (envelope.Created, ...).
	event string
	// r is the resource after the change; emit sets its resource_version
	// and updated_at.
	r *resource.Resource
	// write writes the row; it runs after r has its revision. Nil when the event has no row write of its own (the
	// DELETED event of a resource purged in the same transaction).
	write func(ctx context.Context, tx *wtx) error
	// unbounded skips the event size check: a deletion must always go
	// through.
	unbounded bool
}

// emit commits one change: it gives c.r the next revision as its
// resource_version and the transaction's clock as updated_at, renders its
// document and event (storage.RenderEvent), writes the row and then the
// outbox row.
func (tx *wtx) emit(ctx context.Context, c change) error {
	rev, err := tx.takeRevision(ctx)
	if err != nil {
		return err
	}
	row, err := storage.RenderEvent(c.event, c.r, rev, tx.now, c.unbounded)
	if err != nil {
		return err
	}
	if c.write != nil {
		if err := c.write(ctx, tx); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO outbox (revision, resource_id, event_type, subject, payload, created_at, trace_context) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		row.Revision, row.ResourceID, row.EventType, row.Subject, row.Payload, micros(row.CreatedAt), storage.NullIfEmpty(tracing.Encode(ctx)))
	if err != nil {
		return fmt.Errorf("write outbox row %d: %w", rev, err)
	}
	return nil
}

// nextResourceID is the id the next resource row gets: ids are never
// reused (AUTOINCREMENT), and the write lock keeps it ours until commit. A
// create needs it before it renders its event.
func (tx *wtx) nextResourceID(ctx context.Context) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'resources'), 0),
		coalesce((SELECT max(id) FROM resources), 0)) + 1`).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("next resource id: %w", err)
	}
	return id, nil
}
