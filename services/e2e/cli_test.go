package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// examples is the folder of the documented YAML examples, which the CLI
// tests apply as they are.
var examples = filepath.Join("..", "..", "docs", "examples")

// cliResult is what one run of the no8s binary did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// no8s runs the real no8s binary against server with a configuration of its
// own (no file: flags and environment only).
func no8s(t *testing.T, server, stdin string, args ...string) cliResult {
	t.Helper()
	return no8sEnv(t, cliEnv(t, server), stdin, args...)
}

// cliEnv is the environment of a no8s run against server with no
// configuration file.
func cliEnv(t *testing.T, server string) []string {
	return []string{"NO8S_SERVER=" + server, "NO8S_CONFIG=" + filepath.Join(t.TempDir(), "none.yaml"), "NO8S_TOKEN=" + adminToken}
}

// no8sEnv runs the real no8s binary with env added to the test's
// environment (NO8S_* variables of the test's own are left out).
func no8sEnv(t *testing.T, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "no8s"), args...)
	cmd.Env = append(withoutNo8sEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		// Not run (or killed): code -1, which every caller checks; no
		// t.Fatal here, so that goroutines may run no8s too.
		code = -1
		fmt.Fprintf(&errb, "\nno8s %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

// withoutNo8sEnv is the test's environment without NO8S_ variables, so
// that a run says exactly which settings it uses.
func withoutNo8sEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NO8S_") || strings.HasPrefix(kv, "NO8S_BIN=") {
			env = append(env, kv)
		}
	}
	return env
}

