package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	gh "github.com/google/go-github/v93/github"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk/action"
)

// Name is the plugin's name and the finalizer resources handled through it
// carry (the original Operator Controller's name for it).
const Name = "github_actions"

// Defaults of Config.
const (
	DefaultBaseURL      = "https://api.github.com/"
	DefaultTokenEnv     = "GITHUB_TOKEN"
	DefaultPollInterval = 30 * time.Second
	DefaultFindTimeout  = 2 * time.Minute
	DefaultRetryBase    = 2 * time.Second
	DefaultRetryMax     = 5 * time.Minute
	// DefaultSecondaryWait is how long a secondary rate limit without a
	// retry-after header is waited out (GitHub: at least a minute).
	DefaultSecondaryWait = time.Minute
	// DefaultHTTPTimeout bounds one request.
	DefaultHTTPTimeout = 30 * time.Second
)

// Config is the worker's configuration of the plugin (never the spec's).
type Config struct {
	// BaseURL is GitHub's REST API (DefaultBaseURL; GitHub Enterprise
	// Server: https://HOST/api/v3/).
	BaseURL string
	// Token references the token: a personal access token with the repo
	// and workflow scopes, or a GitHub App token (default
	// {"env": "GITHUB_TOKEN"}).
	Token secret.Ref
	// Secrets resolves Token (default secret.Local{}).
	Secrets secret.Resolver
	// PollInterval is how often a running workflow run is looked at
	// (default 30 s: each look costs one request of the token's rate
	// limit).
	PollInterval time.Duration
	// MaxInputs is how many workflow_dispatch inputs the server takes,
	// the correlation input included (DefaultMaxInputs; 10 on older GitHub
	// Enterprise Server).
	MaxInputs int
	// FindTimeout is how long a dispatched run may stay unlisted before
	// it is reported not found (default 2 min).
	FindTimeout time.Duration
	// RetryBase and RetryMax bound the delay after transient failures
	// (5xx, broken connections): base·2^(n-1), at most max (defaults 2 s
	// and 5 min).
	RetryBase, RetryMax time.Duration
	// HTTPClient sends the requests (default: a client with a 30 s
	// timeout). Reads that get a 5xx or a broken connection are tried up
	// to three times.
	HTTPClient *http.Client
	// Metrics, when set, records the token's rate limit as GitHub last
	// reported it (no8s_github_rate_limit_remaining).
	Metrics prometheus.Registerer
}

// Plugin is the GitHub Actions plugin. Create it with New.
type Plugin struct {
	cfg  Config
	base string
	hc   *http.Client
}

var _ action.Plugin = (*Plugin)(nil)

// New validates cfg, fills its defaults and returns the plugin.
func New(cfg Config) (*Plugin, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("github: base URL %q: want an http(s) URL such as %s or https://HOST/api/v3/", cfg.BaseURL, DefaultBaseURL)
	}
	base := u.String()
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	if cfg.Token.IsZero() {
		cfg.Token = secret.Env(DefaultTokenEnv)
	}
	if cfg.Secrets == nil {
		cfg.Secrets = secret.Local{}
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxInputs == 0 {
		cfg.MaxInputs = DefaultMaxInputs
	}
	if cfg.FindTimeout == 0 {
		cfg.FindTimeout = DefaultFindTimeout
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = DefaultRetryMax
	}
	switch {
	case cfg.PollInterval < time.Second:
		return nil, fmt.Errorf("github: poll interval %s: want at least 1s", cfg.PollInterval)
	case cfg.MaxInputs < 2:
		return nil, fmt.Errorf("github: max inputs %d: want at least 2 (one is the correlation id)", cfg.MaxInputs)
	case cfg.FindTimeout < time.Second:
		return nil, fmt.Errorf("github: find timeout %s: want at least 1s", cfg.FindTimeout)
	case cfg.RetryBase <= 0 || cfg.RetryMax < cfg.RetryBase:
		return nil, fmt.Errorf("github: retry delays %s..%s: want 0 < base <= max", cfg.RetryBase, cfg.RetryMax)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	c := *hc
	c.Transport = retryReads{next: hc.Transport}
	if cfg.Metrics != nil {
		c.Transport = rateGauge{next: c.Transport, remaining: metrics.MustVec(cfg.Metrics, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: "github", Name: "rate_limit_remaining",
			Help: "Requests left in the token's rate limit window, as GitHub's last x-ratelimit-remaining said (-1 before the first answer)."}))}
		c.Transport.(rateGauge).remaining.Set(-1)
	}
	return &Plugin{cfg: cfg, base: base, hc: &c}, nil
}

