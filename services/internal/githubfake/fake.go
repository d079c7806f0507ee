package githubfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// CorrelationInput is the input the plugin sends its correlation id in
// (package github's CorrelationInput); the fake's workflows declare it and
// put it in their run-name by default.
const CorrelationInput = "no8s_correlation_id"

// Artifact is an artifact a workflow's runs upload.
type Artifact struct {
	Name        string
	SizeInBytes int64
}

// Workflow is a workflow the fake knows, in a repository.
type Workflow struct {
	// Repository is owner/name.
	Repository string
	// File is its file name under .github/workflows (deploy.yml).
	File string
	// Name is its name (default: File).
	Name string
	// Inputs are the inputs it declares besides CorrelationInput: others
	// are refused as GitHub refuses them (422 Unexpected inputs).
	Inputs []string
	// Refs are the branches it may run on (default: main).
	Refs []string
	// QueueFor is how long a run stays queued, RunFor how long it then runs
	// (default 0 and 1 s).
	QueueFor, RunFor time.Duration
	// Jobs are its jobs' names (default: deploy).
	Jobs []string
	// Artifacts are what each run uploads (listed once it completed).
	Artifacts []Artifact
	// Conclude says how the n-th run of the workflow (1-based) concludes
	// (default: success).
	Conclude func(n int) string
	// RunName makes a run's display title from its inputs (default: Name
	// and the correlation id, as `run-name: deploy ${{
	// inputs.no8s_correlation_id }}` does).
	RunName func(inputs map[string]string) string
	// NoRunDetails answers dispatches 204 without the run's id, as GitHub
	// Enterprise Server versions without return_run_details do.
	NoRunDetails bool

	id     int64
	repoID int64
}

// run is one workflow run.
type run struct {
	id       int64
	number   int
	workflow *Workflow
	ref      string
	inputs   map[string]string
	title    string
	created  time.Time
	// conclusion is the run's conclusion once it completes; cancelled
	// runs complete when cancelled.
	conclusion string
	cancelled  time.Time
}

func (r *run) started() time.Time { return r.created.Add(r.workflow.QueueFor) }

func (r *run) completed() time.Time {
	if !r.cancelled.IsZero() {
		return r.cancelled
	}
	return r.started().Add(r.workflow.RunFor)
}

// state is the run's status and conclusion at now.
func (r *run) state(now time.Time) (status, conclusion string) {
	switch {
	case !now.Before(r.completed()):
		if !r.cancelled.IsZero() {
			return "completed", "cancelled"
		}
		return "completed", r.conclusion
	case now.Before(r.started()):
		return "queued", ""
	}
	return "in_progress", ""
}

func (r *run) updated(now time.Time) time.Time {
	switch {
	case !now.Before(r.completed()):
		return r.completed()
	case !now.Before(r.started()):
		return r.started()
	}
	return r.created
}

// RunInfo describes a run for assertions.
type RunInfo struct {
	ID         int64
	Repository string
	Workflow   string
	Number     int
	Inputs     map[string]string
	Title      string
	Created    time.Time
	Completed  time.Time
	Conclusion string
}

// Fake is a running fake GitHub. Create it with Start.
type Fake struct {
	// URL is its base URL, with a trailing slash (the plugin's BaseURL).
	URL string

	t     testing.TB
	desc  *Description
	srv   *httptest.Server
	token string
	start time.Time

	mu         sync.Mutex
	workflows  []*Workflow
	runs       []*run
	byID       map[int64]*run
	deleted    map[int64]bool
	nextID     int64
	limitUntil time.Time
	faults     []*fault
	served     int
	answers    map[int]int
	requests   map[string]int
	dispatchRq int
	violations []string
	// hold, when set, gets the id of each run a dispatch started, and the
	// answer waits until it is closed (or the client hangs up).
	hold     chan int64
	released chan struct{}
	// echoAuth makes a 401 quote the request's Authorization header (a
	// careless server's answer: the client must not pass it on).
	echoAuth bool
}

// EchoAuthorization makes every 401 answer quote the request's
// Authorization header in its message, as a careless server would.
func (f *Fake) EchoAuthorization() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.echoAuth = true
}

// fault answers the next count requests that match with status (and
// headers) instead of serving them.
type fault struct {
	count   int
	status  int
	header  http.Header
	message string
	docURL  string
	match   func(*http.Request) bool
}

