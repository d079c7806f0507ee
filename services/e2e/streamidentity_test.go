package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/testenv"
)

// The event stream and the database know each other (issue 8, part 1): a
// store never skips or repeats revisions of a stream it did not fill. Each
// test ends with new resources reconciled, a watcher resuming before the
// rebuild refused with 410, and one resuming after it given every later
// change exactly once.

// identityEnv is a control plane of real processes whose store can be
// pointed at another database.
type identityEnv struct {
	t         *testing.T
	c         *cluster
	base      string
	storeAddr string
	store     *proc
	pool      *pgxpool.Pool // the database the store uses now
	dbURL     string
}

func newIdentityEnv(t *testing.T) *identityEnv {
	c := newCluster(t)
	base := c.startAll()
	e := &identityEnv{t: t, c: c, base: base, storeAddr: c.storeAddrs[0], store: c.stores[0], pool: c.pool, dbURL: c.dbURL}
	e.createType()
	c.startScheduler(e.storeAddr, "sched", 0)
	c.startReconciler(e.storeAddr, "Widget/v1")
	return e
}

func (e *identityEnv) createType() { createWidgetType(e.t, e.base) }

// createWidgetType registers Widget/v1 (an object with an integer size),
// retrying while the control plane answers 503.
func createWidgetType(t *testing.T, base string) {
	t.Helper()
	body := map[string]any{"name": "Widget", "version": "v1",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}}}
	r := do(t, "POST", base+"/api/v1/resource-types", body)
	for deadline := time.Now().Add(10 * time.Second); r.status == 503 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		r = do(t, "POST", base+"/api/v1/resource-types", body)
	}
	if r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
}

// createReady creates n widgets and waits until every one is ready.
func (e *identityEnv) createReady(prefix string, n int) []int64 {
	e.t.Helper()
	var ids []int64
	for i := range n {
		ids = append(ids, createWidget(e.t, e.base, fmt.Sprintf("%s-%d", prefix, i)))
	}
	for _, id := range ids {
		waitResource(e.t, e.base, id, "ready", func(r map[string]any) bool { return r["status"] == "ready" })
	}
	return ids
}

// streamHigh is the newest revision in the event stream.
func (e *identityEnv) streamHigh() int64 {
	e.t.Helper()
	js, _ := e.c.jetstream()
	s, err := js.Stream(e.t.Context(), eventstream.StreamName)
	if err != nil {
		e.t.Fatal(err)
	}
	rev, err := eventstream.LastRevision(e.t.Context(), s)
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

// useDatabase stops the store and points the next start at dbURL.
func (e *identityEnv) useDatabase(dbURL string) {
	e.t.Helper()
	e.store.stop(syscall.SIGTERM, 10*time.Second)
	pool, err := pgxpool.New(e.t.Context(), dbURL)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	e.pool, e.dbURL = pool, dbURL
}

// startStore starts the store on the current database, at the same address.
func (e *identityEnv) startStore() *proc {
	e.t.Helper()
	p := start(e.t, "store", filepath.Join(binDir, "no8s-store"),
		append([]string{"--listen", e.storeAddr, "--worker-listen", e.c.workerAddr(e.storeAddr), "--database-url", e.dbURL, "--nats-url", e.c.natsURL,
			"--health-listen", e.c.healthAddr("store-identity")}, // the default 7101 may be taken on a shared machine
			e.c.identityArgs(identity.Store)...),
		"NO8S_LOG_LEVEL=debug")
	e.store = p
	return p
}

// expectRefusal starts the store and expects it to refuse to start with an
// error that says what is wrong and names the command that fixes it.
func (e *identityEnv) expectRefusal(reason string) {
	e.t.Helper()
	p := e.startStore()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill9()
		e.t.Fatalf("the store started on a database that does not match the stream; want a refusal naming %q", reason)
	}
	b, _ := os.ReadFile(p.log.Name())
	if p.err == nil {
		e.t.Fatalf("the store exited 0 on a mismatch:\n%s", b)
	}
	for _, want := range []string{reason, "no8s-store rebuild-stream"} {
		if !strings.Contains(string(b), want) {
			e.t.Fatalf("the store's refusal does not say %q:\n%s", want, b)
		}
	}
	e.t.Logf("store refused to start: %s", lastLine(b))
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// rebuild runs the command the refusal names and returns the bump.
func (e *identityEnv) rebuild() int64 {
	e.t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "no8s-store"), append([]string{"rebuild-stream", "--database-url", e.dbURL, "--nats-url", e.c.natsURL},
		e.c.identityArgs(identity.Store)...)...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("rebuild-stream: %v\n%s", err, out)
	}
	var bump int64
	if i := strings.Index(string(out), "revisions continue after "); i >= 0 {
		bump, _ = strconv.ParseInt(strings.TrimRight(strings.Fields(string(out)[i+len("revisions continue after "):])[0], ";"), 10, 64)
	}
	if bump == 0 {
		e.t.Fatalf("rebuild-stream did not report the bump:\n%s", out)
	}
	return bump
}