// Name implements action.Plugin.
func (p *Plugin) Name() string { return Name }

// Apply implements action.Plugin: it dispatches the workflow for the
// resource's generation, or follows the run dispatched before.
func (p *Plugin) Apply(ctx context.Context, t action.Task) (action.Status, error) {
	return p.execute(ctx, t, OpApply)
}

// Destroy implements action.Plugin: it dispatches the destroy workflow (once
// a run still going has ended), or follows it; with no destroy workflow
// there is nothing to do.
func (p *Plugin) Destroy(ctx context.Context, t action.Task) (action.Status, error) {
	return p.execute(ctx, t, OpDestroy)
}

// execution is one call: the task, its params and the run record.
type execution struct {
	p        *Plugin
	t        action.Task
	op       string
	params   Params
	workflow string
	inputs   map[string]string
	rec      *Run
	api      *gh.Client
	// token is the resolved token, redacted from every message made of
	// GitHub's answers.
	token secret.Value
	log   *slog.Logger
	// stale is set when the run record may be older than the last
	// attempt: an attempt in between ended without saving.
	stale bool
}

func (p *Plugin) execute(ctx context.Context, t action.Task, op string) (action.Status, error) {
	params, err := DecodeParams(t.Params)
	if err != nil {
		return action.Status{Reason: "InvalidParams"}, action.Terminal(fmt.Errorf("github actions: %w", err))
	}
	workflow := params.Workflow
	if op == OpDestroy {
		workflow = params.DestroyWorkflow
	}
	inputs, err := Flatten(params.Inputs, p.cfg.MaxInputs-1)
	if err != nil {
		return action.Status{Reason: "InvalidInputs"}, action.Terminal(fmt.Errorf("github actions: %w", err))
	}
	if t.Now.IsZero() {
		t.Now = time.Now()
	}
	x := &execution{p: p, t: t, op: op, params: params, workflow: workflow, inputs: inputs, rec: readRun(t.Outputs), log: t.Logger()}
	if t.Epoch > 0 {
		last := int64(0)
		if x.rec != nil {
			last = x.rec.Epoch
		}
		x.stale = t.Epoch > last+1
	}
	st, err := x.step(ctx)
	if x.rec != nil {
		x.rec.Epoch, x.rec.Updated = t.Epoch, t.Now.UTC()
		if st.Outputs == nil {
			st.Outputs = map[string]any{}
		}
		st.Outputs[OutputRun] = x.rec.asOutput()
	}
	return st, err
}

// client returns the GitHub client with the resolved token.
func (x *execution) client(ctx context.Context) (*gh.Client, error) {
	if x.api != nil {
		return x.api, nil
	}
	tok, err := x.p.cfg.Secrets.Resolve(ctx, x.p.cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("github actions: the worker's token: %w", err)
	}
	if tok.Len() == 0 {
		return nil, fmt.Errorf("github actions: the worker's token %s is empty", x.p.cfg.Token)
	}
	x.token = tok
	c, err := gh.NewClient(gh.WithHTTPClient(x.p.hc), gh.WithAuthToken(tok.Reveal()), gh.WithURLs(&x.p.base, &x.p.base), gh.WithUserAgent("no8s-github-actions"))
	if err != nil {
		return nil, fmt.Errorf("github actions: client for %s: %w", x.p.base, err)
	}
	x.api = c
	return c, nil
}