// Start loads GitHub's description (failing the test, naming the make
// target, when it is not installed), serves the fake on a free loopback
// port, accepting token as the only valid one, and checks at the end of the
// test that every exchange matched the description.
func Start(t testing.TB, token string, workflows ...*Workflow) *Fake {
	t.Helper()
	desc, err := LoadDescription()
	if err != nil {
		t.Fatal(err)
	}
	f := &Fake{t: t, desc: desc, token: token, start: time.Now(), byID: map[int64]*run{}, deleted: map[int64]bool{},
		nextID: 3_000_000_000, answers: map[int]int{}, requests: map[string]int{}}
	for _, w := range workflows {
		f.AddWorkflow(w)
	}
	mux := http.NewServeMux()
	for template, methods := range operations {
		for _, m := range methods {
			f.handle(mux, strings.ToUpper(m), template)
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.record(fmt.Sprintf("request for %s %s, which the fake does not serve", r.Method, r.URL.Path))
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"})
	})
	f.srv = httptest.NewServer(mux)
	f.URL = f.srv.URL + "/"
	t.Cleanup(func() {
		f.srv.Close()
		if v := f.Violations(); len(v) > 0 {
			t.Errorf("the fake GitHub exchanged %d requests or answers that GitHub's OpenAPI description %s does not allow:\n%s",
				len(v), desc.Version(), strings.Join(v, "\n"))
		}
	})
	return f
}

// AddWorkflow makes a workflow known (defaults filled in).
func (f *Fake) AddWorkflow(w *Workflow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.Name == "" {
		w.Name = w.File
	}
	if len(w.Refs) == 0 {
		w.Refs = []string{"main"}
	}
	if len(w.Jobs) == 0 {
		w.Jobs = []string{"deploy"}
	}
	if w.RunFor == 0 {
		w.RunFor = time.Second
	}
	if w.RunName == nil {
		name := w.Name
		w.RunName = func(in map[string]string) string { return strings.TrimSpace(name + " " + in[CorrelationInput]) }
	}
	w.id = int64(1000 + len(f.workflows))
	w.repoID = int64(100 + len(f.workflows))
	f.workflows = append(f.workflows, w)
}

// handle serves one operation, wrapped in the checks every answer gets.
func (f *Fake) handle(mux *http.ServeMux, method, template string) {
	names := regexp.MustCompile(`\{([a-z_]+)\}`).FindAllStringSubmatch(template, -1)
	mux.HandleFunc(method+" "+template, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		x := &exchange{req: r, reqBody: body, template: template, pathParams: map[string]string{}}
		for _, n := range names {
			x.pathParams[n[1]] = r.PathValue(n[1])
		}
		rec := httptest.NewRecorder()
		f.serve(rec, x)
		x.status, x.header, x.body = rec.Code, rec.Header(), rec.Body.Bytes()
		if method == http.MethodPost && rec.Code < 300 {
			f.holdAnswer(r, x.body)
		}
		if err := f.desc.validateResponse(r.Context(), x); err != nil {
			f.record(fmt.Sprintf("answer %d to %s %s: %v\n  body: %.600s", x.status, r.Method, r.URL, err, x.body))
		}
		for k, v := range x.header {
			w.Header()[k] = v
		}
		w.WriteHeader(x.status)
		_, _ = w.Write(x.body)
	})
}

