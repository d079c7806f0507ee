package pgstore_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneCommitPath checks that no code outside commit.go takes a revision
// or writes the outbox itself.
func TestOneCommitPath(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == "commit.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, banned := range []string{"revision_seq", "outbox (", "pg_current_xact_id", "envelope.Encode", "eventstream.Encode", "storage.RenderEvent"} {
			if bytes.Contains(src, []byte(banned)) {
				t.Errorf("%s uses %q: revisions and outbox rows are written only by commit.go", f, banned)
			}
		}
	}
}
