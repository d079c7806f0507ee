package githubworkflow

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk/action"
	"github.com/no8s/no8s/libs/sdk/action/github"
	"github.com/no8s/no8s/services/internal/githubfake"
)

// The GitHub Actions plugin against the fake GitHub, call by call, as the
// engine calls it: each call's outputs are what the next one gets, and
// every call is a new attempt (its lease epoch one more) unless a test
// loses one on purpose.

const testToken = "ghp_plugintest0123456789"

type driver struct {
	t       *testing.T
	p       *github.Plugin
	params  github.Params
	outputs map[string]any
	epoch   int64
	gen     int64
}

func newDriver(t *testing.T, fake *githubfake.Fake, token string, params github.Params) *driver {
	t.Helper()
	p, err := github.New(github.Config{BaseURL: fake.URL, Token: secret.Env("TEST_GITHUB_TOKEN"),
		Secrets: secret.Local{LookupEnv: func(string) (string, bool) { return token, true }}, PollInterval: time.Second, RetryBase: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &driver{t: t, p: p, params: params, outputs: map[string]any{}, gen: 1}
}

// call runs Apply (or Destroy) once and keeps its outputs.
func (d *driver) call(destroy bool) (action.Status, error) {
	d.t.Helper()
	d.epoch++
	raw, _ := json.Marshal(d.params)
	task := action.Task{Resource: action.Resource{UID: "0b6f3c1e-uid", Type: "GitHubWorkflow/v1", Name: "w", Generation: d.gen},
		Params: raw, Outputs: d.outputs, Epoch: d.epoch, Now: time.Now()}
	var st action.Status
	var err error
	if destroy {
		st, err = d.p.Destroy(d.t.Context(), task)
	} else {
		st, err = d.p.Apply(d.t.Context(), task)
	}
	next := map[string]any{}
	for k, v := range d.outputs {
		next[k] = v
	}
	for k, v := range st.Outputs {
		if v == nil {
			delete(next, k)
		} else {
			next[k] = v
		}
	}
	// The engine saves them as JSON: give the next call what it would read.
	b, _ := json.Marshal(next)
	d.outputs = map[string]any{}
	_ = json.Unmarshal(b, &d.outputs)
	return st, err
}

// until calls until the plugin says done or fails, at most for d.
func (d *driver) until(destroy bool, timeout time.Duration) (action.Status, error) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := d.call(destroy)
		if err != nil || st.Done {
			return st, err
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("not done after %s: %+v", timeout, st)
		}
		time.Sleep(min(st.RequeueAfter, 200*time.Millisecond))
	}
}

func (d *driver) run() map[string]any {
	r, _ := d.outputs[github.OutputRun].(map[string]any)
	return r
}

func deployWorkflow() *githubfake.Workflow {
	return &githubfake.Workflow{Repository: "acme/infra", File: "deploy.yml", Name: "deploy", Inputs: []string{"environment", "db_size", "zones"},
		RunFor: 300 * time.Millisecond, Jobs: []string{"plan", "apply"}, Artifacts: []githubfake.Artifact{{Name: "build-output", SizeInBytes: 1234567}}}
}

func params() github.Params {
	return github.Params{Repository: "acme/infra", Workflow: "deploy.yml", Ref: "main", DestroyWorkflow: "destroy.yml",
		Inputs: json.RawMessage(`{"environment": "prod", "db": {"size": 10}, "zones": ["a", "b"]}`)}
}