// serve answers x: authentication, injected faults and rate limits, request
// validation, then the operation.
func (f *Fake) serve(w http.ResponseWriter, x *exchange) {
	r := x.req
	now := time.Now()
	f.mu.Lock()
	f.served++
	op := r.Method + " " + x.template
	f.requests[op]++
	if strings.HasSuffix(x.template, "/dispatches") {
		f.dispatchRq++
	}
	limitUntil := f.limitUntil
	var flt *fault
	for i, fl := range f.faults {
		if fl.match == nil || fl.match(r) {
			flt = fl
			fl.count--
			if fl.count <= 0 {
				f.faults = slices.Delete(f.faults, i, i+1)
			}
			break
		}
	}
	served := f.served
	f.mu.Unlock()

	h := w.Header()
	h.Set("X-GitHub-Request-Id", fmt.Sprintf("FAKE:%08X", served))
	h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Resource", "core")
	reset := f.start.Add(time.Hour)
	remaining := max(5000-served, 1)
	defer func() {
		f.mu.Lock()
		f.answers[statusOf(w)]++
		f.mu.Unlock()
	}()

	auth := r.Header.Get("Authorization")
	if auth != "Bearer "+f.token && auth != "token "+f.token {
		f.rateHeaders(h, remaining, reset)
		msg := "Bad credentials"
		f.mu.Lock()
		if f.echoAuth {
			msg += " (Authorization: " + auth + ")"
		}
		f.mu.Unlock()
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": "401"})
		return
	}
	if now.Before(limitUntil) {
		f.rateHeaders(h, 0, limitUntil)
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "API rate limit exceeded for user ID 7. If you reach out to GitHub Support for help, please include the request ID " + h.Get("X-GitHub-Request-Id") + ".",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-rate-limit", "status": "403"})
		return
	}
	f.rateHeaders(h, remaining, reset)
	if flt != nil {
		for k, v := range flt.header {
			h[k] = v
		}
		writeJSON(w, flt.status, map[string]any{"message": flt.message, "documentation_url": flt.docURL, "status": strconv.Itoa(flt.status)})
		return
	}
	if err := f.desc.validateRequest(r.Context(), x); err != nil {
		f.record(fmt.Sprintf("request %s %s does not match the description: %v\n  body: %.600s", r.Method, r.URL, err, x.reqBody))
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Invalid request.\n\n" + err.Error(),
			"documentation_url": "https://docs.github.com/rest", "status": "422"})
		return
	}
	switch {
	case strings.HasSuffix(x.template, "/dispatches"):
		f.dispatch(w, x, now)
	case strings.HasSuffix(x.template, "/workflows/{workflow_id}/runs"):
		f.listRuns(w, x, now)
	case strings.HasSuffix(x.template, "/jobs"):
		f.listJobs(w, x, now)
	case strings.HasSuffix(x.template, "/artifacts"):
		f.listArtifacts(w, x, now)
	default:
		f.getRun(w, x, now)
	}
}

func statusOf(w http.ResponseWriter) int {
	if rec, ok := w.(*httptest.ResponseRecorder); ok {
		return rec.Code
	}
	return 0
}

func (f *Fake) rateHeaders(h http.Header, remaining int, reset time.Time) {
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Used", strconv.Itoa(5000-remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b := mustJSON(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found",
		"documentation_url": "https://docs.github.com/rest/actions/workflow-runs", "status": "404"})
}

func unprocessable(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": msg,
		"documentation_url": "https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event", "status": "422"})
}

// workflow finds a workflow by repository and file name or id.
func (f *Fake) workflow(owner, repo, id string) *Workflow {
	for _, w := range f.workflows {
		if w.Repository == owner+"/"+repo && (w.File == id || strconv.FormatInt(w.id, 10) == id) {
			return w
		}
	}
	return nil
}

func (f *Fake) dispatch(w http.ResponseWriter, x *exchange, now time.Time) {
	var body struct {
		Ref              string         `json:"ref"`
		Inputs           map[string]any `json:"inputs"`
		ReturnRunDetails bool           `json:"return_run_details"`
	}
	if err := json.Unmarshal(x.reqBody, &body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON", "documentation_url": "https://docs.github.com/rest", "status": "400"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	wf := f.workflow(x.pathParams["owner"], x.pathParams["repo"], x.pathParams["workflow_id"])
	if wf == nil {
		notFound(w)
		return
	}
	if !slices.Contains(wf.Refs, body.Ref) {
		unprocessable(w, "No ref found for: "+body.Ref)
		return
	}
	inputs := map[string]string{}
	var unexpected []string
	for k, v := range body.Inputs {
		s, ok := v.(string)
		if !ok {
			unprocessable(w, fmt.Sprintf("Invalid value for input '%s'", k))
			return
		}
		if k != CorrelationInput && !slices.Contains(wf.Inputs, k) {
			unexpected = append(unexpected, strconv.Quote(k))
		}
		inputs[k] = s
	}
	if len(unexpected) > 0 {
		sort.Strings(unexpected)
		unprocessable(w, "Unexpected inputs provided: ["+strings.Join(unexpected, ", ")+"]")
		return
	}
	n := 1
	for _, r := range f.runs {
		if r.workflow == wf {
			n++
		}
	}
	conclusion := "success"
	if wf.Conclude != nil {
		conclusion = wf.Conclude(n)
	}
	f.nextID++
	r := &run{id: f.nextID, number: n, workflow: wf, ref: body.Ref, inputs: inputs, title: wf.RunName(inputs), created: now, conclusion: conclusion}
	f.runs = append(f.runs, r)
	f.byID[r.id] = r
	if wf.NoRunDetails || !body.ReturnRunDetails {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"workflow_run_id": r.id,
		"run_url":  fmt.Sprintf("%s/repos/%s/actions/runs/%d", apiHost, wf.Repository, r.id),
		"html_url": fmt.Sprintf("https://github.com/%s/actions/runs/%d", wf.Repository, r.id)})
}

