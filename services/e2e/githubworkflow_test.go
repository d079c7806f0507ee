package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/githubfake"
)

// The github-workflow reconciler end to end: real processes (store,
// admission, gateway, scheduler on PostgreSQL, a real nats-server, the real
// no8s-reconciler github-workflow), GitHub played by the fake in this
// process (services/internal/githubfake), every exchange with it checked
// against GitHub's OpenAPI description.

const ghRepo = "acme/infra"

// ghEnv is a control plane with the github-workflow reconciler pointed at
// a fake GitHub.
type ghEnv struct {
	t     *testing.T
	c     *cluster
	base  string
	fake  *githubfake.Fake
	token string
}

// newToken is a unique random token for one test, so that a scan for it
// finds nothing but leaks of this very token.
func newToken(t *testing.T) string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "ghp_no8se2e" + hex.EncodeToString(b)
}

// newGHEnv starts the control plane and the fake GitHub with workflows.
func newGHEnv(t *testing.T, workflows ...*githubfake.Workflow) *ghEnv {
	t.Helper()
	e := &ghEnv{t: t, token: newToken(t)}
	e.fake = githubfake.Start(t, e.token, workflows...)
	e.c = newCluster(t)
	e.base = e.c.startAll()
	e.c.startScheduler(e.c.storeAddrs[0], "sched", 0)
	return e
}

// startWorker runs `no8s-reconciler github-workflow` as replica name with
// token in GITHUB_TOKEN (its default reference), pointed at the fake.
func (e *ghEnv) startWorker(name, token string, extra ...string) *proc {
	e.t.Helper()
	args := append([]string{"github-workflow", "--register-type", "--github-api-url", e.fake.URL, "--poll-interval", "1s", "--lease", "5s"}, extra...)
	return e.c.startReconcilerArgs(name, e.c.storeAddrs[0], []string{"GITHUB_TOKEN=" + token}, args...)
}

// shortBackoff gives GitHubWorkflow/v1 a retry backoff of 1 s doubling to
// 4 s, so that a failed run's retry comes soon.
func (e *ghEnv) shortBackoff() {
	e.t.Helper()
	typ := do(e.t, "GET", e.base+"/api/v1/resource-types/GitHubWorkflow/v1", nil)
	if typ.status != 200 {
		e.t.Fatalf("--register-type did not register GitHubWorkflow/v1: %d %s", typ.status, typ.body)
	}
	if r := do(e.t, "PUT", fmt.Sprintf("%s/api/v1/resource-types/%v", e.base, typ.json(e.t)["id"]),
		map[string]any{"reconcile_policy": map[string]any{"backoff_base_seconds": 1, "backoff_max_seconds": 4}}); r.status != 200 {
		e.t.Fatalf("set the policy: %d %s", r.status, r.body)
	}
}

// create creates a GitHubWorkflow resource and returns its document.
func (e *ghEnv) create(name, workflow string, inputs map[string]any, destroy string) map[string]any {
	e.t.Helper()
	spec := map[string]any{"repository": ghRepo, "workflow": workflow, "ref": "main"}
	if inputs != nil {
		spec["inputs"] = inputs
	}
	if destroy != "" {
		spec["destroyWorkflow"] = destroy
	}
	r := do(e.t, "POST", e.base+"/api/v1/resources", map[string]any{"name": name, "resource_type_name": "GitHubWorkflow", "resource_type_version": "v1", "spec": spec})
	if r.status != 201 {
		e.t.Fatalf("create %s: %d %s", name, r.status, r.body)
	}
	return r.json(e.t)
}

func idOf(r map[string]any) int64 { return int64(r["id"].(float64)) }

