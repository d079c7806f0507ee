package pgstore

// Group commit (docs/design/performance.md, HARD-PARTS 1's "single writer
// with batching"): concurrent pipelined writes (creates, lease acquisitions,
// completions) share one transaction. Each write keeps its own statements,
// revisions, events and answer; the transaction, its two round trips and
// its COMMIT are shared. Under load that is one commit for many writes
// instead of one each; alone, a write runs at once in a batch of one.
//
// The rules that keep a shared transaction equivalent to separate ones:
//
//   - writes with the same key (the row they lock, or the name they create)
//     never share a batch: each would read the row as it was before the
//     other's write. Batches lock rows in ascending resource id, so two
//     batches cannot deadlock;
//   - a write whose own rules refuse it (a stale epoch, a changed schema)
//     fails alone: its read results are skipped and the statements it
//     queued are taken back before the writes are sent;
//   - when the database refuses a statement (a unique violation, a lost
//     connection), the transaction is gone for every write in it: each is
//     run again on its own, and answers as it would have alone;
//   - the before-commit hook runs once per batch and its error is every
//     write's; the after-commit hook once per committed batch.

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/no8s/no8s/services/internal/resource"
)

// Group commit bounds.
const (
	// maxBatchWrites is the most writes one transaction carries.
	maxBatchWrites = 64
	// maxBatches is the most batches in flight at once. Two keep the
	// database busy (one batch's round trip overlaps the other's work) and
	// make the writes that arrive meanwhile wait for the next batch,
	// together: with eight, most writes of the API benchmark at c=32 still
	// ran alone.
	maxBatches = 2
	// batchTimeout bounds a batch: it runs for several callers, so none of
	// their contexts ends it.
	batchTimeout = 30 * time.Second
)

// pwrite is one pipelined write: what it reads (read, then scan), what it
// writes (write), and the key that keeps it out of a batch holding another
// write with the same key.
type pwrite struct {
	key string
	// lockID orders the batch: the resource whose row the write locks (0:
	// none, such as a create).
	lockID int64
	read   func(b *pgx.Batch)
	scan   func(br pgx.BatchResults) error
	write  func(b *pgx.Batch) error

	// Set by the batch.
	reads  int   // statements read queued
	err    error // the write's own outcome
	done   chan struct{}
	leader chan struct{} // closed when this queued write must lead the next batch
}

// batcher queues writes and hands them to batches.
type batcher struct {
	mu      sync.Mutex
	queue   []*pwrite
	running int
	// shared counts writes that ran in a batch of more than one, retried
	// those run again alone after the database refused their batch.
	shared, retried atomic.Int64
	// alone runs every write in a transaction of its own (benchmarks
	// compare with it).
	alone bool
}

// groupWrite runs w in a batch with whatever other writes are waiting: at
// once, as the batch's leader, when fewer than maxBatches run; else it
// waits in the queue until a batch takes it or a finishing leader hands it
// the lead (so no caller runs batches for others).
func (s *Store) groupWrite(ctx context.Context, w *pwrite) error {
	w.done = make(chan struct{})
	w.leader = make(chan struct{})
	g := &s.group
	g.mu.Lock()
	lead := g.running < maxBatches
	if lead {
		g.running++
	} else {
		g.queue = append(g.queue, w)
	}
	g.mu.Unlock()
	if !lead {
		// Queued writes wait for their batch even when their caller
		// gives up: the batch may have taken them already, and it lasts
		// two round trips.
		select {
		case <-w.done:
			return w.err
		case <-w.leader: // taken out of the queue: lead the next batch
		}
	}
	s.runBatch(ctx, s.takeBatch(w))
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.running--
		g.mu.Unlock()
		return w.err
	}
	next := g.queue[0]
	g.queue = slices.Delete(g.queue, 0, 1)
	g.mu.Unlock()
	close(next.leader)
	return w.err
}