// ok runs no8s and fails unless it exits 0.
func ok(t *testing.T, server string, args ...string) string {
	t.Helper()
	r := no8s(t, server, "", args...)
	if r.code != 0 {
		t.Fatalf("no8s %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// expectOut fails unless out holds every want.
func expectOut(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("%s: %q lacks %q", what, out, w)
		}
	}
}

// cliResource is the part of a resource the tests read.
type cliResource struct {
	ID              int64             `json:"id"`
	Namespace       string            `json:"namespace"`
	Generation      int64             `json:"generation"`
	ResourceVersion int64             `json:"resource_version"`
	Status          string            `json:"status"`
	Labels          map[string]string `json:"labels"`
	Spec            map[string]any    `json:"spec"`
}

func getJSON(t *testing.T, server string, args ...string) cliResource {
	t.Helper()
	var r cliResource
	out := ok(t, server, append(append([]string{"get"}, args...), "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("get -o json: %v\n%s", err, out)
	}
	return r
}

// TestCLISeedFlow is the seed README's flow done with the no8s binary from
// the YAML files in docs/examples: register the type, create the resource,
// wait for Ready, list with selectors, change it (diff first), inspect it,
// reconcile it, delete it; apply is idempotent and diff's exit codes tell.
func TestCLISeedFlow(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "s1", 0)
	c.startReconciler(c.storeAddrs[0], "DatabaseCluster/v1")
	typ, pg, pg600 := filepath.Join(examples, "databasecluster.yaml"), filepath.Join(examples, "production-pg.yaml"), filepath.Join(examples, "production-pg-600.yaml")

	expectOut(t, "apply type", ok(t, base, "apply", "-f", typ), "ResourceType DatabaseCluster/v1 created")
	expectOut(t, "apply type again", ok(t, base, "apply", "-f", typ), "ResourceType DatabaseCluster/v1 unchanged")
	expectOut(t, "get types", ok(t, base, "get", "types"), "NAME", "DatabaseCluster      v1")

	// A server dry run stores nothing.
	expectOut(t, "dry run", ok(t, base, "apply", "-f", pg, "--dry-run=server"), "DatabaseCluster/v1 default/production-pg created (server dry run)")
	if r := no8s(t, base, "", "get", "DatabaseCluster/v1", "production-pg"); r.code != 1 || !strings.Contains(r.stderr, "404 not_found") {
		t.Fatalf("after a dry run: %+v", r)
	}
	// diff of a missing resource: everything is new.
	if r := no8s(t, base, "", "diff", "-f", pg); r.code != 1 || !strings.Contains(r.stdout, "+  storage_gb: 500") {
		t.Fatalf("diff before create: %+v", r)
	}

	// From standard input, as in a pipeline.
	data, err := os.ReadFile(pg)
	if err != nil {
		t.Fatal(err)
	}
	if r := no8s(t, base, string(data), "apply", "-f", "-"); r.code != 0 || !strings.Contains(r.stdout, "DatabaseCluster/v1 default/production-pg created") {
		t.Fatalf("apply -f -: %+v", r)
	}
	waited := no8s(t, base, "", "wait", "DatabaseCluster/v1", "production-pg", "--for=condition=Ready", "--timeout=60s")
	if waited.code != 0 || !strings.Contains(waited.stdout, "condition Ready=True met") {
		t.Fatalf("wait: %+v", waited)
	}
	table := ok(t, base, "get", "DatabaseCluster")
	expectOut(t, "get table", table, "NAMESPACE   NAME            STATUS   READY   AGE", "default     production-pg   ready    True")

	// The same document again: nothing changes, no event.
	before := getJSON(t, base, "DatabaseCluster/v1", "production-pg")
	published := c.waitPublished()
	for range 2 {
		expectOut(t, "re-apply", ok(t, base, "apply", "-f", pg), "DatabaseCluster/v1 default/production-pg unchanged")
	}
	after := getJSON(t, base, "DatabaseCluster/v1", "production-pg")
	if after.Generation != before.Generation || after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("re-apply changed generation %d→%d, resource_version %d→%d", before.Generation, after.Generation, before.ResourceVersion, after.ResourceVersion)
	}
	if evs := c.outboxEvents(published); len(evs) != 0 {
		t.Fatalf("re-apply made %d event(s), the first %s rev %d", len(evs), evs[0].ev.Type, evs[0].rev)
	}

	// diff: 0 when apply would change nothing, 1 (and the change) otherwise.
	if r := no8s(t, base, "", "diff", "-f", pg); r.code != 0 || r.stdout != "" {
		t.Fatalf("diff of the applied file: %+v", r)
	}
	d := no8s(t, base, "", "diff", "-f", pg600)
	if d.code != 1 {
		t.Fatalf("diff of a change: %+v", d)
	}
	expectOut(t, "diff", d.stdout, "--- live DatabaseCluster/v1 default/production-pg", "+++ applied DatabaseCluster/v1 default/production-pg", "-  storage_gb: 500", "+  storage_gb: 600")

	// Selectors (the seed's label_selector examples).
	expectOut(t, "-l tier=db", ok(t, base, "get", "DatabaseCluster/v1", "-l", "tier=db", "-o", "name"), "DatabaseCluster/v1/production-pg")
	if out := ok(t, base, "get", "resources", "-l", "tier!=db", "-o", "name"); out != "" {
		t.Fatalf("-l tier!=db: %q", out)
	}

	expectOut(t, "apply 600", ok(t, base, "apply", "-f", pg600), "DatabaseCluster/v1 default/production-pg configured")
	ok(t, base, "wait", "DatabaseCluster/v1", "production-pg", "--for=condition=Ready", "--timeout=60s")
	changed := getJSON(t, base, "DatabaseCluster", "production-pg")
	if changed.Generation != before.Generation+1 || changed.Spec["storage_gb"] != float64(600) || changed.Namespace != "default" {
		t.Fatalf("after the change: %+v", changed)
	}
	// Events (the Kubernetes kind) recorded on it, one of them twice: describe
	// shows them, oldest first, the repeated one with its count.
	events := fmt.Sprintf("%s/api/v1/resources/%d/event-records", base, changed.ID)
	for _, e := range []map[string]any{
		{"type": "Normal", "reason": "Provisioned", "message": "storage resized to 600 GB", "source": "e2e"},
		{"type": "Warning", "reason": "BackupFailed", "message": "bucket unreachable", "source": "e2e"},
		{"type": "Warning", "reason": "BackupFailed", "message": "bucket unreachable", "source": "e2e"},
	} {
		if r := do(t, "POST", events, e); r.status != 201 {
			t.Fatalf("record an Event: %d %s", r.status, r.body)
		}
	}
	desc := ok(t, base, "describe", "DatabaseCluster/v1", "production-pg")
	expectOut(t, "describe", desc,
		"Name:              production-pg", "Namespace:         default", "storage_gb: 600", "Finalizers:        reconciler.no8s.io/noop",
		"Recent history:", "Events:\n  TYPE     REASON        AGE", "  Normal   Provisioned   ", "  e2e   storage resized to 600 GB\n",
		"  Warning  BackupFailed  ", " (x2 over ", "  e2e   bucket unreachable\n")
	// The conditions table pads its TYPE column to the longest type: other
	// conditions (ReconcilerAvailable) may widen it.
	if !regexp.MustCompile(`(?m)^\s+Ready\s+True\b`).MatchString(desc) {
		t.Fatalf("describe does not show Ready True:\n%s", desc)
	}
	if strings.Index(desc, "Provisioned") > strings.Index(desc, "BackupFailed") {
		t.Fatalf("describe's Events are not oldest first:\n%s", desc)
	}
	expectOut(t, "history", ok(t, base, "history", "DatabaseCluster/v1", "production-pg"), "GENERATION", "success")
	expectOut(t, "outputs", ok(t, base, "outputs", "DatabaseCluster/v1", "production-pg", "-o", "json"), "{")
	expectOut(t, "reconcile", ok(t, base, "reconcile", "DatabaseCluster/v1", "production-pg"), "reconcile requested")
	expectOut(t, "yaml", ok(t, base, "get", "DatabaseCluster/v1", "production-pg", "-o", "yaml"), "name: production-pg", "storage_gb: 600")

	// wait fails clearly on timeout, saying what it waited for and where the
	// resource stands; progress went to stderr meanwhile.
	w := no8s(t, base, "", "wait", "DatabaseCluster/v1", "production-pg", "--for=condition=Degraded", "--timeout=6s")
	if w.code != 1 {
		t.Fatalf("wait for a condition that never comes: %+v", w)
	}
	expectOut(t, "wait timeout", w.stderr, "waiting for condition Degraded=True on DatabaseCluster/v1 default/production-pg",
		"error: timed out after 6s waiting for condition Degraded=True on DatabaseCluster/v1 default/production-pg: status ", "no Degraded condition yet")

	// Bad input: the server's message and field paths; nothing written.
	bad := no8s(t, base, "kind: Resource\ntype: DatabaseCluster/v1\nmetadata: {name: small}\nspec: {engine: oracle, storage_gb: 5}\n", "apply", "-f", "-")
	if bad.code != 1 {
		t.Fatalf("bad apply: %+v", bad)
	}
	expectOut(t, "bad apply", bad.stderr, "-: document 1 (line 1): DatabaseCluster/v1 default/small: Error from server (400 validation_failed)", "/spec/engine", "/spec/storage_gb: must be >= 10")
	if r := no8s(t, base, "", "get", "DatabaseCluster/v1", "small"); r.code != 1 {
		t.Fatalf("the bad resource exists: %+v", r)
	}

	del := no8s(t, base, "", "delete", "DatabaseCluster/v1", "production-pg", "--wait", "--timeout=60s")
	if del.code != 0 {
		t.Fatalf("delete --wait: %+v", del)
	}
	expectOut(t, "delete", del.stdout, "deletion requested", "DatabaseCluster/v1 default/production-pg deleted")
	if r := no8s(t, base, "", "get", "DatabaseCluster/v1", "production-pg"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("after delete: %+v", r)
	}
	if r := no8s(t, base, "", "get", "DatabaseCluster"); r.code != 0 || !strings.Contains(r.stderr, "No resources found in namespace default.") {
		t.Fatalf("empty list: %+v", r)
	}
	// wait --for=delete of a resource already gone: deleted, as kubectl
	// has it (delete then wait, when the purge wins the race).
	if r := no8s(t, base, "", "wait", "DatabaseCluster/v1", "production-pg", "--for=delete", "--timeout=5s"); r.code != 0 ||
		!strings.Contains(r.stdout, "DatabaseCluster/v1 default/production-pg deleted") {
		t.Fatalf("wait --for=delete of a resource already gone: %+v", r)
	}
	// ... but a type that does not exist is still an error.
	if r := no8s(t, base, "", "wait", "NoSuchType/v1", "production-pg", "--for=delete", "--timeout=5s"); r.code != 1 ||
		!strings.Contains(r.stderr, "there is no resource type NoSuchType/v1") {
		t.Fatalf("wait --for=delete of an unknown type: %+v", r)
	}
	expectOut(t, "delete type", ok(t, base, "delete", "-f", typ), "ResourceType DatabaseCluster/v1 deleted")
	expectOut(t, "version", ok(t, base, "version"), "Client Version: no8s", "Server: "+base+" (API v1)")
}

