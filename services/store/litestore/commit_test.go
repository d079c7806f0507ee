package litestore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneCommitPath checks that no code outside commit.go takes a revision
// or writes an outbox row. eventlog.go, the outbox's reader, may name the
// counter (a stream rebuild moves it) but writes no event.
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
		banned := []string{"INSERT INTO outbox", "RenderEvent", "envelope.Encode", "eventstream.Encode", "takeRevision("}
		if f != "eventlog.go" {
			banned = append(banned, "revision_counter")
		}
		for _, b := range banned {
			if bytes.Contains(src, []byte(b)) {
				t.Errorf("%s uses %q: revisions and outbox rows are written only by commit.go", f, b)
			}
		}
	}
}