// page reads per_page (default 30, at most 100) and page (default 1).
func page(q url.Values) (perPage, pageNo int) {
	perPage, pageNo = 30, 1
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		pageNo = v
	}
	return perPage, pageNo
}

// paginate cuts items to one page and sets GitHub's Link header.
func paginate[T any](w http.ResponseWriter, r *http.Request, items []T) []T {
	perPage, pageNo := page(r.URL.Query())
	last := max((len(items)+perPage-1)/perPage, 1)
	link := func(p int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(perPage))
		return fmt.Sprintf(`<%s%s?%s>; rel="%s"`, apiHost, r.URL.Path, q.Encode(), rel)
	}
	var links []string
	if pageNo < last {
		links = append(links, link(pageNo+1, "next"), link(last, "last"))
	}
	if pageNo > 1 {
		links = append(links, link(1, "first"), link(pageNo-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	from := min((pageNo-1)*perPage, len(items))
	return items[from:min(from+perPage, len(items))]
}

var createdRE = regexp.MustCompile(`^(>=|>|<=|<)?(\S+)$`)

func (f *Fake) listRuns(w http.ResponseWriter, x *exchange, now time.Time) {
	q := x.req.URL.Query()
	var since, until time.Time
	if c := q.Get("created"); c != "" {
		m := createdRE.FindStringSubmatch(c)
		var t time.Time
		var err error
		if m != nil {
			t, err = time.Parse(time.RFC3339, m[2])
		}
		if m == nil || err != nil {
			unprocessable(w, "Invalid created date: "+c)
			return
		}
		switch m[1] {
		case ">=", ">":
			since = t
		case "<=", "<":
			until = t
		default:
			since, until = t, t.Add(time.Second)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	wf := f.workflow(x.pathParams["owner"], x.pathParams["repo"], x.pathParams["workflow_id"])
	if wf == nil {
		notFound(w)
		return
	}
	var match []*run
	for _, r := range slices.Backward(f.runs) { // newest first, as GitHub lists them
		if r.workflow != wf || f.deleted[r.id] || (q.Get("event") != "" && q.Get("event") != "workflow_dispatch") ||
			(!since.IsZero() && r.created.Before(since.Truncate(time.Second))) || (!until.IsZero() && !r.created.Before(until)) {
			continue
		}
		if st := q.Get("status"); st != "" {
			if s, c := r.state(now); st != s && st != c {
				continue
			}
		}
		match = append(match, r)
	}
	out := []any{}
	for _, r := range paginate(w, x.req, match) {
		out = append(out, f.runJSON(r, now))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(match), "workflow_runs": out})
}

// lookupRun finds the run of a path, nil when it is not there.
func (f *Fake) lookupRun(x *exchange) *run {
	id, _ := strconv.ParseInt(x.pathParams["run_id"], 10, 64)
	r := f.byID[id]
	if r == nil || f.deleted[id] || r.workflow.Repository != x.pathParams["owner"]+"/"+x.pathParams["repo"] {
		return nil
	}
	return r
}

func (f *Fake) getRun(w http.ResponseWriter, x *exchange, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.lookupRun(x)
	if r == nil {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, f.runJSON(r, now))
}

func (f *Fake) listJobs(w http.ResponseWriter, x *exchange, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.lookupRun(x)
	if r == nil {
		notFound(w)
		return
	}
	idx := make([]int, len(r.workflow.Jobs))
	for i := range idx {
		idx[i] = i
	}
	out := []any{}
	for _, i := range paginate(w, x.req, idx) {
		out = append(out, f.jobJSON(r, i, now))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(idx), "jobs": out})
}

func (f *Fake) listArtifacts(w http.ResponseWriter, x *exchange, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.lookupRun(x)
	if r == nil {
		notFound(w)
		return
	}
	var idx []int
	if s, _ := r.state(now); s == "completed" {
		for i := range r.workflow.Artifacts {
			idx = append(idx, i)
		}
	}
	out := []any{}
	for _, i := range paginate(w, x.req, idx) {
		out = append(out, f.artifactJSON(r, i))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(idx), "artifacts": out})
}

func (f *Fake) record(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.violations = append(f.violations, v)
}

// Violations are the exchanges that did not match GitHub's description.
func (f *Fake) Violations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.violations)
}

