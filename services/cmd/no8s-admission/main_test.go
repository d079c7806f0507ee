package main

import (
	"testing"

	"github.com/no8s/no8s/services/internal/flagenv/flagenvtest"
)

// TestEnvironment: every flag of no8s-admission has its environment variable by the
// rule, and every name documented before the rule still works.
func TestEnvironment(t *testing.T) {
	flagenvtest.Check(t, newCommand, []flagenvtest.Old{
		{Flag: "nats-url", Env: "NATS_URL"},
		{Flag: "listen", Env: "NO8S_ADMISSION_LISTEN"},
	})
}
