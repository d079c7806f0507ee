package main

import (
	"testing"

	"github.com/no8s/no8s/services/internal/flagenv/flagenvtest"
)

// TestEnvironment: every flag of no8s-reconciler and its reconcilers has
// its environment variable by the rule, and every name documented before
// the rule still works.
func TestEnvironment(t *testing.T) {
	flagenvtest.Check(t, newCommand, []flagenvtest.Old{
		{Flag: "nats-url", Env: "NATS_URL"},
		{Flag: "concurrency", Env: "NO8S_MAX_CONCURRENCY"},
		{Command: "noop", Flag: "types", Env: "NO8S_NOOP_TYPES"},
		{Command: "noop", Flag: "name", Env: "NO8S_NOOP_NAME"},
		{Command: "github-workflow", Flag: "github-api-url", Env: "GITHUB_API_URL"},
		{Command: "github-workflow", Flag: "token-env", Env: "NO8S_GITHUB_TOKEN_ENV"},
		{Command: "github-workflow", Flag: "token-file", Env: "NO8S_GITHUB_TOKEN_FILE"},
		{Command: "github-workflow", Flag: "poll-interval", Env: "NO8S_GITHUB_POLL_INTERVAL"},
		{Command: "tenant", Flag: "ready-poll", Env: "NO8S_TENANT_READY_POLL"},
	})
}