// HoldDispatches makes every successful dispatch start its run and then
// hold its answer: the returned channel gets the run's id, and the answers
// go out once release is called (or when the client hangs up: a worker
// killed while it waited has dispatched a run it never heard of).
func (f *Fake) HoldDispatches() (held <-chan int64, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold, f.released = make(chan int64, 100), make(chan struct{})
	ch, rel := f.hold, f.released
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			f.mu.Lock()
			f.hold = nil
			f.mu.Unlock()
			close(rel)
		})
	}
}

func (f *Fake) holdAnswer(r *http.Request, body []byte) {
	f.mu.Lock()
	hold, released := f.hold, f.released
	f.mu.Unlock()
	if hold == nil {
		return
	}
	var id int64
	f.mu.Lock()
	if n := len(f.runs); n > 0 {
		id = f.runs[n-1].id
	}
	f.mu.Unlock()
	var details struct {
		ID int64 `json:"workflow_run_id"`
	}
	if json.Unmarshal(body, &details) == nil && details.ID != 0 {
		id = details.ID
	}
	hold <- id
	select {
	case <-released:
	case <-r.Context().Done():
	}
}

// FailNext answers the next n requests that match (all when match is nil)
// with status (a 5xx), as GitHub's front end does in a bad minute.
func (f *Fake) FailNext(n, status int, match func(*http.Request) bool) {
	f.addFault(&fault{count: n, status: status, message: http.StatusText(status), docURL: "https://docs.github.com/rest", match: match})
}

// SecondaryLimitNext answers the next n requests that match with a
// secondary rate limit: status (403 or 429) and retry-after.
func (f *Fake) SecondaryLimitNext(n, status int, retryAfter time.Duration, match func(*http.Request) bool) {
	h := http.Header{}
	h.Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	f.addFault(&fault{count: n, status: status, header: h, match: match,
		message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
		docURL:  "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"})
}

func (f *Fake) addFault(fl *fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fl)
}

// ExhaustRateLimit makes every request for d answer 403 with
// x-ratelimit-remaining 0 and x-ratelimit-reset at its end (the reset is in
// whole seconds, as GitHub's is).
func (f *Fake) ExhaustRateLimit(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limitUntil = time.Now().Add(d).Truncate(time.Second).Add(time.Second)
	return f.limitUntil
}

// Cancel cancels a run now.
func (f *Fake) Cancel(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.byID[id]; r != nil {
		if s, _ := r.state(time.Now()); s != "completed" {
			r.cancelled = time.Now()
		}
	}
}

// Delete deletes a run (GitHub then answers 404 for it).
func (f *Fake) Delete(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted[id] = true
}

// Runs lists every run, oldest first.
func (f *Fake) Runs() []RunInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]RunInfo, 0, len(f.runs))
	for _, r := range f.runs {
		_, c := r.state(r.completed())
		out = append(out, RunInfo{ID: r.id, Repository: r.workflow.Repository, Workflow: r.workflow.File, Number: r.number,
			Inputs: r.inputs, Title: r.title, Created: r.created, Completed: r.completed(), Conclusion: c})
	}
	return out
}

// Dispatches counts the runs dispatched of a workflow (file name).
func (f *Fake) Dispatches(repository, file string) int {
	n := 0
	for _, r := range f.Runs() {
		if r.Repository == repository && r.Workflow == file {
			n++
		}
	}
	return n
}

// MaxInProgress is the largest number of runs that were in progress (not
// completed) at one time.
func (f *Fake) MaxInProgress() int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range f.Runs() {
		edges = append(edges, edge{r.Created, 1}, edge{r.Completed, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	cur, best := 0, 0
	for _, e := range edges {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

// Stats are the fake's counters.
type Stats struct {
	// Requests counts requests by operation ("GET /repos/...").
	Requests map[string]int
	// Answers counts answers by status.
	Answers map[int]int
	// DispatchRequests counts dispatch requests, refused ones included.
	DispatchRequests int
}

// Stats returns a copy of the counters.
func (f *Fake) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Stats{Requests: map[string]int{}, Answers: map[int]int{}, DispatchRequests: f.dispatchRq}
	for k, v := range f.requests {
		s.Requests[k] = v
	}
	for k, v := range f.answers {
		s.Answers[k] = v
	}
	return s
}
