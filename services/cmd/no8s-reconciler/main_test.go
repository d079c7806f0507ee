package main

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/services/internal/identityca"
)

// TestIssueSelf: --identity-ca issues the process a short-lived credential
// for its own name with exactly its types, in a private directory; it
// refuses beside NO8S_IDENTITY_DIR and a type another reconciler holds.
func TestIssueSelf(t *testing.T) {
	caDir := t.TempDir()
	now := time.Now()
	if _, _, err := identityca.LoadOrCreate(caDir, now); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	types := []sdk.TypeRef{sdk.Type("DatabaseCluster", "v1"), sdk.Type("Bucket", "v1")}
	dir, err := issueSelf(caDir, "noop", types, noEnv, now)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	creds, err := identity.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := creds.ID()
	if id.String() != "reconciler/noop" || !slices.Equal(id.Types, []string{"Bucket/v1", "DatabaseCluster/v1"}) {
		t.Fatalf("issued %s %v", id, id.Types)
	}
	if left := time.Until(creds.NotAfter()); left > selfValidity || left < selfValidity-time.Hour {
		t.Fatalf("valid for %s more, want about %s", left, selfValidity)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("credentials directory mode %v (%v), want 0700", fi.Mode(), err)
	}

	withDir := func(k string) string {
		if k == identity.EnvDir {
			return "/etc/no8s/noop"
		}
		return ""
	}
	if _, err := issueSelf(caDir, "noop", types, withDir, now); err == nil || !strings.Contains(err.Error(), identity.EnvDir) {
		t.Fatalf("with %s set: %v, want a refusal naming it", identity.EnvDir, err)
	}
	if _, err := issueSelf(caDir, "rival", types[1:], noEnv, now); !errors.Is(err, identityca.ErrClaimed) {
		t.Fatalf("a type noop holds, to another reconciler: %v, want ErrClaimed", err)
	}
}
