//go:build deploycheck

package composerun

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBrokenCompose runs copies of docker-compose.yml broken on purpose:
// each fails the check at the step that needs what is broken, naming the
// service, and leaves nothing behind.
func TestBrokenCompose(t *testing.T) {
	root, _ := filepath.Abs("../../..")
	orig, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// A nats-server configuration that takes anyone (no include of the CA's
	// NATS users), but whose protocol line still takes their JWTs: every
	// service starts, and only the authenticated step notices.
	open := filepath.Join(t.TempDir(), "nats-open.conf")
	if err := os.WriteFile(open, []byte("port: 4222\nhttp_port: 8222\nmax_control_line: 32768\njetstream {\n  store_dir: /data\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		edit    func(string) string
		step    string
		service string
	}{
		{"unknown image", func(s string) string { return strings.Replace(s, "image: postgres:16", "image: mysql:8", 1) }, "images", "postgres"},
		{"gateway port changed", func(s string) string { return strings.Replace(s, `ports: ["8000:8000"]`, `ports: ["8080:8000"]`, 1) }, "readme-flow", "gateway"},
		{"NO8S_NATS_URL removed from the scheduler", func(s string) string {
			i := strings.Index(s, "\n  scheduler:\n")
			j := strings.Index(s[i:], "      NO8S_NATS_URL: nats://nats:4222\n")
			if i < 0 || j < 0 {
				return s
			}
			return s[:i+j] + s[i+j+len("      NO8S_NATS_URL: nats://nats:4222\n"):]
		}, "start", "scheduler"},
		{"NATS takes anyone", func(s string) string {
			return strings.Replace(s, `"./deploy/nats/nats-server.conf:/etc/nats/nats-server.conf:ro"`, `"`+open+`:/etc/nats/nats-server.conf:ro"`, 1)
		}, "authenticated", "nats"},
		{"identity fails", func(s string) string {
			return strings.Replace(s, `"--reconciler", "tenant=Tenant/v1",`, `"--reconciler", "tenant",`, 1)
		}, "start", "identity"},
		{"registry-sync removed", func(s string) string {
			i := strings.Index(s, "  # TenantRegistries and HttpSources")
			j := strings.Index(s, "  # Tenant/v1:")
			if i < 0 || j < i {
				return s
			}
			return s[:i] + s[j:]
		}, "tenant-registry", "registry-sync"},
	} {
		t.Run(c.name, func(t *testing.T) {
			broken := c.edit(string(orig))
			if broken == string(orig) {
				t.Fatalf("the edit changed nothing: docker-compose.yml no longer has what this case breaks")
			}
			file := filepath.Join(t.TempDir(), "docker-compose.yml")
			if err := os.WriteFile(file, []byte(broken), 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t)
			cfg := config(t, file)
			cfg.StartTimeout = 75 * time.Second
			err := runCheck(t, cfg, 40*time.Second)
			assertClean(t, before)
			var se *StepError
			if !errors.As(err, &se) {
				t.Fatalf("the check passed or failed outside a step: %v", err)
			}
			if se.Step != c.step || !slices.ContainsFunc(se.Services, func(s string) bool { return strings.HasPrefix(s, c.service) }) {
				t.Fatalf("failed at step %q naming %v, want step %q naming %s: %v", se.Step, se.Services, c.step, c.service, err)
			}
			t.Logf("failed as it should: %v", firstLine(err.Error()))
		})
	}
}

// runCheck starts the file and runs the flow, removing everything after.
func runCheck(t *testing.T, cfg Config, wait time.Duration) error {
	r, err := Start(t.Context(), cfg)
	if err != nil {
		return err
	}
	f := &Flow{Run: r, Log: t.Logf, Timeout: wait}
	err = f.Steps(t.Context())
	f.Close()
	if cerr := r.Close(); cerr != nil {
		t.Errorf("cleanup: %v", cerr)
	}
	return err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