// watchLine is one line of `no8s get -w -o json`.
type watchLine struct {
	Type     string      `json:"type"`
	Revision int64       `json:"revision"`
	Resource cliResource `json:"resource"`
}

// cliWatch is a running `no8s get -w -o json`: its output lines, read as
// they come.
type cliWatch struct {
	t        *testing.T
	cmd      *exec.Cmd
	stderr   bytes.Buffer
	readDone chan struct{}

	mu    sync.Mutex
	lines []watchLine
	bad   []string
}

// startCLIWatch runs no8s with args (a watch with -o json) and env; the
// process ends with the test at the latest.
func startCLIWatch(t *testing.T, env []string, args ...string) *cliWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	w := &cliWatch{t: t, readDone: make(chan struct{})}
	w.cmd = exec.CommandContext(ctx, filepath.Join(binDir, "no8s"), args...)
	w.cmd.Env = append(withoutNo8sEnv(), env...)
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.Stderr = &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l watchLine
			w.mu.Lock()
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				w.bad = append(w.bad, sc.Text())
			} else {
				w.lines = append(w.lines, l)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// snapshot is every line printed so far.
func (w *cliWatch) snapshot() []watchLine {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]watchLine(nil), w.lines...)
}

// stop ends the watch as a user would (Ctrl-C), fails unless it exits 0
// having printed only JSON lines, and returns its lines and stderr.
func (w *cliWatch) stop() ([]watchLine, string) {
	w.t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGINT)
	<-w.readDone
	if err := w.cmd.Wait(); err != nil {
		w.t.Fatalf("the watch ended with %v\nstderr: %s", err, w.stderr.String())
	}
	if len(w.bad) > 0 {
		w.t.Fatalf("lines that are not JSON: %q", w.bad)
	}
	return w.snapshot(), w.stderr.String()
}

