package authn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadBootstrapTokenModes: the owner's file (0600, 0400) and a file its
// group may read (0640, 0440: a Kubernetes Secret volume with an fsGroup)
// are taken; a file others may read, or its group change, is refused,
// saying how to fix it.
func TestReadBootstrapTokenModes(t *testing.T) {
	tok := strings.Repeat("t", 40)
	for mode, ok := range map[os.FileMode]bool{0o600: true, 0o400: true, 0o640: true, 0o440: true, 0o644: false, 0o604: false, 0o660: false, 0o666: false} {
		path := filepath.Join(t.TempDir(), "bootstrap.token")
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		got, err := ReadBootstrapToken(path)
		switch {
		case ok && (err != nil || got != tok):
			t.Errorf("mode %v: %q, %v; want the token", mode, got, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), "chmod 600")):
			t.Errorf("mode %v: %v; want a refusal saying chmod 600", mode, err)
		}
	}
}
