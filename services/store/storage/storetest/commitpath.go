package storetest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CheckOneCommitPath is a backend's own check that only its commit path
// takes revisions and writes outbox rows: it fails t when a Go file of the
// current directory (the backend's package; tests aside) other than
// commitFile contains one of banned. allowed lists, by file, the banned
// strings that file may still contain (a reader of the outbox naming its
// table, say).
func CheckOneCommitPath(t *testing.T, commitFile string, banned []string, allowed map[string][]string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == commitFile || strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
	next:
		for _, b := range banned {
			for _, a := range allowed[f] {
				if a == b {
					continue next
				}
			}
			if bytes.Contains(src, []byte(b)) {
				t.Errorf("%s uses %q: revisions and outbox rows are written only by %s", f, b, commitFile)
			}
		}
	}
}
