//go:build failpoint

package failpoint_test

import (
	"slices"
	"testing"

	"github.com/no8s/no8s/services/internal/failpoint"
)

// TestWithTheTagTheEnvironmentEnables: in a build with the tag,
// NO8S_FAILPOINTS enables the failpoints it names, and only those; an
// unknown name is an error.
func TestWithTheTagTheEnvironmentEnables(t *testing.T) {
	if !failpoint.Compiled {
		t.Fatal("Compiled is false with the build tag")
	}
	t.Setenv(failpoint.Env, "")
	s, err := failpoint.FromEnv()
	if err != nil || s.Enabled(failpoint.RelayBeforePublish) {
		t.Fatalf("empty %s: enabled %v, err %v", failpoint.Env, s.List(), err)
	}
	t.Setenv(failpoint.Env, " relay-before-publish ,")
	s, err = failpoint.FromEnv()
	if err != nil || !s.Enabled(failpoint.RelayBeforePublish) || !slices.Equal(s.List(), []failpoint.Name{failpoint.RelayBeforePublish}) {
		t.Fatalf("%s=relay-before-publish: enabled %v, err %v", failpoint.Env, s.List(), err)
	}
	if s.Enabled("other") {
		t.Fatal("a name not listed is enabled")
	}
	if _, err := failpoint.Parse("relay-before-publish,relay-befor-publish"); err == nil {
		t.Fatal("an unknown failpoint name was accepted")
	}
}