// TestCLIWatchAcrossGatewayRestarts: `no8s get -w` on one of two gateways
// while that gateway is killed with SIGKILL and restarted three times, and
// 100 changes per cycle go through the other gateway while it is down (with
// `no8s apply` of a 100-document file). The watch's output holds every
// committed change of the type after its list, exactly once, in revision
// order, equal to the store's outbox.
func TestCLIWatchAcrossGatewayRestarts(t *testing.T) {
	c := newCluster(t)
	c.startStore("")
	adm := c.startAdmission(c.storeAddrs[0])
	watchedAddr := freeAddr(t)
	watched := c.startGatewayAt(watchedAddr, c.storeAddrs[0], adm, watchFlags...)
	other := c.startGateway(c.storeAddrs[0], adm)
	c.startReconciler(c.storeAddrs[0], "Counter/v1") // the live-reconciler rule; no scheduler: no status writes
	r := no8s(t, other, "kind: ResourceType\nmetadata: {name: Counter}\nversion: v1\nschema: {type: object, properties: {round: {type: integer}}}\n---\n"+
		"kind: Resource\ntype: Counter/v1\nmetadata: {name: seed}\nspec: {round: 0}\n", "apply", "-f", "-")
	if r.code != 0 {
		t.Fatalf("setup: %+v", r)
	}
	seed := getJSON(t, other, "Counter/v1", "seed")

	w := startCLIWatch(t, cliEnv(t, "http://"+watchedAddr), "get", "Counter/v1", "-w", "-o", "json")
	snapshot := w.snapshot
	waitFor(t, 30*time.Second, "the watch's list", func() error {
		if l := snapshot(); len(l) == 0 || l[0].Type != "LISTED" {
			return fmt.Errorf("no list yet: %v", l)
		}
		return nil
	})

	// A change the watch prints: its event stream is live before the first kill.
	if r := no8s(t, other, "kind: Resource\ntype: Counter/v1\nmetadata: {name: seed}\nspec: {round: 1}\n", "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("warm-up change: %+v", r)
	}
	warm := getJSON(t, other, "Counter/v1", "seed").ResourceVersion
	waitFor(t, 30*time.Second, "the watch to print the warm-up change", func() error {
		if l := snapshot(); l[len(l)-1].Revision < warm {
			return fmt.Errorf("at revision %d of %d", l[len(l)-1].Revision, warm)
		}
		return nil
	})

	const perCycle = 100
	for cycle := 1; cycle <= 3; cycle++ {
		watched.kill9()
		var doc strings.Builder
		for i := range perCycle {
			fmt.Fprintf(&doc, "---\nkind: Resource\ntype: Counter/v1\nmetadata: {name: item-%d}\nspec: {round: %d}\n", i, cycle)
		}
		r := no8s(t, other, doc.String(), "apply", "-f", "-")
		if r.code != 0 || strings.Count(r.stdout, "\n") != perCycle {
			t.Fatalf("cycle %d: apply: %+v", cycle, r)
		}
		watched = c.startGatewayAt(watchedAddr, c.storeAddrs[0], adm, watchFlags...)
		// The watch reconnects to the restarted gateway and catches up before
		// the next kill, so each kill cuts a live watch.
		newest := getJSON(t, other, "Counter/v1", fmt.Sprintf("item-%d", perCycle-1)).ResourceVersion
		waitFor(t, 60*time.Second, fmt.Sprintf("the watch to catch up after restart %d", cycle), func() error {
			if l := snapshot(); l[len(l)-1].Revision < newest {
				return fmt.Errorf("at revision %d of %d", l[len(l)-1].Revision, newest)
			}
			return nil
		})
	}
	// Changes while both gateways are up, then a last one as a marker: once
	// the watch printed it, it printed everything before it (the output is
	// in revision order), duplicates of earlier changes included.
	var doc strings.Builder
	for i := range 5 {
		fmt.Fprintf(&doc, "---\nkind: Resource\ntype: Counter/v1\nmetadata: {name: item-%d}\nspec: {round: 4}\n", i)
	}
	if r := no8s(t, other, doc.String(), "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("changes with both up: %+v", r)
	}
	r = no8s(t, other, "kind: Resource\ntype: Counter/v1\nmetadata: {name: seed}\nspec: {round: 9}\n", "apply", "-f", "-")
	if r.code != 0 {
		t.Fatalf("marker: %+v", r)
	}
	marker := getJSON(t, other, "Counter/v1", "seed")

	last := c.waitPublished()
	var want []committed
	for _, e := range c.outboxEvents(seed.ResourceVersion) {
		if e.ev.ResourceTypeName == "Counter" {
			want = append(want, e)
		}
	}
	if len(want) < 3*perCycle+7 || want[len(want)-1].rev != marker.ResourceVersion {
		t.Fatalf("%d committed changes, the last at %d (marker %d)", len(want), want[len(want)-1].rev, marker.ResourceVersion)
	}
	waitFor(t, 90*time.Second, "the watch to print every change", func() error {
		l := snapshot()
		if n := len(l); n > 0 && l[n-1].Revision >= marker.ResourceVersion {
			return nil
		}
		return fmt.Errorf("%d lines so far, want revision %d (store at %d)", len(l), marker.ResourceVersion, last)
	})
	// Stop the watch as a user would (Ctrl-C).
	got, stderr := w.stop()
	if got[0].Type != "LISTED" || got[0].Resource.ID != seed.ID || len(got) < 2 || got[1].Type == "LISTED" {
		t.Fatalf("the list: %+v", got[:min(len(got), 2)])
	}
	events := got[1:]
	var gotRevs, wantRevs []int64
	for _, e := range events {
		gotRevs = append(gotRevs, e.Revision)
	}
	for i, w := range want {
		wantRevs = append(wantRevs, w.rev)
		if i < len(events) && (events[i].Type != w.ev.Type || events[i].Resource.ID != w.ev.ResourceID || events[i].Resource.ResourceVersion != w.rev) {
			t.Fatalf("change %d: got %s %d rev %d, committed %s %d rev %d", i, events[i].Type, events[i].Resource.ID, events[i].Revision, w.ev.Type, w.ev.ResourceID, w.rev)
		}
	}
	if d := firstDiff(gotRevs, wantRevs); d != "none" {
		t.Fatalf("the watch's %d changes differ from the %d committed: %s\nstderr: %s", len(gotRevs), len(wantRevs), d, stderr)
	}
	if n := strings.Count(stderr, "watch: read the event stream"); n < 3 {
		t.Fatalf("%d cut connections noted on stderr, want at least 3:\n%s", n, stderr)
	}
	t.Logf("%d changes watched across 3 kill -9 restarts; stderr:\n%s", len(events), stderr)

	// get reads every page: 101 resources in pages of 7.
	if names := strings.Fields(ok(t, other, "get", "Counter/v1", "--chunk-size", "7", "-o", "name")); len(names) != perCycle+1 || names[0] != "Counter/v1/seed" {
		t.Fatalf("paged list: %d names, first %v", len(names), names[:min(len(names), 1)])
	}
}