// step decides what this call does.
func (x *execution) step(ctx context.Context) (action.Status, error) {
	gen := x.t.Resource.Generation
	rec := x.rec
	if x.op == OpDestroy && x.workflow == "" {
		if rec != nil && !rec.finished() {
			if st, waiting, err := x.waitOut(ctx); waiting {
				return st, err
			}
		}
		return action.Status{Done: true, Reason: "NoDestroyWorkflow", Message: "no destroy workflow: nothing to run"}, nil
	}
	mine := rec != nil && rec.Operation == x.op && rec.Generation == gen
	switch {
	case mine && !rec.finished():
		return x.follow(ctx)
	case rec != nil && !rec.finished():
		// A run of an older generation, or the apply run of a resource now
		// deleted: a new run starts once it ended, so that two runs for one
		// resource never overlap.
		if st, waiting, err := x.waitOut(ctx); waiting {
			return st, err
		}
		return x.start(ctx, 1, x.stale)
	case mine && rec.succeeded() && !x.t.Force:
		return x.done(), nil
	case mine:
		// The last run failed (the scheduler's backoff has passed), or a
		// forced reconcile asks for a new one.
		return x.start(ctx, rec.Attempt+1, x.stale)
	}
	return x.start(ctx, 1, x.stale)
}

// waitOut follows a run that is not this call's to report; waiting is true
// while it has not ended (st and err are then this call's answer).
func (x *execution) waitOut(ctx context.Context) (st action.Status, waiting bool, err error) {
	prev := x.rec.describe()
	st, err = x.follow(ctx)
	if x.rec.finished() {
		return action.Status{}, false, nil
	}
	if err == nil && st.Reason != "RateLimited" && st.Reason != "GitHubUnavailable" {
		st.Message = fmt.Sprintf("waiting for %s (generation %d) to end before starting a new one", prev, x.rec.Generation)
		st.Reason = "WaitingForPreviousRun"
	}
	return st, true, err
}

// done is the answer for a run that succeeded.
func (x *execution) done() action.Status {
	return action.Status{Done: true, Reason: "Succeeded",
		Message: fmt.Sprintf("%s concluded %s %s", x.rec.describe(), x.rec.Conclusion, x.rec.HTMLURL)}
}