func TestPluginDispatchFollowCollect(t *testing.T) {
	fake := githubfake.Start(t, testToken, deployWorkflow())
	d := newDriver(t, fake, testToken, params())
	st, err := d.call(false)
	if err != nil || st.Done || st.Reason != "Dispatched" || st.RequeueAfter != time.Second {
		t.Fatalf("first call: %+v %v", st, err)
	}
	runs := fake.Runs()
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	in := runs[0].Inputs
	if in["environment"] != "prod" || in["db_size"] != "10" || in["zones"] != `["a","b"]` || in[github.CorrelationInput] != "no8s-apply-0b6f3c1e-uid-g1-r1" || len(in) != 4 {
		t.Fatalf("inputs %v", in)
	}
	if r := d.run(); r["id"] != float64(runs[0].ID) || r["correlation_id"] != in[github.CorrelationInput] || r["status"] != "queued" {
		t.Fatalf("run record %v", r)
	}
	st, err = d.until(false, 10*time.Second)
	if err != nil || !st.Done {
		t.Fatalf("%+v %v", st, err)
	}
	jobs, _ := json.Marshal(d.outputs[github.OutputJobs])
	arts, _ := json.Marshal(d.outputs[github.OutputArtifacts])
	wantJob := fmt.Sprintf(`{"completed_at":%q,"conclusion":"success","name":"plan","started_at":%q,"status":"completed"}`,
		runs[0].Completed.UTC().Format(time.RFC3339), runs[0].Created.UTC().Format(time.RFC3339))
	if !strings.HasPrefix(string(jobs), "["+wantJob+",") || string(arts) != `[{"name":"build-output","size_in_bytes":1234567}]` {
		t.Fatalf("jobs %s\nartifacts %s", jobs, arts)
	}
	// Done for this generation: a resync asks GitHub nothing.
	before := fake.Stats().Requests
	if st, err := d.call(false); err != nil || !st.Done {
		t.Fatalf("resync: %+v %v", st, err)
	}
	if after := fake.Stats().Requests; fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a resync made requests: %v → %v", before, after)
	}
	// A new generation: a new run.
	d.gen = 2
	if _, err := d.until(false, 10*time.Second); err != nil || fake.Dispatches("acme/infra", "deploy.yml") != 2 {
		t.Fatalf("generation 2: %v, %d dispatches", err, fake.Dispatches("acme/infra", "deploy.yml"))
	}
	if fake.Runs()[1].Inputs[github.CorrelationInput] != "no8s-apply-0b6f3c1e-uid-g2-r1" {
		t.Fatalf("generation 2's correlation id: %v", fake.Runs()[1].Inputs)
	}
}

func TestPluginFailedRunRetriedWithNewDispatch(t *testing.T) {
	wf := deployWorkflow()
	wf.Conclude = func(n int) string {
		if n == 1 {
			return "failure"
		}
		return "success"
	}
	fake := githubfake.Start(t, testToken, wf)
	d := newDriver(t, fake, testToken, params())
	_, err := d.until(false, 10*time.Second)
	if err == nil || action.IsTerminal(err) || !strings.Contains(err.Error(), "concluded failure") {
		t.Fatalf("failed run: %v", err)
	}
	if r := d.run(); r["conclusion"] != "failure" || d.outputs[github.OutputJobs] == nil {
		t.Fatalf("after the failure: %v", d.outputs)
	}
	// The scheduler's backoff passes; the next attempt dispatches anew.
	if st, err := d.until(false, 10*time.Second); err != nil || !st.Done {
		t.Fatalf("retry: %+v %v", st, err)
	}
	if n := fake.Dispatches("acme/infra", "deploy.yml"); n != 2 || d.run()["attempt"] != float64(2) {
		t.Fatalf("%d dispatches, run %v", n, d.run())
	}
	if fake.Runs()[1].Inputs[github.CorrelationInput] != "no8s-apply-0b6f3c1e-uid-g1-r2" {
		t.Fatalf("retry's correlation id: %v", fake.Runs()[1].Inputs)
	}
}

func TestPluginLostAttemptFindsItsRun(t *testing.T) {
	fake := githubfake.Start(t, testToken, deployWorkflow())
	d := newDriver(t, fake, testToken, params())
	if _, err := d.call(false); err != nil {
		t.Fatal(err)
	}
	// The attempt dispatched, then its worker died before saving: the next
	// attempt sees the outputs of before, and a gap in the epochs.
	d.outputs = map[string]any{}
	d.epoch++
	st, err := d.until(false, 10*time.Second)
	if err != nil || !st.Done {
		t.Fatalf("%+v %v", st, err)
	}
	if n := fake.Dispatches("acme/infra", "deploy.yml"); n != 1 {
		t.Fatalf("%d dispatches after a lost attempt, want 1", n)
	}
	if fake.Stats().Requests["GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs"] == 0 {
		t.Fatal("the run was not looked for")
	}
}