// TestCLINamespaces: namespaces with the no8s binary, as a user would use
// them. A file holding a Namespace and a resource in it is applied in one go
// (diff and a server dry run first); the same name goes into three
// namespaces (default, cli-a from the manifest, cli-b from -n); get -n, get
// -A and a context's namespace pick the right ones; get -w -n cli-a prints
// exactly cli-a's committed changes; describe namespace counts its
// resources; delete namespace --wait returns once it is gone, its resource
// cleaned up by the reconciler and cli-b's untouched.
func TestCLINamespaces(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "s1", 0)
	c.startReconciler(c.storeAddrs[0], "Widget/v1")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	typ := write("widget.yaml", "kind: ResourceType\nmetadata: {name: Widget}\nversion: v1\nschema: {type: object, properties: {size: {type: integer, minimum: 1}}}\n")
	// The namespace last in the file: apply orders it first.
	inA := write("cli-a.yaml", "kind: Resource\ntype: Widget/v1\nmetadata: {name: same, namespace: cli-a}\nspec: {size: 1}\n---\nkind: Namespace\nmetadata: {name: cli-a}\n")
	same := write("same.yaml", "kind: Resource\ntype: Widget/v1\nmetadata: {name: same}\nspec: {size: 2}\n")
	expectOut(t, "apply type", ok(t, base, "apply", "-f", typ), "ResourceType Widget/v1 created")

	// Before the namespace exists: diff shows it and the resource (as
	// written: the server cannot check a resource in a missing namespace),
	// and a server dry run stores neither.
	d := no8s(t, base, "", "diff", "-f", inA)
	if d.code != 1 {
		t.Fatalf("diff of a new namespace: %+v", d)
	}
	expectOut(t, "diff", d.stdout, "+++ applied Namespace cli-a", "+kind: Namespace", "+  name: cli-a", "+++ applied Widget/v1 cli-a/same", "+  namespace: cli-a", "+  size: 1")
	expectOut(t, "diff notes", d.stderr, "Widget/v1 cli-a/same: shown as written, not checked by the server: namespace cli-a would be created first")
	expectOut(t, "dry run", ok(t, base, "apply", "-f", inA, "--dry-run=server"), "Namespace cli-a created (server dry run)\n",
		"Widget/v1 cli-a/same created (server dry run; not checked by the server: namespace cli-a would be created first)")
	if r := no8s(t, base, "", "get", "namespace", "cli-a"); r.code != 1 || !strings.Contains(r.stderr, "404 not_found") {
		t.Fatalf("the namespace after a dry run: %+v", r)
	}
	// Without the Namespace document, the server says the namespace is missing.
	if r := no8s(t, base, "", "apply", "-f", same, "-n", "cli-a"); r.code != 1 || !strings.Contains(r.stderr, "404 namespace_not_found") {
		t.Fatalf("apply into a missing namespace: %+v", r)
	}

	// In one go: the namespace, then the resource in it; again: unchanged.
	out := ok(t, base, "apply", "-f", inA)
	if want := "Namespace cli-a created\nWidget/v1 cli-a/same created\n"; out != want {
		t.Fatalf("apply -f %s: %q, want %q", inA, out, want)
	}
	expectOut(t, "apply again", ok(t, base, "apply", "-f", inA), "Namespace cli-a unchanged", "Widget/v1 cli-a/same unchanged")
	if r := no8s(t, base, "", "diff", "-f", inA); r.code != 0 || r.stdout != "" {
		t.Fatalf("diff after apply: %+v", r)
	}
	// cli-b from standard input; the same document into cli-b (-n) and
	// default (no -n).
	expectOut(t, "namespace from stdin", no8s(t, base, "kind: Namespace\nmetadata: {name: cli-b}\n", "apply", "-f", "-").stdout, "Namespace cli-b created")
	expectOut(t, "apply -n cli-b", ok(t, base, "apply", "-f", same, "-n", "cli-b"), "Widget/v1 cli-b/same created")
	expectOut(t, "apply default", ok(t, base, "apply", "-f", same), "Widget/v1 default/same created")
	if r := no8s(t, base, "", "apply", "-f", inA, "-n", "cli-b"); r.code != 1 || !strings.Contains(r.stderr, `the document's namespace "cli-a" does not match --namespace "cli-b"`) {
		t.Fatalf("a document contradicting -n: %+v", r)
	}
	ids := map[string]int64{}
	for _, ns := range []string{"default", "cli-a", "cli-b"} {
		ok(t, base, "wait", "Widget/v1", "same", "-n", ns, "--for=condition=Ready", "--timeout=60s")
		r := getJSON(t, base, "Widget/v1", "same", "-n", ns)
		if r.Namespace != ns {
			t.Fatalf("get -n %s: namespace %q", ns, r.Namespace)
		}
		ids[ns] = r.ID
	}
	if ids["cli-a"] == ids["cli-b"] || ids["cli-a"] == ids["default"] {
		t.Fatalf("one name, three namespaces, ids %v", ids)
	}

	// get -n and get -A.
	list := func(env []string, args ...string) map[string]int64 {
		t.Helper()
		r := no8sEnv(t, env, "", append([]string{"get", "Widget/v1", "-o", "json"}, args...)...)
		if r.code != 0 {
			t.Fatalf("get %v: %+v", args, r)
		}
		var items []cliResource
		if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
			t.Fatalf("get %v: %v\n%s", args, err, r.stdout)
		}
		got := map[string]int64{}
		for _, it := range items {
			got[it.Namespace] = it.ID
		}
		return got
	}
	env := cliEnv(t, base)
	for _, tc := range []struct {
		args []string
		want []string
	}{{nil, []string{"default"}}, {[]string{"-n", "cli-a"}, []string{"cli-a"}}, {[]string{"-n", "cli-b"}, []string{"cli-b"}}, {[]string{"-A"}, []string{"default", "cli-a", "cli-b"}}} {
		got := list(env, tc.args...)
		if len(got) != len(tc.want) {
			t.Fatalf("get %v: %v, want %v", tc.args, got, tc.want)
		}
		for _, ns := range tc.want {
			if got[ns] != ids[ns] {
				t.Fatalf("get %v: %v, want %s's %d", tc.args, got, ns, ids[ns])
			}
		}
	}
	table := ok(t, base, "get", "Widget", "-A")
	expectOut(t, "get -A", table, "NAMESPACE   NAME   STATUS   READY   AGE", "default     same   ready    True", "cli-a       same   ready    True", "cli-b       same   ready    True")
	expectOut(t, "get -n cli-b", ok(t, base, "get", "resources", "-n", "cli-b"), "cli-b       same")
	if out := ok(t, base, "get", "resources", "-n", "cli-b"); strings.Contains(out, "cli-a") || strings.Contains(out, "default") {
		t.Fatalf("get -n cli-b shows others:\n%s", out)
	}
	expectOut(t, "get namespaces", ok(t, base, "get", "namespaces"), "NAME      STATUS   AGE", "cli-a     active", "cli-b     active", "default   active")
	if names := ok(t, base, "get", "ns", "-o", "name"); names != "cli-a\ncli-b\ndefault\n" {
		t.Fatalf("get ns -o name: %q", names)
	}
	// Shell completion offers the server's namespaces for -n and after
	// "delete namespace".
	for _, args := range [][]string{{"__complete", "get", "resources", "-n", ""}, {"__complete", "delete", "namespace", ""}} {
		if out := ok(t, base, args...); !strings.HasPrefix(out, "cli-a\ncli-b\ndefault\n:") {
			t.Fatalf("no8s %v: %q", args, out)
		}
	}

	// A context's namespace is used when -n is absent; -n still wins.
	cfg := filepath.Join(dir, "config.yaml")
	ctxEnv := []string{"NO8S_CONFIG=" + cfg}
	if r := no8sEnv(t, ctxEnv, "", "config", "set-context", "team-b", "--server", base, "--namespace", "cli-b", "--token", adminToken); r.code != 0 {
		t.Fatalf("set-context: %+v", r)
	}
	if r := no8sEnv(t, ctxEnv, "", "config", "use-context", "team-b"); r.code != 0 {
		t.Fatalf("use-context: %+v", r)
	}
	if got := list(ctxEnv); len(got) != 1 || got["cli-b"] != ids["cli-b"] {
		t.Fatalf("get with the context's namespace: %v, want cli-b's %d", got, ids["cli-b"])
	}
	if got := list(ctxEnv, "-n", "cli-a"); len(got) != 1 || got["cli-a"] != ids["cli-a"] {
		t.Fatalf("get -n cli-a over the context: %v", got)
	}
	if r := no8sEnv(t, ctxEnv, "", "apply", "-f", same); r.code != 0 || !strings.Contains(r.stdout, "Widget/v1 cli-b/same unchanged") {
		t.Fatalf("apply in the context's namespace: %+v", r)
	}

	// get -w -n cli-a: cli-a's changes only, each once, in order, exactly
	// the committed ones.
	w := startCLIWatch(t, env, "get", "Widget/v1", "-w", "-n", "cli-a", "-o", "json")
	waitFor(t, 30*time.Second, "the watch's list", func() error {
		if l := w.snapshot(); len(l) == 0 || l[0].Type != "LISTED" {
			return fmt.Errorf("no list yet: %v", l)
		}
		return nil
	})
	from := w.snapshot()[0].Resource.ResourceVersion
	applyTo := func(ns, doc string) {
		t.Helper()
		if r := no8s(t, base, doc, "apply", "-f", "-", "-n", ns); r.code != 0 {
			t.Fatalf("apply in %s: %+v", ns, r)
		}
	}
	for round := 3; round <= 5; round++ {
		for _, ns := range []string{"cli-b", "default", "cli-a"} {
			applyTo(ns, fmt.Sprintf("kind: Resource\ntype: Widget/v1\nmetadata: {name: same}\nspec: {size: %d}\n", round))
		}
	}
	applyTo("cli-b", "kind: Resource\ntype: Widget/v1\nmetadata: {name: only-b}\nspec: {size: 1}\n")
	applyTo("cli-a", "kind: Resource\ntype: Widget/v1\nmetadata: {name: late}\nspec: {size: 1}\n")
	ok(t, base, "wait", "Widget/v1", "late", "same", "-n", "cli-a", "--for=condition=Ready", "--timeout=60s")
	marker := getJSON(t, base, "Widget/v1", "late", "-n", "cli-a").ResourceVersion
	c.waitPublished()
	var want []committed
	for _, e := range c.outboxEvents(from) {
		if e.ev.Namespace == "cli-a" && e.rev <= marker {
			want = append(want, e)
		}
	}
	waitFor(t, 60*time.Second, "the watch to print cli-a's changes", func() error {
		l := w.snapshot()
		if n := len(l); n > 0 && l[n-1].Revision >= marker {
			return nil
		}
		return fmt.Errorf("%d lines, want revision %d", len(l), marker)
	})
	lines, stderr := w.stop()
	var gotRevs, wantRevs []int64
	for _, l := range lines[1:] {
		if l.Type == "LISTED" || l.Resource.Namespace != "cli-a" {
			t.Fatalf("the cli-a watch printed %s of %s/%d at %d\nstderr: %s", l.Type, l.Resource.Namespace, l.Resource.ID, l.Revision, stderr)
		}
		if l.Revision <= marker {
			gotRevs = append(gotRevs, l.Revision)
		}
	}
	for _, e := range want {
		wantRevs = append(wantRevs, e.rev)
	}
	if d := firstDiff(gotRevs, wantRevs); d != "none" {
		t.Fatalf("the cli-a watch's %d changes differ from cli-a's %d committed: %s", len(gotRevs), len(wantRevs), d)
	}
	if len(wantRevs) < 4 {
		t.Fatalf("only %d changes in cli-a", len(wantRevs))
	}
	t.Logf("get -w -n cli-a printed cli-a's %d changes and none of the other namespaces'", len(gotRevs))

	// describe namespace, then delete it and wait until it is gone.
	expectOut(t, "describe namespace", ok(t, base, "describe", "namespace", "cli-a"), "Name:              cli-a", "Status:            active", "Widget/v1  2      2 ready")
	del := no8s(t, base, "", "delete", "namespace", "cli-a", "--wait", "--timeout=60s")
	if del.code != 0 {
		t.Fatalf("delete namespace --wait: %+v", del)
	}
	expectOut(t, "delete namespace", del.stdout, "Namespace cli-a deletion requested (terminating)\n", "Namespace cli-a deleted\n")
	// Gone when it returned: no namespace, no resources, nothing deleting.
	if r := no8s(t, base, "", "get", "namespace", "cli-a"); r.code != 1 || !strings.Contains(r.stderr, "404 not_found") {
		t.Fatalf("get namespace cli-a after delete --wait: %+v", r)
	}
	if n := c.count(`SELECT count(*) FROM resources WHERE namespace = 'cli-a'`); n != 0 {
		t.Fatalf("%d resources left in cli-a after delete --wait", n)
	}
	if names := ok(t, base, "get", "ns", "-o", "name"); names != "cli-b\ndefault\n" {
		t.Fatalf("namespaces after deleting cli-a: %q", names)
	}
	if got := list(env, "-A"); len(got) != 2 || got["cli-b"] == 0 || got["default"] != ids["default"] {
		t.Fatalf("resources after deleting cli-a: %v", got)
	}
	if r := getJSON(t, base, "Widget/v1", "same", "-n", "cli-b"); r.Status != "ready" {
		t.Fatalf("cli-b's resource after deleting cli-a: %+v", r)
	}
	// Appliers racing to create one namespace all succeed; one creates it.
	results := make([]cliResult, 6)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = no8s(t, base, "kind: Namespace\nmetadata: {name: cli-c}\n", "apply", "-f", "-") })
	}
	wg.Wait()
	created := 0
	for _, r := range results {
		if r.code != 0 || !strings.Contains(r.stdout, "Namespace cli-c ") {
			t.Fatalf("racing namespace applies: %+v", r)
		}
		if strings.Contains(r.stdout, "Namespace cli-c created") {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d racing applies created the namespace: %+v", created, results)
	}
	// The name is free again; default cannot be deleted.
	expectOut(t, "apply again after delete", ok(t, base, "apply", "-f", inA), "Namespace cli-a created", "Widget/v1 cli-a/same created")
	if r := no8s(t, base, "", "delete", "namespace", "default"); r.code != 1 || !strings.Contains(r.stderr, "403 namespace_protected") {
		t.Fatalf("delete namespace default: %+v", r)
	}
}