// createWidget creates the widget name and returns its id. A restarted
// store is reconnected to within a second or two: it retries 503 as the
// API says.
func createWidget(t *testing.T, base, name string) int64 {
	t.Helper()
	body := map[string]any{"name": name, "resource_type_name": "Widget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}}
	r := do(t, "POST", base+"/api/v1/resources", body)
	for deadline := time.Now().Add(10 * time.Second); r.status == 503 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		r = do(t, "POST", base+"/api/v1/resources", body)
	}
	if r.status != 201 {
		t.Fatalf("create %s: %d %s", name, r.status, r.body)
	}
	return int64(r.json(t)["id"].(float64))
}

// startServing starts the store and waits for it to listen.
func (e *identityEnv) startServing() {
	e.t.Helper()
	waitTCP(e.t, e.storeAddr, e.startStore())
}

// listRevision lists the resources and returns the list's revision.
func (e *identityEnv) listRevision() int64 { return listRevision(e.t, e.base) }

// listRevision lists the resources at base and returns the list's revision.
func listRevision(t *testing.T, base string) int64 {
	t.Helper()
	r := do(t, "GET", base+"/api/v1/resources", nil)
	if r.status != 200 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	rv, err := strconv.ParseInt(r.header.Get("X-Resource-Version"), 10, 64)
	if err != nil {
		t.Fatalf("list revision %q: %v", r.header.Get("X-Resource-Version"), err)
	}
	return rv
}

// expectGone checks that a watch resuming after since is refused with 410.
func (e *identityEnv) expectGone(since int64) {
	e.t.Helper()
	_, status, err := dialWatch(e.t.Context(), e.base+"/api/v1/events", since, false, 16)
	if status != 410 {
		e.t.Fatalf("a watch resuming after %d (before the rebuild) got %d (%v), want 410", since, status, err)
	}
}

// expectExactlyOnce watches from since until it has seen every change the
// database committed after since, and checks it saw each once, in order.
func (e *identityEnv) expectExactlyOnce(since int64) {
	e.t.Helper()
	want := e.outboxRevisions(since)
	if len(want) == 0 {
		e.t.Fatalf("no change after %d to watch", since)
	}
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	defer cancel()
	w, _, err := dialWatch(ctx, e.base+"/api/v1/events", since, false, 1024)
	if err != nil {
		e.t.Fatalf("watch from %d: %v", since, err)
	}
	defer w.close()
	var got []int64
	for len(got) < len(want) || got[len(got)-1] < want[len(want)-1] {
		select {
		case ev, ok := <-w.events:
			if !ok {
				e.t.Fatalf("watch from %d ended after %v: %v", since, got, w.err)
			}
			if isChange(ev.name) {
				got = append(got, ev.id)
			}
		case <-ctx.Done():
			e.t.Fatalf("watch from %d: got %v, want %v", since, got, want)
		}
	}
	if !slices.Equal(got, want) {
		e.t.Fatalf("watch from %d: got %v, want exactly %v", since, got, want)
	}
	e.t.Logf("a watch from %d got the %d later changes exactly once", since, len(got))
}

func isChange(name string) bool {
	switch name {
	case eventstream.Created, eventstream.Modified, eventstream.Deleted, eventstream.Reconciled, eventstream.Purged:
		return true
	}
	return false
}