func TestPluginRateLimitsAnd5xx(t *testing.T) {
	fake := githubfake.Start(t, testToken, deployWorkflow())
	d := newDriver(t, fake, testToken, params())
	isDispatch := func(r *http.Request) bool { return r.Method == http.MethodPost }
	isRead := func(r *http.Request) bool { return r.Method == http.MethodGet }

	// A dispatch that gets a 502: maybe started; looked for, then sent again.
	fake.FailNext(1, http.StatusBadGateway, isDispatch)
	st, err := d.call(false)
	if err != nil || st.Reason != "GitHubUnavailable" || d.run()["status"] != github.StatusDispatching {
		t.Fatalf("502 on dispatch: %+v %v %v", st, err, d.run())
	}
	if st, err = d.call(false); err != nil || st.Reason != "Dispatched" {
		t.Fatalf("after the 502: %+v %v", st, err)
	}
	// Reads: a burst of 502s is retried within the call, then after a delay.
	fake.FailNext(5, http.StatusBadGateway, isRead)
	st, err = d.call(false)
	if err != nil || st.Reason != "GitHubUnavailable" || st.RequeueAfter < time.Second {
		t.Fatalf("502 burst: %+v %v", st, err)
	}
	// A secondary limit with retry-after.
	fake.SecondaryLimitNext(1, http.StatusTooManyRequests, 2*time.Second, nil)
	st, err = d.call(false)
	if err != nil || st.Reason != "RateLimited" || st.RequeueAfter != 2*time.Second {
		t.Fatalf("secondary limit: %+v %v", st, err)
	}
	// The primary limit exhausted: wait for its reset.
	reset := fake.ExhaustRateLimit(2 * time.Second)
	st, err = d.call(false)
	if err != nil || st.Reason != "RateLimited" || st.RequeueAfter < time.Until(reset) || st.RequeueAfter > time.Until(reset)+2*time.Second {
		t.Fatalf("primary limit (reset in %s): %+v %v", time.Until(reset), st, err)
	}
	time.Sleep(time.Until(reset))
	if st, err = d.until(false, 10*time.Second); err != nil || !st.Done {
		t.Fatalf("%+v %v", st, err)
	}
	if n := fake.Dispatches("acme/infra", "deploy.yml"); n != 1 {
		t.Fatalf("%d runs, want exactly 1", n)
	}
	a := fake.Stats().Answers
	if a[502] < 6 || a[429] != 1 || a[403] < 1 {
		t.Fatalf("answers %v", a)
	}
}

func TestPluginTerminalErrors(t *testing.T) {
	fake := githubfake.Start(t, testToken, deployWorkflow())
	// A wrong token: terminal, naming the reference and not the value.
	d := newDriver(t, fake, "ghp_wrongtoken", params())
	_, err := d.call(false)
	if !action.IsTerminal(err) || !strings.Contains(err.Error(), `refused the worker's token`) || !strings.Contains(err.Error(), "TEST_GITHUB_TOKEN") ||
		strings.Contains(err.Error(), "ghp_") {
		t.Fatalf("wrong token: %v", err)
	}
	// An input the workflow does not declare: GitHub's 422, terminal.
	p := params()
	p.Inputs = json.RawMessage(`{"environment": "prod", "surprise": 1}`)
	d = newDriver(t, fake, testToken, p)
	if _, err := d.call(false); !action.IsTerminal(err) || !strings.Contains(err.Error(), `Unexpected inputs provided: ["surprise"]`) {
		t.Fatalf("unexpected input: %v", err)
	}
	// A workflow GitHub does not know: 404, terminal.
	p = params()
	p.Workflow = "nope.yml"
	d = newDriver(t, fake, testToken, p)
	if _, err := d.call(false); !action.IsTerminal(err) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown workflow: %v", err)
	}
	// Inputs that do not fit: refused before any request.
	p = params()
	p.Inputs = json.RawMessage(`{"a_b": 1, "a": {"b": 2}}`)
	d = newDriver(t, fake, testToken, p)
	if _, err := d.call(false); !action.IsTerminal(err) || !strings.Contains(err.Error(), "inputs/a_b") {
		t.Fatalf("colliding inputs: %v", err)
	}
	if n := fake.Dispatches("acme/infra", "deploy.yml"); n != 0 {
		t.Fatalf("%d runs", n)
	}
}

