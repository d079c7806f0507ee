package testkit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/sdk/testkit"
)

// TestBinaryNamesBothWaysWhenMissing: with no $NO8S_BIN and no no8s on
// PATH, the error says how to provide it; $NO8S_BIN wins over PATH, and a
// $NO8S_BIN that does not exist is named.
func TestBinaryNamesBothWaysWhenMissing(t *testing.T) {
	t.Setenv(testkit.BinaryEnv, "")
	t.Setenv("PATH", t.TempDir())
	_, err := testkit.Binary()
	if err == nil || !strings.Contains(err.Error(), "NO8S_BIN") || !strings.Contains(err.Error(), "PATH") {
		t.Fatalf("error %v, want one naming NO8S_BIN and PATH", err)
	}

	onPath := t.TempDir()
	if err := os.WriteFile(filepath.Join(onPath, "no8s"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", onPath)
	if got, err := testkit.Binary(); err != nil || got != filepath.Join(onPath, "no8s") {
		t.Fatalf("Binary() = %q, %v; want the one on PATH", got, err)
	}

	explicit := filepath.Join(t.TempDir(), "my-no8s")
	t.Setenv(testkit.BinaryEnv, explicit)
	if _, err := testkit.Binary(); err == nil || !strings.Contains(err.Error(), explicit) {
		t.Fatalf("a missing $NO8S_BIN: error %v, want it named", err)
	}
	if err := os.WriteFile(explicit, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := testkit.Binary(); err != nil || got != explicit {
		t.Fatalf("Binary() = %q, %v; want $NO8S_BIN", got, err)
	}
}
