// Package litestore is the embedded single-node store for `no8s dev` and
// tests: storage.Store and storage.EventLog on one SQLite file, in pure Go
// (modernc.org/sqlite, no cgo). PostgreSQL (pgstore) stays the production
// store; both pass the same conformance suite (storage/storetest). Like
// pgstore it is SQL and scanning: the rules live in storage.
//
// # The file and its connections
//
// Open keeps two pools on the file, and Migrate applies the SQLite
// migrations (migrations.SQLite) with goose. Every write runs on the one
// write connection in a transaction that begins with BEGIN IMMEDIATE: it
// takes SQLite's write lock at once, so writers serialize, in this process
// and across the processes that open the same file, and what a transaction
// reads cannot change under it (the lock is the row lock). Reads run on a
// small pool of read-only connections. The pragmas:
//
//   - journal_mode=WAL: readers never block the writer and each read
//     transaction sees one consistent snapshot; several processes may share
//     the file (the kill -9 end-to-end test does).
//   - synchronous=NORMAL: COMMIT returns once the transaction is appended to
//     the write-ahead log; the log is synced to disk at checkpoints. A
//     committed transaction therefore survives the process being killed
//     (kill -9) at any instant, since the log is in the operating system's
//     cache; only a power loss or a kernel crash can lose the last commits.
//     FULL would sync the log on every commit, a disk flush per write, for
//     a guarantee the development store does not need: the event stream
//     (JetStream) syncs lazily too, and the stream's identity check
//     (outbox.Prepare) notices a database that fell behind its stream.
//   - busy_timeout: a writer in another process waits for the write lock
//     instead of failing at once.
//   - foreign_keys=ON: history rows go with their resource.
//
// # Revisions, the outbox and the relay's settled bound (HARD-PARTS 1)
//
// A counter row hands out revisions inside the write transaction (commit.go,
// the one commit path). Write transactions are serialized, so a
// transaction that takes revision N commits (or rolls back, giving N back)
// before the next one takes N+1: outbox rows become visible strictly in
// revision order, and a reader that sees the counter at V sees every outbox
// row up to V. The relay's settled bound (EventLog.SettledRevision) is
// therefore simply the highest committed revision: there is no horizon to
// wait for and there are no gaps to fill. This is the "single writer" way
// through HARD-PARTS 1, with SQLite's write lock as the single writer.
//
// The relay's leadership is SQLite's write lock on a small lock file next to
// the database (<path>-relay.lock, filelock.go): the operating system
// releases a process's file locks when it dies, as PostgreSQL releases an
// advisory lock with its connection, and a paused process keeps it.
//
// # Time and values
//
// The store's clock is the process's, read once per write transaction after
// the write lock is taken and truncated to microseconds (PostgreSQL's
// precision); the processes sharing a file share a host and its clock.
// Times are stored as INTEGER microseconds since the Unix epoch, JSON as
// compact TEXT; label selectors are evaluated in SQL with json_each.
//
// The files, by concern:
//
//   - store.go, tx.go: opening the file, migrations, the two ways a
//     transaction runs;
//   - commit.go: the one commit path (revision, resource_version, event,
//     outbox row);
//   - errors.go, values.go, scan.go: SQLite's errors and values;
//   - resources.go, list.go, types.go, webhooks.go: the objects;
//   - tokens.go: API tokens (no revision, no event);
//   - leases.go, completion.go, reconcilestate.go: reconciliation;
//   - eventlog.go, filelock.go: the relay's side, and the locks between
//     processes sharing the file.
package litestore