// outputs reads GET .../outputs.
func (e *ghEnv) outputs(id int64) map[string]any {
	e.t.Helper()
	r := do(e.t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/outputs", e.base, id), nil)
	if r.status != 200 {
		e.t.Fatalf("outputs of %d: %d %s", id, r.status, r.body)
	}
	out, _ := r.json(e.t)["outputs"].(map[string]any)
	return out
}

func (e *ghEnv) runID(id int64) int64 {
	run, _ := e.outputs(id)["run"].(map[string]any)
	n, _ := run["id"].(float64)
	return int64(n)
}

func ready(r map[string]any) bool { return r["status"] == "ready" && r["phase"] == "Ready" }

// TestGitHubWorkflow: a resource reconciled through the GitHub Actions
// plugin carries github_actions from creation, is ready once its run
// succeeded, and GET /outputs shows the run's jobs and artifacts in seed
// 000's format; a failed run makes the resource failed with the
// conclusion, and is retried after the type's backoff with a new dispatch;
// deletion runs the destroy workflow before the finalizer goes. The token
// (unique to this test) is then found nowhere: not in a log line of any
// process, the watch stream, history, outputs, an HTTP error body, the
// JetStream streams' messages or a pg_dump of the database.
func TestGitHubWorkflow(t *testing.T) {
	deploy := &githubfake.Workflow{Repository: ghRepo, File: "deploy.yml", Name: "deploy", Inputs: []string{"environment", "db_size", "zones"},
		RunFor: 2 * time.Second, Jobs: []string{"plan", "deploy"}, Artifacts: []githubfake.Artifact{{Name: "build-output", SizeInBytes: 1234567}}}
	destroy := &githubfake.Workflow{Repository: ghRepo, File: "destroy.yml", Name: "destroy", Inputs: []string{"environment", "db_size", "zones"}, RunFor: 3 * time.Second}
	flaky := &githubfake.Workflow{Repository: ghRepo, File: "flaky.yml", Name: "flaky", RunFor: time.Second,
		Conclude: func(n int) string {
			if n == 1 {
				return "failure"
			}
			return "success"
		}}
	e := newGHEnv(t, deploy, destroy, flaky)
	watch := e.watch()
	e.startWorker("gh", e.token)
	e.shortBackoff()

	// Ready, with jobs and artifacts.
	created := e.create("prod", "deploy.yml", map[string]any{"environment": "prod", "db": map[string]any{"size": 10}, "zones": []any{"a", "b"}}, "destroy.yml")
	fins := fmt.Sprint(created["finalizers"])
	if !strings.Contains(fins, "reconciler.no8s.io/github-workflow") || !strings.Contains(fins, "github_actions") {
		t.Fatalf("finalizers at creation: %s", fins)
	}
	prod := idOf(created)
	r := waitResource(t, e.base, prod, "ready", ready)
	if cd := condition(r, "ActionSucceeded"); cd == nil || cd["status"] != "True" {
		t.Fatalf("ActionSucceeded: %v", r["conditions"])
	}
	runs := e.fake.Runs()
	if len(runs) != 1 || runs[0].Inputs["db_size"] != "10" || runs[0].Inputs["zones"] != `["a","b"]` {
		t.Fatalf("runs %+v", runs)
	}
	out := e.outputs(prod)
	jobs, _ := json.Marshal(out["jobs"])
	arts, _ := json.Marshal(out["artifacts"])
	job := func(name string) string {
		return fmt.Sprintf(`{"completed_at":%q,"conclusion":"success","name":%q,"started_at":%q,"status":"completed"}`,
			runs[0].Completed.UTC().Format(time.RFC3339), name, runs[0].Created.UTC().Format(time.RFC3339))
	}
	if string(jobs) != "["+job("plan")+","+job("deploy")+"]" || string(arts) != `[{"name":"build-output","size_in_bytes":1234567}]` {
		t.Fatalf("outputs: jobs %s artifacts %s", jobs, arts)
	}
	t.Logf("GET /outputs: jobs %s artifacts %s", jobs, arts)

	// A failed run: failed with the conclusion, then a new dispatch after
	// the backoff.
	fl := idOf(e.create("flaky", "flaky.yml", nil, ""))
	failed := waitResource(t, e.base, fl, "failed", func(r map[string]any) bool { return r["status"] == "failed" })
	if msg := fmt.Sprint(failed["status_message"]); !strings.Contains(msg, "concluded failure") {
		t.Fatalf("status message %q", msg)
	}
	if cd := condition(failed, "ActionSucceeded"); cd == nil || cd["reason"] != "RunFailure" {
		t.Fatalf("ActionSucceeded: %v", failed["conditions"])
	}
	waitResource(t, e.base, fl, "ready after the retry", ready)
	var flakyRuns []githubfake.RunInfo
	for _, r := range e.fake.Runs() {
		if r.Workflow == "flaky.yml" {
			flakyRuns = append(flakyRuns, r)
		}
	}
	if len(flakyRuns) != 2 || flakyRuns[0].Conclusion != "failure" || flakyRuns[1].Conclusion != "success" {
		t.Fatalf("flaky runs %+v", flakyRuns)
	}
	gap := flakyRuns[1].Created.Sub(flakyRuns[0].Completed)
	if gap < 850*time.Millisecond {
		t.Fatalf("the retry's dispatch came %s after the failure, before the 1 s backoff", gap)
	}
	t.Logf("failed run retried with a new dispatch %s after it concluded (backoff 1 s)", gap.Round(10*time.Millisecond))
	hist := map[int64][]historyEntry{prod: history(t, e.base, prod), fl: history(t, e.base, fl)}
	histBodies := [][]byte{
		do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/history?limit=500", e.base, prod), nil).body,
		do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/history?limit=500", e.base, fl), nil).body,
	}
	if len(hist[fl]) < 3 {
		t.Fatalf("flaky history: %+v", hist[fl])
	}
	outBodies := [][]byte{
		do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/outputs", e.base, prod), nil).body,
		do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/outputs", e.base, fl), nil).body,
	}

	// Deletion: the destroy workflow runs; the finalizer stays until it
	// succeeded.
	if r := do(t, "DELETE", fmt.Sprintf("%s/api/v1/resources/%d", e.base, prod), nil); r.status != 202 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	waitFor(t, 20*time.Second, "the destroy run", func() error {
		if e.fake.Dispatches(ghRepo, "destroy.yml") != 1 {
			return fmt.Errorf("no destroy run yet")
		}
		return nil
	})
	destroyRun := e.fake.Runs()[len(e.fake.Runs())-1]
	if destroyRun.Workflow != "destroy.yml" || destroyRun.Inputs["environment"] != "prod" || !strings.HasPrefix(destroyRun.Inputs[githubfake.CorrelationInput], "no8s-destroy-") {
		t.Fatalf("destroy run %+v", destroyRun)
	}
	if time.Now().Before(destroyRun.Completed) {
		r := getResource(t, e.base, prod)
		if r == nil || r["status"] != "deleting" || !slices.Contains(r["finalizers"].([]any), any("github_actions")) {
			t.Fatalf("while the destroy run goes on: %s", brief(r))
		}
	}
	waitGone(t, e.base, prod)
	gone := time.Now()
	if gone.Before(destroyRun.Completed) {
		t.Fatalf("the resource was purged before its destroy run completed (%s)", destroyRun.Completed.Sub(gone))
	}

	// Error bodies of the API, for the scan.
	errBodies := [][]byte{
		do(t, "POST", e.base+"/api/v1/resources", map[string]any{"name": "bad", "resource_type_name": "GitHubWorkflow", "resource_type_version": "v1",
			"spec": map[string]any{"repository": "no-slash", "workflow": "x", "ref": "main"}}).body,
		do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", e.base, prod), nil).body,
		do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/outputs", e.base, prod), nil).body,
	}
	e.scanForToken(e.token, watch, append(append(append(errBodies, histBodies...), outBodies...), []byte(fmt.Sprint(hist)), []byte(fmt.Sprint(out))))
}

// watchCapture collects an SSE watch of every event.
type watchCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *watchCapture) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.buf.Bytes())
}

