package authztest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

// Credentials issues id's credentials from ca, valid for an hour from now,
// into a directory of the test's, and loads them.
func Credentials(t testing.TB, ca *identityca.CA, id identity.ID, now time.Time) *identity.Credentials {
	t.Helper()
	dir := filepath.Join(t.TempDir(), id.Name)
	if err := ca.IssueTo(dir, id, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	c, err := identity.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
