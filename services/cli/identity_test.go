package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/sdk/identity"
)

func TestIdentityCommands(t *testing.T) {
	dir := t.TempDir()
	ca, noop := filepath.Join(dir, "ca"), filepath.Join(dir, "noop")

	code, out, errOut := run(t, nil, "", "identity", "init-ca", "--ca-dir", ca)
	if code != ExitOK || !strings.HasPrefix(out, "CA created: "+ca) {
		t.Fatalf("init-ca: %d %q %q", code, out, errOut)
	}
	keyBefore, err := os.ReadFile(filepath.Join(ca, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run(t, nil, "", "identity", "init-ca", "--ca-dir", ca); code != ExitOK || !strings.HasPrefix(out, "CA exists: ") {
		t.Fatalf("init-ca again: %d %q", code, out)
	}
	if keyAfter, _ := os.ReadFile(filepath.Join(ca, "ca.key")); string(keyAfter) != string(keyBefore) {
		t.Fatal("init-ca replaced an existing CA key")
	}

	code, out, errOut = run(t, nil, "", "identity", "issue", "--ca-dir", ca, "--out", noop, "--reconciler", "noop", "--types", "Noop/v1,Db/v1beta1")
	if code != ExitOK || !strings.HasPrefix(out, "issued reconciler/noop (types ") {
		t.Fatalf("issue: %d %q %q", code, out, errOut)
	}
	creds, err := identity.Load(noop)
	if err != nil {
		t.Fatal(err)
	}
	if id := creds.ID(); !id.Is(identity.Reconciler, "noop") || !id.Serves("Noop/v1") || !id.Serves("Db/v1beta1") {
		t.Fatalf("issued %+v", id)
	}
	if fi, err := os.Stat(filepath.Join(noop, identity.KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi.Mode(), err)
	}
	if code, out, _ := run(t, nil, "", "identity", "show", noop); code != ExitOK || !strings.HasPrefix(out, "reconciler/noop (types ") || !strings.Contains(out, "valid until ") {
		t.Fatalf("show: %d %q", code, out)
	}

	// Usage errors write nothing.
	for _, args := range [][]string{
		{"--service", "evil"},
		{"--service", "store", "--client", "ci"},
		{},
		{"--client", "ci", "--types", "Noop/v1"},
		{"--reconciler", "noop", "--types", "noop"},
		{"--reconciler", "Bad_Name"},
	} {
		out := filepath.Join(dir, "refused")
		code, _, errOut := run(t, nil, "", append([]string{"identity", "issue", "--ca-dir", ca, "--out", out}, args...)...)
		if code != ExitUsage || !strings.Contains(errOut, "error: ") {
			t.Errorf("issue %v: exit %d, %q; want a usage error", args, code, errOut)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("issue %v wrote %s", args, out)
		}
	}
	if code, _, errOut := run(t, nil, "", "identity", "issue", "--ca-dir", filepath.Join(dir, "none"), "--out", filepath.Join(dir, "x"), "--service", "store"); code != ExitError || !strings.Contains(errOut, "no such file") {
		t.Errorf("issue from a missing CA: %d %q", code, errOut)
	}

	// Rotation: both CAs in the bundle, then only the new one.
	if code, out, _ := run(t, nil, "", "identity", "rotate-ca", "--ca-dir", ca); code != ExitOK || !strings.Contains(out, "still trusted") {
		t.Fatalf("rotate-ca: %d %q", code, out)
	}
	if n := strings.Count(readFile(t, filepath.Join(ca, "ca.crt")), "BEGIN CERTIFICATE"); n != 2 {
		t.Fatalf("bundle after rotate-ca holds %d certificates", n)
	}
	if code, _, _ := run(t, nil, "", "identity", "retire-ca", "--ca-dir", ca); code != ExitOK {
		t.Fatalf("retire-ca: %d", code)
	}
	if n := strings.Count(readFile(t, filepath.Join(ca, "ca.crt")), "BEGIN CERTIFICATE"); n != 1 {
		t.Fatalf("bundle after retire-ca holds %d certificates", n)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
