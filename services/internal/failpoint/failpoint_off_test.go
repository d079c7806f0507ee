//go:build !failpoint

package failpoint_test

import (
	"testing"

	"github.com/no8s/no8s/services/internal/failpoint"
)

// TestWithoutTheTagNothingIsEnabled: in a build without the tag,
// NO8S_FAILPOINTS naming every failpoint (and a name that does not
// exist) enables none and is no error.
func TestWithoutTheTagNothingIsEnabled(t *testing.T) {
	t.Setenv(failpoint.Env, string(failpoint.RelayBeforePublish)+",no-such-point")
	if failpoint.Compiled {
		t.Fatal("Compiled is true without the build tag")
	}
	s, err := failpoint.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range failpoint.Names() {
		if s.Enabled(n) {
			t.Errorf("%s is enabled in a build without the tag", n)
		}
	}
	if l := s.List(); len(l) != 0 {
		t.Errorf("enabled: %v", l)
	}
}
