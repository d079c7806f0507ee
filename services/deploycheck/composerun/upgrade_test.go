//go:build deploycheck

package composerun

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUpgrade: the earlier release first runs as it was deployed: its own
// docker-compose.yml (from its tree, NO8S_UPGRADE_FROM_DIR) on its own
// binaries (NO8S_UPGRADE_FROM_BIN, built by make from that commit), which
// fill the volumes with resources of every kind; then this tree's
// docker-compose.yml runs on the new image over the same volumes: the
// identity service issues the credentials, migrate runs first, the stores
// with --migrate=false, and the earlier resources are read, updated and
// reach Ready, without rebuild-stream.
func TestUpgrade(t *testing.T) {
	old := os.Getenv("NO8S_UPGRADE_FROM_BIN")
	if old == "" {
		t.Fatal("NO8S_UPGRADE_FROM_BIN is not set: run make deploy-check")
	}
	volumes, err := os.MkdirTemp("", "no8s-compose-volumes-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(volumes) })
	if err := os.Chmod(volumes, 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t)

	oldTree := os.Getenv("NO8S_UPGRADE_FROM_DIR")
	if oldTree == "" {
		oldTree = filepath.Dir(old)
	}
	cfg := config(t, filepath.Join(oldTree, "docker-compose.yml"))
	cfg.ProjectDir, cfg.ProcessBinaries, cfg.VolumesDir = oldTree, old, volumes
	r, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &Flow{Run: r, Log: t.Logf}
	err = f.Fill(t.Context())
	f.Close()
	if cerr := r.Close(); cerr != nil {
		t.Errorf("cleanup: %v", cerr)
	}
	if err != nil {
		t.Fatalf("the earlier release: %v", err)
	}

	cfg = config(t, "")
	cfg.VolumesDir = volumes
	r, err = Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f = &Flow{Run: r, Log: t.Logf}
	err = f.Upgraded(t.Context())
	f.Close()
	if err != nil {
		for _, s := range []string{"migrate", "store", "registry-sync", "reconciler-tenant"} {
			t.Logf("%s log:\n%s", s, r.LogTail(s, 15))
		}
	}
	if cerr := r.Close(); cerr != nil {
		t.Errorf("cleanup: %v", cerr)
	}
	if err != nil {
		t.Fatalf("after the upgrade: %v", err)
	}
	assertClean(t, before)
}