// start dispatches run number attempt, after looking for it when an
// earlier attempt may have dispatched it already (search).
func (x *execution) start(ctx context.Context, attempt int, search bool) (action.Status, error) {
	owner, repo := x.params.repo()
	prev := x.rec
	corr := correlationID(x.t.Resource.UID, x.op, x.t.Resource.Generation, attempt)
	next := &Run{
		Operation: x.op, Generation: x.t.Resource.Generation, Attempt: attempt, CorrelationID: corr,
		Repository: x.params.Repository, Workflow: x.workflow, Ref: x.params.Ref, Status: StatusDispatching, Dispatched: x.t.Now.UTC(),
	}
	if prev != nil && prev.CorrelationID == corr {
		next.Transient = prev.Transient
	}
	api, err := x.client(ctx)
	if err != nil {
		return action.Status{Reason: "NoToken"}, err
	}
	if search {
		since := x.t.Now.Add(-time.Hour)
		if prev != nil && !prev.Updated.IsZero() {
			since = prev.Updated.Add(-time.Minute)
		}
		found, err := x.find(ctx, corr, since)
		if err != nil {
			return x.failed(ctx, err, "looking for "+corr)
		}
		if found != nil {
			x.log.Info("found the run an earlier attempt dispatched", "run_id", found.GetID(), "correlation_id", corr)
			x.rec = next
			x.adopt(found)
			return x.follow(ctx)
		}
	}
	inputs := make(map[string]any, len(x.inputs)+1)
	for k, v := range x.inputs {
		inputs[k] = v
	}
	inputs[CorrelationInput] = corr
	req := gh.CreateWorkflowDispatchEventRequest{Ref: x.params.Ref, Inputs: inputs, ReturnRunDetails: new(true)}
	var details *gh.WorkflowDispatchRunDetails
	if id := workflowID(x.workflow); id != 0 {
		details, _, err = api.Actions.CreateWorkflowDispatchEventByID(ctx, owner, repo, id, req)
	} else {
		details, _, err = api.Actions.CreateWorkflowDispatchEventByFileName(ctx, owner, repo, x.workflow, req)
	}
	if err != nil {
		kind := classify(err)
		if kind.transient {
			// The run may exist: say so, and look for it first next time.
			next.Transient++
			x.rec = next
		}
		return x.failed(ctx, err, fmt.Sprintf("dispatching %s of %s/%s", x.op, x.params.Repository, x.workflow))
	}
	x.rec = next
	next.Transient = 0
	if details.GetWorkflowRunID() != 0 {
		next.ID, next.HTMLURL, next.Status = details.GetWorkflowRunID(), details.GetHTMLURL(), "queued"
	} else {
		next.Status = StatusDispatched
	}
	x.log.Info("workflow dispatched", "repository", x.params.Repository, "workflow", x.workflow, "ref", x.params.Ref,
		"run_id", next.ID, "correlation_id", corr, "operation", x.op, "attempt", attempt)
	return action.Status{RequeueAfter: x.p.cfg.PollInterval, Reason: "Dispatched",
		Message: fmt.Sprintf("dispatched %s %s", next.describe(), next.HTMLURL),
		Outputs: map[string]any{OutputJobs: nil, OutputArtifacts: nil}}, nil
}

