package github

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk/action"
)

// The plugin's behaviour against GitHub's REST shapes is tested in the
// services module (services/internal/githubfake, whose every response is
// validated against GitHub's OpenAPI description): this module stays free
// of test-only dependencies.

func TestCarries(t *testing.T) {
	id := correlationID("u-1", OpApply, 3, 1)
	if id != "no8s-apply-u-1-g3-r1" {
		t.Fatalf("correlation id %q", id)
	}
	for title, want := range map[string]bool{
		"deploy " + id:                  true,
		id:                              true,
		"deploy " + id + " (prod)":      true,
		"deploy [" + id + "]":           true,
		"deploy " + id + "2":            false, // r12 is another attempt
		"deploy x" + id:                 false,
		"deploy no8s-apply-u-1-g3-r2":   false,
		"deploy no8s-destroy-u-1-g3-r1": false,
	} {
		if got := carries(title, id); got != want {
			t.Errorf("carries(%q) = %v, want %v", title, got, want)
		}
	}
}

func TestParams(t *testing.T) {
	ok := `{"repository": "acme/infra", "workflow": "deploy.yml", "ref": "main", "inputs": {"a": 1}, "destroyWorkflow": "1234"}`
	p, err := DecodeParams(json.RawMessage(ok))
	if err != nil || p.Repository != "acme/infra" || workflowID(p.DestroyWorkflow) != 1234 || workflowID(p.Workflow) != 0 {
		t.Fatalf("%+v %v", p, err)
	}
	for _, c := range []struct{ in, field string }{
		{`{"repository": "acme", "workflow": "deploy.yml", "ref": "main"}`, "repository"},
		{`{"repository": "acme/infra/x", "workflow": "deploy.yml", "ref": "main"}`, "repository"},
		{`{"repository": "acme/infra", "workflow": "../deploy.yml", "ref": "main"}`, "workflow"},
		{`{"repository": "acme/infra", "workflow": "deploy", "ref": "main"}`, "workflow"},
		{`{"repository": "acme/infra", "workflow": "deploy.yml", "ref": ""}`, "ref"},
		{`{"repository": "acme/infra", "workflow": "deploy.yml", "ref": "a b"}`, "ref"},
		{`{"repository": "acme/infra", "workflow": "deploy.yml", "ref": "main", "destroyWorkflow": "x"}`, "destroyWorkflow"},
		{`{"repository": "acme/infra", "workflow": "deploy.yml", "ref": "main", "token": "x"}`, "params"},
	} {
		_, err := DecodeParams(json.RawMessage(c.in))
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Field != c.field {
			t.Errorf("%s: %v, want an error on %s", c.in, err, c.field)
		}
	}
}

func TestRunRecord(t *testing.T) {
	r := &Run{Operation: OpApply, Generation: 2, Attempt: 1, CorrelationID: "c", Status: "in_progress", ID: 9, Epoch: 4, Dispatched: time.Unix(100, 0).UTC()}
	back := readRun(map[string]any{OutputRun: r.asOutput()})
	if back == nil || *back != *r {
		t.Fatalf("round trip: %+v", back)
	}
	for _, v := range []any{nil, "x", map[string]any{"operation": "other", "attempt": 1}, map[string]any{"operation": "apply"}} {
		if readRun(map[string]any{OutputRun: v}) != nil {
			t.Errorf("%v read as a record", v)
		}
	}
	if got := reasonFor("timed_out"); got != "RunTimedOut" {
		t.Errorf("reason %q", got)
	}
}

func TestConfig(t *testing.T) {
	p, err := New(Config{BaseURL: "https://ghe.example.com/api/v3"})
	if err != nil || p.base != "https://ghe.example.com/api/v3/" || p.cfg.Token.Value != DefaultTokenEnv || p.cfg.PollInterval != DefaultPollInterval {
		t.Fatalf("%+v %v", p, err)
	}
	for _, bad := range []Config{{BaseURL: "ftp://x"}, {BaseURL: "https://u:p@x/"}, {PollInterval: time.Millisecond}, {MaxInputs: 1}, {RetryBase: 2 * time.Second, RetryMax: time.Second}} {
		if _, err := New(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	// Params that cannot work are terminal, before any request.
	_, err = p.Apply(t.Context(), action.Task{Params: json.RawMessage(`{"repository": "x"}`)})
	if !action.IsTerminal(err) || !strings.Contains(err.Error(), "repository") {
		t.Fatalf("bad params: %v", err)
	}
}
