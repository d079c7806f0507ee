// Package github is the GitHub Actions action plugin (github_actions, as in
// the original Operator Controller): Apply dispatches a workflow (workflow_dispatch) with the
// resource's inputs and follows its run, Destroy does the same with the
// destroy workflow, through google/go-github.
//
//	plugin, err := github.New(github.Config{}) // GITHUB_TOKEN, api.github.com
//	reg, err := action.NewRegistry(plugin)
//	engine := sdk.New[Spec]("deployer", step).WithActions(reg)
//	// in the step: return req.RunAction(ctx, github.Name, github.Params{...})
//
// A run is followed without holding a worker: each attempt dispatches or
// looks at the run once and asks to come back after Config.PollInterval,
// and the run's id and correlation id are saved in the resource's outputs
// (key "run") with the attempt's result. Any replica, after any restart,
// resumes the same run. Exactly one run is dispatched per generation and
// retry: an attempt that finds that the attempt before it ended without
// saving (a gap in the lease epochs: a killed worker), or that a dispatch
// got no clear answer (a 5xx, a broken connection), looks for the run by
// its correlation id before dispatching again. The workflow must therefore
// declare the input no8s_correlation_id and put it in its run-name:
//
//	on:
//	  workflow_dispatch:
//	    inputs:
//	      no8s_correlation_id: {type: string, required: true}
//	run-name: deploy ${{ inputs.no8s_correlation_id }}
//
// When the run completes, its jobs and artifacts become the outputs "jobs"
// (name, status, conclusion, started_at, completed_at) and "artifacts"
// (name, size_in_bytes). Conclusions map to outcomes: success, neutral and
// skipped succeed; failure, timed_out, startup_failure and stale fail and
// are retried with the scheduler's backoff by dispatching a new run;
// cancelled and action_required fail terminally (a person stopped it or must
// act: not retried until the spec changes or a manual trigger); a run that
// vanished (404) fails and is retried.
//
// Rate limits are honoured: a 403 or 429 with x-ratelimit-remaining: 0
// waits until x-ratelimit-reset, a secondary limit for its retry-after (a
// minute without one), each as a requeue rather than a failure. A 5xx or a
// broken connection on a read is retried at once (three tries), then, like
// a dispatch that got one, after a growing delay. A token GitHub refuses
// (401), a workflow it does not know (404) and inputs it refuses (422) are
// terminal errors. The token comes from a secret reference (GITHUB_TOKEN by
// default) and never appears in an output, an error or a log line; the API
// base URL (GitHub Enterprise Server: https://HOST/api/v3/) is the worker's
// configuration, never the spec's.
package github
