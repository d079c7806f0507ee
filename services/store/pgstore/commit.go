package pgstore

// The commit path (docs/design/outbox.md). Invariant 1 rests on one sequence
// being right in every write, so it is written once, here:
//
//  1. take the transaction id, then the revisions, in one statement
//     (takeRevisionsSQL), so that the transaction id is older than every
//     revision it holds;
//  2. set the resource's resource_version to its revision and updated_at to
//     the transaction's clock;
//  3. render the resource's document and encode the event
//     (storage.RenderEvent, shared by every backend);
//  4. queue the row's write, which stores the document in the row
//     (document, with its resource_version as document_version: what
//     lists serve), then the outbox row, into the batch that commits with
//     them.
//
// takeRevisions or queueRevisions/scanRevisions do step 1; emit does steps
// 2 to 4. No other code in this package names revision_seq or the outbox
// table (TestOneCommitPath checks). Resource types and webhooks take a
// revision (their resource_version) through the same statement but have no
// event.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// takeRevisionsSQL takes $1 consecutive revisions and the transaction's
// clock. It first makes sure the transaction has an id, so that the relay,
// which waits for every transaction older than its own id, cannot miss a
// revision taken here.
const takeRevisionsSQL = `WITH x AS MATERIALIZED (SELECT pg_current_xact_id())
	SELECT nextval('revision_seq'), now() FROM x, generate_series(1, $1::int)`

// revisions is a transaction's block of revisions, handed out in order.
type revisions struct {
	revs []int64
	// now is the transaction's clock (PostgreSQL's now()).
	now time.Time
	// trace is the trace context of the request that commits (package
	// tracing's Encode), "" untraced: each outbox row keeps it.
	trace string
}

// takeRevisions takes n revisions in tx (one round trip).
func takeRevisions(ctx context.Context, tx pgx.Tx, n int) (*revisions, error) {
	rows, err := tx.Query(ctx, takeRevisionsSQL, n)
	if err != nil {
		return nil, err
	}
	return collectRevisions(ctx, rows, n)
}

// takeVersion takes one revision for an object that has no event: a
// resource type's or a webhook's resource_version.
func takeVersion(ctx context.Context, tx pgx.Tx) (int64, time.Time, error) {
	rv, err := takeRevisions(ctx, tx, 1)
	if err != nil {
		return 0, time.Time{}, err
	}
	return rv.revs[0], rv.now, nil
}

// queueRevisions queues the taking of n revisions into the read batch of a
// pipelined write; scanRevisions reads the answer in its turn.
func queueRevisions(b *pgx.Batch, n int) { b.Queue(takeRevisionsSQL, n) }

func scanRevisions(ctx context.Context, br pgx.BatchResults, n int) (*revisions, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return collectRevisions(ctx, rows, n)
}

// collectRevisions reads the revisions taken, for the transaction of a
// request whose context is ctx.
func collectRevisions(ctx context.Context, rows pgx.Rows, n int) (*revisions, error) {
	defer rows.Close()
	out := &revisions{revs: make([]int64, 0, n), trace: tracing.Encode(ctx)}
	for rows.Next() {
		var r int64
		if err := rows.Scan(&r, &out.now); err != nil {
			return nil, err
		}
		out.revs = append(out.revs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out.revs) != n {
		return nil, fmt.Errorf("got %d revisions, want %d", len(out.revs), n)
	}
	out.now = out.now.UTC()
	return out, nil
}

// next hands out the next revision.
func (rv *revisions) next() (int64, error) {
	if len(rv.revs) == 0 {
		return 0, fmt.Errorf("no revision left for this change")
	}
	r := rv.revs[0]
	rv.revs = rv.revs[1:]
	return r, nil
}

// change is one committed change to a resource: one revision, one event.
type change struct {
	// event is the event type (envelope.Created, ...).
	event string
	// r is the resource after the change; emit sets its resource_version
	// and updated_at.
	r *resource.Resource
	// write queues the row's write; it runs after r has its revision,
	// with r's document as its event carries it, which a write that keeps
	// the row stores in the row (document, and r's resource_version as
	// document_version: what lists serve). Nil
	// when the event has no row write of its own (the DELETED event of a
	// resource purged in the same transaction).
	write func(b *pgx.Batch, doc []byte)
	// unbounded skips the event size check: a deletion must always go
	// through.
	unbounded bool
}

// emit commits one change: it gives c.r the next revision as its
// resource_version and the transaction's clock as updated_at, renders its
// document and event (storage.RenderEvent), and queues c.write and the
// outbox row into b.
func (rv *revisions) emit(b *pgx.Batch, c change) error {
	rev, err := rv.next()
	if err != nil {
		return err
	}
	row, err := storage.RenderEvent(c.event, c.r, rev, rv.now, c.unbounded)
	if err != nil {
		return err
	}
	if c.write != nil {
		c.write(b, row.Document)
	}
	b.Queue(`INSERT INTO outbox (revision, resource_id, event_type, subject, payload, created_at, trace_context) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		row.Revision, row.ResourceID, row.EventType, row.Subject, row.Payload, row.CreatedAt, storage.NullIfEmpty(rv.trace))
	return nil
}

// emitTx is emit for a write that runs in an interactive transaction: it
// takes one revision per change and sends the changes' writes in one batch.
func emitTx(ctx context.Context, tx pgx.Tx, changes ...change) error {
	rv, err := takeRevisions(ctx, tx, len(changes))
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for _, c := range changes {
		if err := rv.emit(b, c); err != nil {
			return err
		}
	}
	return tx.SendBatch(ctx, b).Close()
}
