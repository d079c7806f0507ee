package githubfake

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The description catches what would let the fake drift from GitHub: a
// run without a required field, a field of the wrong type, an error that
// is not GitHub's error body, missing rate-limit headers, a request GitHub
// would refuse.
func TestDescriptionCatchesDrift(t *testing.T) {
	start := time.Now()
	d, err := LoadDescription()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("description %s loaded in %s", d.Version(), time.Since(start).Round(time.Millisecond))
	f := &Fake{desc: d}
	wf := &Workflow{Repository: "acme/infra", File: "deploy.yml", RunFor: time.Second, Jobs: []string{"deploy"}}
	r := &run{id: 7, number: 1, workflow: wf, ref: "main", title: "deploy x", created: time.Now(), conclusion: "success"}
	good := func() map[string]any { return f.runJSON(r, time.Now()) }
	headers := func() http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("X-GitHub-Request-Id", "X")
		for _, k := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Used"} {
			h.Set(k, "5")
		}
		return h
	}
	check := func(method, url, template string, params map[string]string, body string, status int, h http.Header, respBody string) error {
		req := httptest.NewRequest(method, url, strings.NewReader(body))
		x := &exchange{req: req, reqBody: []byte(body), template: template, pathParams: params, status: status, header: h, body: []byte(respBody)}
		if err := d.validateRequest(context.Background(), x); err != nil {
			return err
		}
		return d.validateResponse(context.Background(), x)
	}
	runPath := "/repos/{owner}/{repo}/actions/runs/{run_id}"
	params := map[string]string{"owner": "acme", "repo": "infra", "run_id": "7"}
	get := func(body map[string]any, status int, h http.Header) error {
		return check("GET", "/repos/acme/infra/actions/runs/7", runPath, params, "", status, h, string(mustJSON(body)))
	}
	if err := get(good(), 200, headers()); err != nil {
		t.Fatalf("the fake's own run is refused: %v", err)
	}
	noID := good()
	delete(noID, "id")
	badType := good()
	badType["run_number"] = "one"
	noRate := headers()
	noRate.Del("X-RateLimit-Remaining")
	for name, err := range map[string]error{
		"a run without id":          get(noID, 200, headers()),
		"run_number as a string":    get(badType, 200, headers()),
		"no x-ratelimit-remaining":  get(good(), 200, noRate),
		"an error that is not JSON": check("GET", "/repos/acme/infra/actions/runs/7", runPath, params, "", 502, headers(), "<html>bad gateway</html>"),
		"an error of another shape": check("GET", "/repos/acme/infra/actions/runs/7", runPath, params, "", 500, headers(), `{"message": 5}`),
		"an undocumented success":   get(good(), 201, headers()),
		"too many inputs": check("POST", "/repos/acme/infra/actions/workflows/deploy.yml/dispatches", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
			map[string]string{"owner": "acme", "repo": "infra", "workflow_id": "deploy.yml"},
			`{"ref": "main", "inputs": {`+manyInputs(26)+`}}`, 204, headers(), ""),
		"a dispatch without ref": check("POST", "/repos/acme/infra/actions/workflows/deploy.yml/dispatches", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
			map[string]string{"owner": "acme", "repo": "infra", "workflow_id": "deploy.yml"}, `{"inputs": {}}`, 204, headers(), ""),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func manyInputs(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"in` + strings.Repeat("x", i) + `": "v"`
	}
	return strings.Join(parts, ", ")
}

// A test that cannot find the description fails, naming the make target.
func TestMissingDescriptionNamesTheMakeTarget(t *testing.T) {
	t.Setenv(EnvDescription, t.TempDir()+"/none.json")
	_, err := LoadDescription()
	if err == nil || !strings.Contains(err.Error(), MakeTarget) {
		t.Fatalf("error %v does not name %s", err, MakeTarget)
	}
}
