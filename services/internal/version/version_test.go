package version

import (
	"runtime"
	"strings"
	"testing"
)

// TestString: without a stamp (go test links none) the line still names the
// binary, a version, a commit and the platform.
func TestString(t *testing.T) {
	got := String("no8s-store")
	for _, want := range []string{"no8s-store ", Version(), " commit " + Commit(), runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(got, want) {
			t.Fatalf("String = %q, want it to contain %q", got, want)
		}
	}
	if Version() == "" || Commit() == "" {
		t.Fatalf("empty version %q or commit %q", Version(), Commit())
	}
}
