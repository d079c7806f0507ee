//go:build deploycheck

package composerun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// config is the run's configuration from the environment make deploy-check
// sets: the image and its binaries, the pinned nats-server.
func config(t *testing.T, file string) Config {
	t.Helper()
	for _, k := range []string{"NO8S_IMAGE_REF", "NO8S_IMAGE_BINARIES", "NO8S_NATS_SERVER"} {
		if os.Getenv(k) == "" {
			t.Fatalf("%s is not set: run make deploy-check", k)
		}
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if file == "" {
		file = filepath.Join(root, "docker-compose.yml")
	}
	return Config{ComposeFile: file, ProjectDir: root, Image: os.Getenv("NO8S_IMAGE_REF"),
		Binaries: strings.Fields(os.Getenv("NO8S_IMAGE_BINARIES")), NATSServer: os.Getenv("NO8S_NATS_SERVER"),
		StartTimeout: 3 * time.Minute, Log: testWriter{t}}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestCompose runs docker-compose.yml as written, each service in its own
// network namespace on the image's binaries, and the flow through the
// gateways' published ports (Flow).
func TestCompose(t *testing.T) {
	before := snapshot(t)
	start := time.Now()
	r, err := Start(t.Context(), config(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started in %s", time.Since(start).Round(time.Millisecond))
	f := &Flow{Run: r, Log: t.Logf}
	err = f.Steps(t.Context())
	f.Close()
	if err != nil {
		for _, s := range []string{"gateway", "gateway-2", "registry-sync", "registry-sync-2", "reconciler-tenant", "scheduler", "scheduler-2"} {
			t.Logf("%s log:\n%s", s, r.LogTail(s, 15))
		}
	}
	if cerr := r.Close(); cerr != nil {
		t.Errorf("cleanup: %v", cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	assertClean(t, before)
}