// TestCLIWebhookNamespaces: apply of a webhook document that changes only
// its namespaces is a change (configured, stored), and diff shows it.
func TestCLIWebhookNamespaces(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	doc := func(namespaces string) string {
		return `kind: AdmissionWebhook
metadata:
  name: team-policy
webhook_url: http://127.0.0.1:9/validate
webhook_type: validating
operations: [CREATE]
failure_policy: Ignore
namespaces: ` + namespaces + "\n"
	}
	dir := t.TempDir()
	one, two := filepath.Join(dir, "one.yaml"), filepath.Join(dir, "two.yaml")
	if err := os.WriteFile(one, []byte(doc("[team-a]")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(two, []byte(doc("[team-a, team-b]")), 0o600); err != nil {
		t.Fatal(err)
	}
	expectOut(t, "apply webhook", ok(t, base, "apply", "-f", one), "AdmissionWebhook team-policy created")
	expectOut(t, "apply webhook again", ok(t, base, "apply", "-f", one), "AdmissionWebhook team-policy unchanged")
	if r := no8s(t, base, "", "diff", "-f", one); r.code != 0 {
		t.Fatalf("diff of the stored document: %+v", r)
	}
	d := no8s(t, base, "", "diff", "-f", two)
	if d.code != 1 || !strings.Contains(d.stdout, "+  - team-b") {
		t.Fatalf("diff of a namespaces-only change: %+v", d)
	}
	expectOut(t, "apply namespaces-only change", ok(t, base, "apply", "-f", two), "AdmissionWebhook team-policy configured")
	hooks := do(t, http.MethodGet, base+"/api/v1/admission-webhooks", nil).list(t)
	if len(hooks) != 1 || fmt.Sprint(hooks[0]["namespaces"]) != "[team-a team-b]" {
		t.Fatalf("stored webhooks %+v", hooks)
	}
	expectOut(t, "apply after the change", ok(t, base, "apply", "-f", two), "AdmissionWebhook team-policy unchanged")
}