// follow looks at the record's run once.
func (x *execution) follow(ctx context.Context) (action.Status, error) {
	rec := x.rec
	owner, repo := x.params.repo()
	if rec.Repository != "" {
		owner, repo, _ = strings.Cut(rec.Repository, "/")
	}
	api, err := x.client(ctx)
	if err != nil {
		return action.Status{Reason: "NoToken"}, err
	}
	mine := rec.Operation == x.op && rec.Generation == x.t.Resource.Generation
	if rec.ID == 0 {
		found, err := x.findIn(ctx, owner, repo, rec.Workflow, rec.CorrelationID, rec.Dispatched.Add(-time.Minute))
		if err != nil {
			return x.failed(ctx, err, "looking for "+rec.CorrelationID)
		}
		switch {
		case found != nil:
			x.adopt(found)
		case !mine && (rec.Status == StatusDispatching || x.t.Now.Sub(rec.Dispatched) > x.p.cfg.FindTimeout):
			// A run of an older generation that never started (or was
			// never found): nothing to wait for.
			rec.Status, rec.Conclusion = StatusCompleted, ConclusionVanished
			return action.Status{}, nil
		case rec.Status == StatusDispatching:
			// The dispatch got no clear answer and started nothing: send
			// it again (the same attempt, the same correlation id).
			return x.start(ctx, rec.Attempt, false)
		case x.t.Now.Sub(rec.Dispatched) > x.p.cfg.FindTimeout:
			rec.Status, rec.Conclusion = StatusCompleted, ConclusionVanished
			return action.Status{Reason: "RunNotFound"}, action.Terminalf(
				"github actions: %s was dispatched at %s but no run carries its correlation id %s: the workflow must declare the input %s and put it in its run-name (run-name: deploy ${{ inputs.%s }})",
				rec.describe(), rec.Dispatched.Format(time.RFC3339), rec.CorrelationID, CorrelationInput, CorrelationInput)
		default:
			return action.Status{RequeueAfter: min(x.p.cfg.PollInterval, 5*time.Second), Reason: "Dispatched",
				Message: fmt.Sprintf("%s dispatched; waiting for GitHub to list it", rec.describe())}, nil
		}
	}
	run, _, err := api.Actions.GetWorkflowRunByID(ctx, owner, repo, rec.ID)
	if err != nil {
		if classify(err).notFound {
			rec.Status, rec.Conclusion = StatusCompleted, ConclusionVanished
			if !mine {
				return action.Status{}, nil
			}
			return action.Status{Reason: "RunVanished"}, fmt.Errorf("github actions: %s vanished (404): it is dispatched again after the backoff", rec.describe())
		}
		return x.failed(ctx, err, "reading "+rec.describe())
	}
	x.adopt(run)
	if run.GetStatus() != StatusCompleted {
		rec.Transient = 0
		return action.Status{RequeueAfter: x.p.cfg.PollInterval, Reason: runningReason(run.GetStatus()),
			Message: fmt.Sprintf("%s is %s %s", rec.describe(), run.GetStatus(), rec.HTMLURL)}, nil
	}
	jobs, artifacts, err := x.collect(ctx, owner, repo, rec.ID)
	if err != nil {
		rec.Status = "in_progress" // not finished for us until its jobs are read
		return x.failed(ctx, err, "reading the jobs and artifacts of "+rec.describe())
	}
	rec.Transient = 0
	rec.Status, rec.Conclusion = StatusCompleted, run.GetConclusion()
	out := map[string]any{OutputJobs: jobs, OutputArtifacts: artifacts}
	if !mine {
		return action.Status{Outputs: out}, nil // not this call's run: the caller goes on
	}
	x.log.Info("workflow run completed", "run_id", rec.ID, "conclusion", rec.Conclusion, "operation", rec.Operation, "attempt", rec.Attempt)
	switch rec.Conclusion {
	case "success", "neutral", "skipped":
		st := x.done()
		st.Outputs = out
		return st, nil
	case "cancelled", "action_required":
		return action.Status{Reason: reasonFor(rec.Conclusion), Outputs: out}, action.Terminalf(
			"github actions: %s concluded %s %s: not retried until the spec changes or a manual reconcile", rec.describe(), rec.Conclusion, rec.HTMLURL)
	}
	return action.Status{Reason: reasonFor(rec.Conclusion), Outputs: out}, fmt.Errorf(
		"github actions: %s concluded %s %s: a new run is dispatched after the backoff", rec.describe(), rec.Conclusion, rec.HTMLURL)
}

// adopt copies what GitHub says of a run into the record.
func (x *execution) adopt(run *gh.WorkflowRun) {
	x.rec.ID = run.GetID()
	if u := run.GetHTMLURL(); u != "" {
		x.rec.HTMLURL = u
	}
	if s := run.GetStatus(); s != "" && s != StatusCompleted {
		x.rec.Status = s
	} else if x.rec.Status == StatusDispatching || x.rec.Status == StatusDispatched {
		x.rec.Status = "queued"
	}
}

// find looks for the run carrying correlation id corr among the workflow's
// dispatched runs created since since.
func (x *execution) find(ctx context.Context, corr string, since time.Time) (*gh.WorkflowRun, error) {
	owner, repo := x.params.repo()
	return x.findIn(ctx, owner, repo, x.workflow, corr, since)
}

// maxFindPages bounds a search (100 runs a page).
const maxFindPages = 10