// takeBatch returns the leader's write w and the queued writes that join
// it, first come first: no two with the same key, at most maxBatchWrites,
// sorted by the rows they lock.
func (s *Store) takeBatch(w *pwrite) []*pwrite {
	g := &s.group
	g.mu.Lock()
	defer g.mu.Unlock()
	keys := map[string]bool{w.key: true}
	batch := []*pwrite{w}
	rest := g.queue[:0]
	for _, x := range g.queue {
		if len(batch) < maxBatchWrites && !keys[x.key] {
			keys[x.key] = true
			batch = append(batch, x)
			continue
		}
		rest = append(rest, x)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	slices.SortStableFunc(batch, func(a, b *pwrite) int { return cmpInt64(a.lockID, b.lockID) })
	return batch
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// runBatch runs writes in one transaction and settles each (done closed,
// err set). Writes the database refused together are run again alone.
func (s *Store) runBatch(ctx context.Context, batch []*pwrite) {
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	if len(batch) == 1 {
		w := batch[0]
		w.err = s.pipelinedWriteAlone(bctx, false, w.read, w.scan, w.write)
		close(w.done)
		return
	}
	s.group.shared.Add(int64(len(batch)))
	retry, err := s.commitBatch(bctx, batch)
	if retry {
		s.group.retried.Add(int64(len(batch)))
	}
	for _, w := range batch {
		switch {
		case retry:
			w.err = s.pipelinedWriteAlone(bctx, false, w.read, w.scan, w.write)
		case w.err == nil && err != nil:
			w.err = err
		}
		if w.err != nil {
			w.err = translate(w.err)
		}
		close(w.done)
	}
}

// commitBatch runs the batch's writes in one transaction. retry reports
// that the database refused it (every write must run again alone); err is
// the outcome of the writes that did not fail on their own.
func (s *Store) commitBatch(ctx context.Context, batch []*pwrite) (retry bool, err error) {
	start := time.Now()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	committed := false
	defer func() {
		if committed {
			return
		}
		if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	for _, w := range batch {
		n := b.Len()
		w.read(b)
		w.reads = b.Len() - n
	}
	br := conn.SendBatch(ctx, b)
	_, dbErr := br.Exec()
	for _, w := range batch {
		if dbErr != nil {
			break
		}
		cr := &countingResults{BatchResults: br}
		w.err = w.scan(cr)
		if isDatabaseError(w.err) {
			dbErr = w.err
			break
		}
		for cr.used < w.reads { // the results a failed scan left
			if _, err := cr.Exec(); err != nil && isDatabaseError(err) {
				dbErr = err
				break
			}
		}
	}
	if err := br.Close(); dbErr == nil {
		dbErr = err
	}
	if dbErr != nil {
		return true, nil
	}

	wb := &pgx.Batch{}
	wrote := 0
	for _, w := range batch {
		if w.err != nil {
			continue
		}
		n := len(wb.QueuedQueries)
		if w.err = w.write(wb); w.err != nil {
			wb.QueuedQueries = wb.QueuedQueries[:n]
			continue
		}
		wrote++
	}
	if wrote == 0 {
		return false, nil
	}
	commitInBatch := s.opts.BeforeCommit == nil
	if commitInBatch {
		wb.Queue("COMMIT")
	}
	if err := conn.SendBatch(ctx, wb).Close(); err != nil {
		// The database refused the writes together (a conflict among
		// them): each runs again alone. A session that ended (57P01 and
		// the like) may have ended after its COMMIT: the outcome is
		// unknown, so nothing runs again (a create would find its own
		// name taken) and the writers are told the database was
		// unavailable.
		if isDatabaseError(err) && !sessionLost(err) {
			return true, nil
		}
		return false, err
	}
	if !commitInBatch {
		if err := s.opts.BeforeCommit(ctx); err != nil {
			return false, err
		}
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return false, err
		}
	}
	committed = true
	s.opts.Committed(wrote, start)
	return false, nil
}

// isDatabaseError reports whether PostgreSQL refused a statement (which
// aborts the transaction), as opposed to a write's own refusal or a row not
// found.
func isDatabaseError(err error) bool {
	var pgErr *pgconn.PgError
	return err != nil && errors.As(err, &pgErr)
}

// sessionLost reports whether err is the database ending or refusing the
// session (unavailableState) rather than refusing a statement.
func sessionLost(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && unavailableState(pgErr.Code)
}

// countingResults counts the results a write's scan read.
type countingResults struct {
	pgx.BatchResults
	used int
}

func (c *countingResults) Exec() (pgconn.CommandTag, error) {
	c.used++
	return c.BatchResults.Exec()
}

func (c *countingResults) Query() (pgx.Rows, error) {
	c.used++
	return c.BatchResults.Query()
}

func (c *countingResults) QueryRow() pgx.Row {
	c.used++
	return c.BatchResults.QueryRow()
}

// resourceKey is the group-commit key of a write that locks a resource row.
func resourceKey(id int64) string { return "id:" + strconv.FormatInt(id, 10) }

// nameKey is the group-commit key of a create: the name it takes.
func nameKey(r *resource.Resource) string {
	return "name:" + r.Namespace + "/" + r.ResourceTypeName + "/" + r.ResourceTypeVersion + "/" + r.Name
}
