package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "no8s"), args...)
	cmd.Env = append(os.Environ(), "NO8S_SERVER="+server, "NO8S_CONFIG="+filepath.Join(t.TempDir(), "none.yaml"))
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("no8s %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
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
	expectOut(t, "get types", ok(t, base, "get", "types"), "NAME", "DatabaseCluster   v1")

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
	expectOut(t, "describe", ok(t, base, "describe", "DatabaseCluster/v1", "production-pg"),
		"Name:              production-pg", "Namespace:         default", "storage_gb: 600", "Ready  True", "Finalizers:        reconciler.no8s.io/noop", "Events:", "Normal")
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
	expectOut(t, "delete type", ok(t, base, "delete", "-f", typ), "ResourceType DatabaseCluster/v1 deleted")
	expectOut(t, "version", ok(t, base, "version"), "Client Version: no8s", "Server: "+base+" (API v1)")
}

// watchLine is one line of `no8s get -w -o json`.
type watchLine struct {
	Type     string      `json:"type"`
	Revision int64       `json:"revision"`
	Resource cliResource `json:"resource"`
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

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "no8s"), "get", "Counter/v1", "-w", "-o", "json")
	cmd.Env = append(os.Environ(), "NO8S_SERVER=http://"+watchedAddr, "NO8S_CONFIG="+filepath.Join(t.TempDir(), "none.yaml"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		lines []watchLine
		bad   []string
	)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l watchLine
			mu.Lock()
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				bad = append(bad, sc.Text())
			} else {
				lines = append(lines, l)
			}
			mu.Unlock()
		}
	}()
	snapshot := func() []watchLine {
		mu.Lock()
		defer mu.Unlock()
		return append([]watchLine(nil), lines...)
	}
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
	_ = cmd.Process.Signal(syscall.SIGINT)
	<-readDone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the watch ended with %v\nstderr: %s", err, stderr.String())
	}
	got := snapshot()
	if len(bad) > 0 {
		t.Fatalf("lines that are not JSON: %q", bad)
	}
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
		t.Fatalf("the watch's %d changes differ from the %d committed: %s\nstderr: %s", len(gotRevs), len(wantRevs), d, stderr.String())
	}
	if n := strings.Count(stderr.String(), "watch: read the event stream"); n < 3 {
		t.Fatalf("%d cut connections noted on stderr, want at least 3:\n%s", n, stderr.String())
	}
	t.Logf("%d changes watched across 3 kill -9 restarts; stderr:\n%s", len(events), stderr.String())

	// get reads every page: 101 resources in pages of 7.
	if names := strings.Fields(ok(t, other, "get", "Counter/v1", "--chunk-size", "7", "-o", "name")); len(names) != perCycle+1 || names[0] != "Counter/v1/seed" {
		t.Fatalf("paged list: %d names, first %v", len(names), names[:min(len(names), 1)])
	}
}