// watch opens GET /api/v1/events for the rest of the test.
func (e *ghEnv) watch() *watchCapture {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", e.base+"/api/v1/events", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		e.t.Fatalf("watch: %v %v", resp, err)
	}
	w := &watchCapture{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			w.mu.Lock()
			w.buf.Write(sc.Bytes())
			w.buf.WriteByte('\n')
			w.mu.Unlock()
		}
	}()
	e.t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return w
}

// scanForToken fails the test if token appears in any log line of any
// process of the test, the watch stream, the given bodies, a message of any
// JetStream stream, or a pg_dump of the database.
func (e *ghEnv) scanForToken(token string, watch *watchCapture, bodies [][]byte) {
	t := e.t
	t.Helper()
	// The token as written, base64-, URL- and JSON-escaped.
	forms := secret.NewValue([]byte(token)).Forms()
	var places []string
	scanned := map[string]int{}
	check := func(where string, b []byte) {
		scanned[strings.SplitN(where, " ", 2)[0]] += len(b)
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				places = append(places, where+" ("+f[:4]+"…)")
			}
		}
	}
	// Every process's log (each test's log files are under its temp root).
	root := filepath.Dir(t.TempDir())
	logs := 0
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") {
			b, _ := os.ReadFile(path)
			check("log "+filepath.Base(path), b)
			logs++
		}
		return nil
	})
	if logs < 6 {
		t.Fatalf("found %d process logs to scan under %s, want every process's", logs, root)
	}
	if watch != nil {
		w := watch.bytes()
		if !bytes.Contains(w, []byte("RECONCILED")) {
			t.Fatalf("the watch saw no event:\n%.2000s", w)
		}
		check("watch stream", w)
	}
	for i, b := range bodies {
		check(fmt.Sprintf("http body-%d", i), b)
	}
	// Every message of every JetStream stream (events, work items, the
	// reconciler registry).
	js, _ := e.c.jetstream()
	ctx := t.Context()
	streams := js.StreamNames(ctx)
	var names []string
	for n := range streams.Name() {
		names = append(names, n)
	}
	for _, n := range names {
		s, err := js.Stream(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			continue
		}
		cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		got := uint64(0)
		for got < info.State.Msgs {
			batch, err := cons.FetchNoWait(500)
			if err != nil {
				t.Fatal(err)
			}
			n0 := got
			for m := range batch.Messages() {
				got++
				check("stream "+n, m.Data())
				for k, v := range m.Headers() {
					check("stream "+n+" header "+k, []byte(strings.Join(v, ",")))
				}
			}
			if got == n0 {
				break // work-queue messages acknowledged meanwhile
			}
		}
		t.Logf("scanned %d messages of stream %s", got, n)
	}
	// The database.
	dump, err := exec.Command("pg_dump", "--dbname="+e.c.dbURL).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	if !bytes.Contains(dump, []byte("github_actions")) {
		t.Fatal("the pg_dump holds none of this test's resources")
	}
	check("pg_dump", dump)
	t.Logf("token scan: %d process logs, watch, %d HTTP bodies, %d streams, pg_dump (%d bytes): %v", logs, len(bodies), len(names), len(dump), scanned)
	if len(places) > 0 {
		t.Fatalf("the GitHub token leaked into: %s", strings.Join(places, ", "))
	}
}