func TestPluginCancelledVanishedAndUnlisted(t *testing.T) {
	wf := deployWorkflow()
	wf.RunFor = time.Hour
	fake := githubfake.Start(t, testToken, wf)
	d := newDriver(t, fake, testToken, params())
	if _, err := d.call(false); err != nil {
		t.Fatal(err)
	}
	fake.Cancel(fake.Runs()[0].ID)
	_, err := d.call(false)
	if !action.IsTerminal(err) || !strings.Contains(err.Error(), "concluded cancelled") {
		t.Fatalf("cancelled: %v", err)
	}
	// A manual retry dispatches anew; the run then vanishes: reported, and
	// retried (not terminal), not waited on.
	if _, err := d.call(false); err != nil || fake.Dispatches("acme/infra", "deploy.yml") != 2 {
		t.Fatalf("retry after cancel: %v", err)
	}
	fake.Delete(fake.Runs()[1].ID)
	if _, err := d.call(false); err == nil || action.IsTerminal(err) || !strings.Contains(err.Error(), "vanished") {
		t.Fatalf("vanished: %v", err)
	}

	// GitHub Enterprise without return_run_details: the run is found by its
	// correlation id in the run list.
	ghes := &githubfake.Workflow{Repository: "acme/old", File: "deploy.yml", NoRunDetails: true, RunFor: 200 * time.Millisecond}
	fake.AddWorkflow(ghes)
	p := params()
	p.Repository, p.Inputs = "acme/old", nil
	d = newDriver(t, fake, testToken, p)
	st, err := d.call(false)
	if err != nil || d.run()["status"] != github.StatusDispatched {
		t.Fatalf("204 dispatch: %+v %v %v", st, err, d.run())
	}
	if st, err := d.until(false, 10*time.Second); err != nil || !st.Done || d.run()["id"] == nil {
		t.Fatalf("found by title: %+v %v %v", st, err, d.run())
	}
	// A workflow without the correlation id in its run-name is never found:
	// a terminal error that says what to change.
	blind := &githubfake.Workflow{Repository: "acme/blind", File: "deploy.yml", NoRunDetails: true,
		RunName: func(map[string]string) string { return "deploy" }}
	fake.AddWorkflow(blind)
	p.Repository = "acme/blind"
	d = newDriver(t, fake, testToken, p)
	p2, _ := github.New(github.Config{BaseURL: fake.URL, Token: secret.Env("T"), Secrets: secret.Local{LookupEnv: func(string) (string, bool) { return testToken, true }},
		FindTimeout: time.Second})
	d.p = p2
	_, err = d.until(false, 10*time.Second)
	if !action.IsTerminal(err) || !strings.Contains(err.Error(), "run-name") {
		t.Fatalf("unlisted run: %v", err)
	}
}

func TestPluginDestroy(t *testing.T) {
	deploy := deployWorkflow()
	deploy.RunFor = 500 * time.Millisecond
	destroy := &githubfake.Workflow{Repository: "acme/infra", File: "destroy.yml", Inputs: []string{"environment", "db_size", "zones"}, RunFor: 200 * time.Millisecond}
	fake := githubfake.Start(t, testToken, deploy, destroy)
	d := newDriver(t, fake, testToken, params())
	if _, err := d.call(false); err != nil {
		t.Fatal(err)
	}
	// Deleted while the apply run goes on: destroy waits for it, then runs.
	st, err := d.call(true)
	if err != nil || st.Done || st.Reason != "WaitingForPreviousRun" || fake.Dispatches("acme/infra", "destroy.yml") != 0 {
		t.Fatalf("destroy during apply: %+v %v", st, err)
	}
	if st, err := d.until(true, 10*time.Second); err != nil || !st.Done {
		t.Fatalf("%+v %v", st, err)
	}
	if fake.Dispatches("acme/infra", "destroy.yml") != 1 || d.run()["operation"] != github.OpDestroy {
		t.Fatalf("destroy runs %d, record %v", fake.Dispatches("acme/infra", "destroy.yml"), d.run())
	}
	// No destroy workflow: nothing to run.
	p := params()
	p.DestroyWorkflow = ""
	d = newDriver(t, fake, testToken, p)
	if st, err := d.call(true); err != nil || !st.Done || st.Reason != "NoDestroyWorkflow" {
		t.Fatalf("%+v %v", st, err)
	}
}