func (e *identityEnv) outboxRevisions(since int64) []int64 {
	e.t.Helper()
	rows, err := e.pool.Query(e.t.Context(), `SELECT revision FROM outbox WHERE revision > $1 ORDER BY revision`, since)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var r int64
		if err := rows.Scan(&r); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// settle waits until the relay has published every committed change.
func (e *identityEnv) settle() {
	e.t.Helper()
	waitFor(e.t, 30*time.Second, "the relay to publish everything", func() error {
		var last, published int64
		if err := e.pool.QueryRow(e.t.Context(), `SELECT coalesce(pg_sequence_last_value('revision_seq'), 0), r.published_revision FROM relay_state r`).Scan(&last, &published); err != nil {
			return err
		}
		if published < last {
			return fmt.Errorf("published up to %d of %d", published, last)
		}
		return nil
	})
}

// afterRebuild checks what must hold once the stream is rebuilt at bump:
// resumes before it are refused, new resources are reconciled and a watch
// from a list after the rebuild sees each later change once.
func (e *identityEnv) afterRebuild(bump int64, oldPoints ...int64) {
	e.t.Helper()
	for _, p := range append(oldPoints, bump-1) {
		e.expectGone(p)
	}
	rv := e.listRevision()
	if rv < bump {
		e.t.Fatalf("a list after the rebuild returned revision %d, below the bump %d", rv, bump)
	}
	e.createReady("after", 5)
	e.settle()
	e.expectExactlyOnce(rv)
}

// TestStreamFreshDatabaseOldStream: the stream was filled by another
// database (the dev data directory outlived its database, or DATABASE_URL
// changed). The store refuses to start, naming the fix; after it, nothing is
// skipped.
func TestStreamFreshDatabaseOldStream(t *testing.T) {
	e := newIdentityEnv(t)
	e.createReady("before", 5)
	e.settle()
	oldHigh := e.streamHigh()

	e.useDatabase(testenv.Database(t))
	e.expectRefusal("filled by another database")
	bump := e.rebuild()
	if bump <= oldHigh {
		t.Fatalf("bump %d is not past the old stream's revision %d", bump, oldHigh)
	}
	e.startServing()
	e.createType()
	e.afterRebuild(bump, oldHigh, 0)
}

// TestStreamRestoredOlderDump: the database is restored from an older
// pg_dump while the stream went on: the database is behind the stream.
func TestStreamRestoredOlderDump(t *testing.T) {
	e := newIdentityEnv(t)
	e.createReady("before", 3)
	e.settle()
	dump := filepath.Join(t.TempDir(), "dump.sql")
	if out, err := exec.Command("pg_dump", "--no-owner", "-f", dump, e.dbURL).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	var dumpRev int64
	if err := e.pool.QueryRow(t.Context(), `SELECT coalesce(pg_sequence_last_value('revision_seq'), 0)`).Scan(&dumpRev); err != nil {
		t.Fatal(err)
	}
	e.createReady("later", 3)
	e.settle()
	newerHigh := e.streamHigh()
	// A watcher connected across the restore and the rebuild.
	live, _, err := dialWatch(t.Context(), e.base+"/api/v1/events", -1, false, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer live.close()

	restored := testenv.Database(t)
	if out, err := exec.Command("psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", dump, restored).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	e.useDatabase(restored)
	e.expectRefusal("which the database has not reached")
	bump := e.rebuild()
	if bump <= newerHigh {
		t.Fatalf("bump %d is not past the stream's revision %d", bump, newerHigh)
	}
	e.startServing()
	e.afterRebuild(bump, newerHigh, dumpRev)
	expectEndedGone(t, live, bump)
}

// expectEndedGone checks that a watch open across a rebuild at bump ended
// with ERROR gone before it delivered any change after the bump: it cannot
// know what was compacted, so it must list again.
func expectEndedGone(t *testing.T, w *sseConn, bump int64) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatalf("the live watch ended without ERROR gone: %v", w.err)
			}
			if ev.name == "ERROR" {
				if !strings.Contains(string(ev.data), `"code":"gone"`) {
					t.Fatalf("the live watch ended with %s", ev.data)
				}
				// It says why: the stream was rebuilt (or reset), not that
				// events expired.
				if !strings.Contains(string(ev.data), "the event stream was re") {
					t.Fatalf("the live watch's ERROR gone does not say the stream was rebuilt: %s", ev.data)
				}
				t.Logf("the watch open across the rebuild ended with %s", ev.data)
				return
			}
			if isChange(ev.name) && ev.id > bump {
				t.Fatalf("the live watch delivered revision %d after the rebuild at %d without ending first", ev.id, bump)
			}
		case <-timeout:
			t.Fatal("the live watch open across the rebuild neither ended nor errored")
		}
	}
}

// TestStreamDeletedRebuiltFromOutbox: the stream is deleted while the
// database is intact and the store runs. The relay recreates it from the
// outbox: a watcher resuming anywhere gets every later change once, and new
// resources are reconciled.
func TestStreamDeletedRebuiltFromOutbox(t *testing.T) {
	e := newIdentityEnv(t)
	e.createReady("before", 5)
	e.settle()
	mid := e.outboxRevisions(0)
	resumeAt := mid[len(mid)/2]

	js, _ := e.c.jetstream()
	if err := js.DeleteStream(t.Context(), eventstream.StreamName); err != nil {
		t.Fatal(err)
	}
	e.createReady("after", 5)
	e.settle()
	e.expectExactlyOnce(resumeAt)
	e.expectExactlyOnce(0)
	// The republished events are the outbox's own.
	s, err := js.Stream(t.Context(), eventstream.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.outboxRevisions(0)); info.State.Msgs != uint64(n) {
		t.Fatalf("the rebuilt stream holds %d events, the outbox %d", info.State.Msgs, n)
	}
	m, err := s.GetMsg(t.Context(), info.State.FirstSeq)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(eventstream.StoreIDHeader) == "" {
		t.Fatalf("a republished event carries no %s header", eventstream.StoreIDHeader)
	}
}