// TestGitHubWorkflowRateLimitsAnd5xx: a 502 on the dispatch (the run may
// or may not exist: it is looked for first), a burst of 502s on reads, a
// secondary rate limit (429 with retry-after) and the primary limit
// exhausted (403 with x-ratelimit-remaining 0 and a reset) are waited out:
// the resource is ready with exactly one run, none lost, none extra.
func TestGitHubWorkflowRateLimitsAnd5xx(t *testing.T) {
	mostlyWaits(t)
	deploy := &githubfake.Workflow{Repository: ghRepo, File: "deploy.yml", RunFor: 8 * time.Second}
	e := newGHEnv(t, deploy)
	isDispatch := func(r *http.Request) bool { return r.Method == http.MethodPost }
	isRead := func(r *http.Request) bool { return r.Method == http.MethodGet }
	e.fake.FailNext(1, http.StatusBadGateway, isDispatch)
	e.startWorker("gh", e.token)
	id := idOf(e.create("limited", "deploy.yml", nil, ""))
	waitFor(t, 30*time.Second, "the run dispatched", func() error {
		if e.fake.Dispatches(ghRepo, "deploy.yml") == 0 {
			return fmt.Errorf("no run yet (answers %v)", e.fake.Stats().Answers)
		}
		return nil
	})
	// While it runs: a burst of 502s, a secondary limit, the primary limit.
	e.fake.FailNext(8, http.StatusBadGateway, isRead)
	waitFor(t, 20*time.Second, "the 502 burst", func() error {
		if n := e.fake.Stats().Answers[502]; n < 9 {
			return fmt.Errorf("%d 502s answered", n)
		}
		return nil
	})
	e.fake.SecondaryLimitNext(1, http.StatusTooManyRequests, 2*time.Second, nil)
	waitFor(t, 20*time.Second, "the secondary limit", func() error {
		if e.fake.Stats().Answers[429] < 1 {
			return fmt.Errorf("no 429 yet")
		}
		return nil
	})
	reset := e.fake.ExhaustRateLimit(3 * time.Second)
	waitResource(t, e.base, id, "ready", ready)
	st := e.fake.Stats()
	if n := e.fake.Dispatches(ghRepo, "deploy.yml"); n != 1 {
		t.Fatalf("%d runs, want exactly 1", n)
	}
	if st.Answers[403] < 1 || st.Answers[429] != 1 || st.Answers[502] < 9 {
		t.Fatalf("answers %v", st.Answers)
	}
	if e.runID(id) != e.fake.Runs()[0].ID {
		t.Fatalf("outputs name run %d, the fake ran %d", e.runID(id), e.fake.Runs()[0].ID)
	}
	// Nothing was asked while the primary limit lasted beyond the one
	// answer that announced it (and the scheduler's own pace).
	t.Logf("answers %v, requests %v; ready %s after the rate limit's reset", st.Answers, st.Requests, time.Since(reset).Round(100*time.Millisecond))
	if st.Answers[403] > 3 {
		t.Fatalf("%d requests answered 403 during the rate limit: it was not waited out", st.Answers[403])
	}
}