// findIn pages through the workflow's dispatched runs, newest first, until
// it finds the one whose title carries corr or reaches runs created before
// since. (The list's created filter takes GitHub's search syntax, >=date,
// which its OpenAPI description, saying date-time, does not allow: the
// pages are cut here instead.)
func (x *execution) findIn(ctx context.Context, owner, repo, workflow, corr string, since time.Time) (*gh.WorkflowRun, error) {
	api, err := x.client(ctx)
	if err != nil {
		return nil, err
	}
	opts := &gh.ListWorkflowRunsOptions{Event: "workflow_dispatch", ListOptions: gh.ListOptions{PerPage: 100}}
	for page := 0; page < maxFindPages; page++ {
		var runs *gh.WorkflowRuns
		var resp *gh.Response
		if id := workflowID(workflow); id != 0 {
			runs, resp, err = api.Actions.ListWorkflowRunsByID(ctx, owner, repo, id, opts)
		} else {
			runs, resp, err = api.Actions.ListWorkflowRunsByFileName(ctx, owner, repo, workflow, opts)
		}
		if err != nil {
			return nil, err
		}
		older := false
		for _, r := range runs.WorkflowRuns {
			if carries(r.GetDisplayTitle(), corr) {
				return r, nil
			}
			if c := r.GetCreatedAt(); !c.IsZero() && c.Before(since) {
				older = true
			}
		}
		if older || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return nil, nil
}

// maxListed bounds the jobs and artifacts kept in the outputs.
const maxListed = 256

// collect reads a completed run's jobs (its latest attempt) and artifacts
// in the original Operator Controller's format.
func (x *execution) collect(ctx context.Context, owner, repo string, runID int64) (jobs, artifacts []any, err error) {
	api, err := x.client(ctx)
	if err != nil {
		return nil, nil, err
	}
	jobs, artifacts = []any{}, []any{}
	jopts := &gh.ListWorkflowJobsOptions{Filter: "latest", ListOptions: gh.ListOptions{PerPage: 100}}
	for len(jobs) < maxListed {
		page, resp, err := api.Actions.ListWorkflowJobs(ctx, owner, repo, runID, jopts)
		if err != nil {
			return nil, nil, err
		}
		for _, j := range page.Jobs {
			if len(jobs) < maxListed {
				jobs = append(jobs, map[string]any{"name": j.GetName(), "status": j.GetStatus(), "conclusion": nullable(j.GetConclusion()),
					"started_at": timestamp(j.StartedAt), "completed_at": timestamp(j.CompletedAt)})
			}
		}
		if resp.NextPage == 0 {
			break
		}
		jopts.Page = resp.NextPage
	}
	aopts := &gh.ListOptions{PerPage: 100}
	for len(artifacts) < maxListed {
		page, resp, err := api.Actions.ListWorkflowRunArtifacts(ctx, owner, repo, runID, aopts)
		if err != nil {
			return nil, nil, err
		}
		for _, a := range page.Artifacts {
			if len(artifacts) < maxListed {
				artifacts = append(artifacts, map[string]any{"name": a.GetName(), "size_in_bytes": a.GetSizeInBytes()})
			}
		}
		if resp.NextPage == 0 {
			break
		}
		aopts.Page = resp.NextPage
	}
	return jobs, artifacts, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func timestamp(t *gh.Timestamp) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

// runningReason is the condition reason for a run that has not completed.
func runningReason(status string) string {
	switch status {
	case "in_progress":
		return "InProgress"
	case "waiting":
		return "Waiting"
	}
	return "Queued"
}

// reasonFor is the condition reason for a conclusion (timed_out →
// RunTimedOut).
func reasonFor(conclusion string) string {
	var b strings.Builder
	b.WriteString("Run")
	for part := range strings.SplitSeq(conclusion, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// failed turns a request's error into this call's answer: a requeue after
// a rate limit's reset or a transient failure's delay, or an error.
func (x *execution) failed(ctx context.Context, err error, doing string) (action.Status, error) {
	if ctx.Err() != nil {
		// The attempt was interrupted or timed out: not GitHub's doing.
		return action.Status{}, secret.RedactError(fmt.Errorf("github actions: %s: %w", doing, err), x.token)
	}
	k := classify(err)
	// GitHub's answer may echo the token (a 401 body that quotes the
	// Authorization header): no form of it reaches a status, a log or an
	// error.
	k.message = secret.Redact(k.message, x.token)
	switch {
	case k.rateLimited:
		wait := max(k.wait(x.t.Now), time.Second)
		return action.Status{RequeueAfter: wait, Reason: "RateLimited",
			Message: fmt.Sprintf("%s: %s; trying again in %s", doing, k.message, wait.Round(time.Second))}, nil
	case k.transient:
		n := 1
		if x.rec != nil {
			n = max(x.rec.Transient, 1)
		}
		wait := min(x.p.cfg.RetryBase<<min(n-1, 20), x.p.cfg.RetryMax)
		x.log.Warn("GitHub request failed; trying again later", "doing", doing, "error", k.message, "retry_in", wait)
		return action.Status{RequeueAfter: wait, Reason: "GitHubUnavailable",
			Message: fmt.Sprintf("%s: %s; trying again in %s", doing, k.message, wait)}, nil
	case k.unauthorized:
		return action.Status{Reason: "Unauthorized"}, action.Terminalf("github actions: %s: GitHub refused the worker's token (%s): check %s (a token with the repo and workflow scopes)",
			doing, k.message, x.p.cfg.Token)
	}
	return action.Status{Reason: "GitHubError"}, action.Terminalf("github actions: %s: %s", doing, k.message)
}

// errorKind is what a request's error means here.
type errorKind struct {
	rateLimited, transient, unauthorized, notFound bool
	reset                                          time.Time
	retryAfter                                     time.Duration
	message                                        string
}

// wait is how long a rate limit lasts from now.
func (k errorKind) wait(now time.Time) time.Duration {
	if k.retryAfter > 0 {
		return k.retryAfter
	}
	if !k.reset.IsZero() {
		return k.reset.Sub(now) + time.Second
	}
	return DefaultSecondaryWait
}

// classify reads a go-github error.
func classify(err error) errorKind {
	var rle *gh.RateLimitError
	var arle *gh.AbuseRateLimitError
	var er *gh.ErrorResponse
	switch {
	case errors.As(err, &rle):
		return errorKind{rateLimited: true, reset: rle.Rate.Reset.Time,
			message: fmt.Sprintf("rate limit exhausted (x-ratelimit-remaining 0, resets at %s)", rle.Rate.Reset.UTC().Format(time.RFC3339))}
	case errors.As(err, &arle):
		k := errorKind{rateLimited: true, message: "secondary rate limit"}
		if arle.RetryAfter != nil {
			k.retryAfter = *arle.RetryAfter
			k.message += fmt.Sprintf(" (retry-after %s)", arle.RetryAfter)
		}
		return k
	case errors.As(err, &er) && er.Response != nil:
		code := er.Response.StatusCode
		msg := fmt.Sprintf("%d %s", code, er.Message)
		if rq := er.Response.Request; rq != nil && rq.URL != nil {
			msg = fmt.Sprintf("%s %s: %s", rq.Method, rq.URL.Path, msg)
		}
		switch {
		case code == http.StatusTooManyRequests || (code == http.StatusForbidden && er.Response.Header.Get("Retry-After") != ""):
			k := errorKind{rateLimited: true, message: msg}
			if d, err := time.ParseDuration(er.Response.Header.Get("Retry-After") + "s"); err == nil && d > 0 {
				k.retryAfter = d
			}
			return k
		case code >= 500:
			return errorKind{transient: true, message: msg}
		case code == http.StatusUnauthorized:
			return errorKind{unauthorized: true, message: msg}
		case code == http.StatusNotFound:
			return errorKind{notFound: true, message: msg + " (no such repository or workflow, or the token may not see it)"}
		}
		return errorKind{message: msg}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// A broken connection or a timeout: the request may or may not
		// have been served. The url.Error names the method and URL only.
		return errorKind{transient: true, message: ue.Op + " " + ue.URL + ": " + errors.Unwrap(ue).Error()}
	}
	return errorKind{transient: true, message: err.Error()}
}
