package main

import (
	"testing"

	"github.com/no8s/no8s/services/internal/flagenv/flagenvtest"
)

// TestDevEnvironment: every flag of no8s dev but its internal addresses
// has its environment variable by the rule, and every name documented
// before the rule still works.
func TestDevEnvironment(t *testing.T) {
	flagenvtest.Check(t, newDevCmd, []flagenvtest.Old{
		{Flag: "database-url", Env: "DATABASE_URL"},
		{Flag: "identities", Env: "NO8S_DEV_IDENTITIES"},
	})
}