// TestGitHubWorkflowKill9: the worker killed (SIGKILL) while a run goes on
// → a new worker resumes the same run: one dispatch in total. And killed
// while its dispatch was being answered (the run started, the worker never
// heard of it) → the next attempt finds the run by its correlation id
// instead of dispatching again: one dispatch.
func TestGitHubWorkflowKill9(t *testing.T) {
	long := &githubfake.Workflow{Repository: ghRepo, File: "long.yml", RunFor: 6 * time.Second}
	held := &githubfake.Workflow{Repository: ghRepo, File: "held.yml", RunFor: 2 * time.Second}
	e := newGHEnv(t, long, held)
	w1 := e.startWorker("gh1", e.token)

	id := idOf(e.create("long", "long.yml", nil, ""))
	waitFor(t, 30*time.Second, "the run id saved", func() error {
		if e.runID(id) == 0 {
			return fmt.Errorf("no run in the outputs yet")
		}
		return nil
	})
	runID := e.runID(id)
	w1.kill9()
	t.Logf("worker killed while run %d goes on", runID)
	w2 := e.startWorker("gh2", e.token)
	waitResource(t, e.base, id, "ready", ready)
	if n := e.fake.Dispatches(ghRepo, "long.yml"); n != 1 || e.runID(id) != runID {
		t.Fatalf("%d dispatches, run %d (was %d)", n, e.runID(id), runID)
	}

	// Killed between the dispatch and saving its answer.
	heldCh, release := e.fake.HoldDispatches()
	id2 := idOf(e.create("held", "held.yml", nil, ""))
	var started int64
	select {
	case started = <-heldCh:
	case <-time.After(30 * time.Second):
		t.Fatal("no dispatch came")
	}
	w2.kill9()
	release()
	t.Logf("worker killed while GitHub answered the dispatch of run %d", started)
	e.startWorker("gh3", e.token)
	waitResource(t, e.base, id2, "ready", ready)
	if n := e.fake.Dispatches(ghRepo, "held.yml"); n != 1 || e.runID(id2) != started {
		t.Fatalf("%d dispatches of held.yml, outputs name run %d, the one started was %d", n, e.runID(id2), started)
	}
	if n := e.fake.Stats().Requests["GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs"]; n < 1 {
		t.Fatal("the run was not looked for by its correlation id")
	}
}

// TestGitHubWorkflowWrongToken: a token GitHub refuses is a clear terminal
// error (not retried, nothing dispatched, the token not in the message);
// with the right token and a manual trigger the resource becomes ready.
func TestGitHubWorkflowWrongToken(t *testing.T) {
	mostlyWaits(t)
	e := newGHEnv(t, &githubfake.Workflow{Repository: ghRepo, File: "deploy.yml", RunFor: time.Second})
	wrong := newToken(t)
	w := e.startWorker("gh", wrong)
	e.shortBackoff()
	id := idOf(e.create("denied", "deploy.yml", nil, ""))
	r := waitResource(t, e.base, id, "failed", func(r map[string]any) bool { return r["status"] == "failed" })
	msg := fmt.Sprint(r["status_message"])
	if !strings.Contains(msg, "GitHub refused the worker's token") || !strings.Contains(msg, "401 Bad credentials") || !strings.Contains(msg, `env "GITHUB_TOKEN"`) ||
		strings.Contains(msg, wrong) {
		t.Fatalf("status message %q", msg)
	}
	if cd := condition(r, "Ready"); cd == nil || cd["reason"] != "TerminalError" {
		t.Fatalf("Ready: %v", r["conditions"])
	}
	// Terminal: not retried (the backoff is 1 s).
	time.Sleep(3 * time.Second)
	if h := history(t, e.base, id); len(h) != 1 || e.fake.Dispatches(ghRepo, "deploy.yml") != 0 {
		t.Fatalf("%d attempts, %d dispatches: a terminal error was retried", len(h), e.fake.Dispatches(ghRepo, "deploy.yml"))
	}
	w.stop(syscall.SIGTERM, 10*time.Second)
	e.startWorker("gh2", e.token)
	if r := do(t, "POST", fmt.Sprintf("%s/api/v1/resources/%d/reconcile", e.base, id), nil); r.status/100 != 2 {
		t.Fatalf("reconcile: %d %s", r.status, r.body)
	}
	waitResource(t, e.base, id, "ready with the right token", ready)
	e.scanForToken(wrong, nil, [][]byte{[]byte(msg)})
}

// TestGitHubWorkflowEchoedToken is issue 26's finding: a 401 whose body
// echoes the Authorization header ("Bearer ghp_…") must not carry the
// token into the resource's conditions, status, history, Events, outputs,
// any process's log or any stream: the scan looks for it as written,
// base64-, URL- and JSON-escaped.
func TestGitHubWorkflowEchoedToken(t *testing.T) {
	e := newGHEnv(t, &githubfake.Workflow{Repository: ghRepo, File: "deploy.yml", RunFor: time.Second})
	e.fake.EchoAuthorization()
	wrong := newToken(t)
	e.startWorker("gh", wrong)
	e.shortBackoff()
	id := idOf(e.create("echoed", "deploy.yml", nil, ""))
	r := waitResource(t, e.base, id, "failed", func(r map[string]any) bool { return r["status"] == "failed" })
	msg := fmt.Sprint(r["status_message"])
	if !strings.Contains(msg, "401 Bad credentials (Authorization: Bearer [redacted])") || strings.Contains(msg, wrong) {
		t.Fatalf("status message %q", msg)
	}
	t.Logf("status message: %s", msg)
	bodies := [][]byte{do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d", e.base, id), nil).body,
		do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/history", e.base, id), nil).body,
		do(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/event-records", e.base, id), nil).body}
	e.scanForToken(wrong, nil, bodies)
}

// TestGitHubWorkflowConcurrency: 100 resources whose runs take 5 s each,
// one worker with concurrency 2: runs are followed without holding a
// worker slot, so the fake sees at least 50 runs in progress at once and
// every resource is ready within 3× the run time.
func TestGitHubWorkflowConcurrency(t *testing.T) {
	const n, runFor = 100, 5 * time.Second
	e := newGHEnv(t, &githubfake.Workflow{Repository: ghRepo, File: "deploy.yml", RunFor: runFor})
	e.startWorker("gh", e.token, "--concurrency", "2", "--poll-interval", "2s")
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := tryDo("POST", e.base+"/api/v1/resources", map[string]any{"name": fmt.Sprintf("r%03d", i), "resource_type_name": "GitHubWorkflow",
				"resource_type_version": "v1", "spec": map[string]any{"repository": ghRepo, "workflow": "deploy.yml", "ref": "main"}})
			if r.status != 201 {
				errs <- fmt.Sprintf("%d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("create: %s", e)
	}
	created := time.Since(start)
	deadline := start.Add(3 * runFor)
	var readyN int
	for {
		readyN = 0
		for _, st := range statuses(t, e.base, "GitHubWorkflow") {
			if st == "ready" {
				readyN++
			}
		}
		if readyN == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	peak := e.fake.MaxInProgress()
	t.Logf("%d resources created in %s; %d ready after %s (limit %s); %d runs in progress at once at the fake; %d dispatches",
		n, created.Round(10*time.Millisecond), readyN, took.Round(10*time.Millisecond), 3*runFor, peak, e.fake.Dispatches(ghRepo, "deploy.yml"))
	if readyN != n {
		t.Fatalf("%d of %d ready within %s", readyN, n, 3*runFor)
	}
	if peak < 50 {
		t.Fatalf("at most %d runs in progress at once, want at least 50", peak)
	}
	if d := e.fake.Dispatches(ghRepo, "deploy.yml"); d != n {
		t.Fatalf("%d dispatches for %d resources", d, n)
	}
}
