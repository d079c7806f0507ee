//go:build deploycheck

package composerun

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSweep: the sweep at start removes a leftover older than SweepAge
// (with its /etc/netns directory) and keeps a young one, which may belong to
// a run still going.
func TestSweep(t *testing.T) {
	now := time.Now()
	old := Prefix + now.Add(-SweepAge-time.Hour).UTC().Format(idTime) + "-0aa0-store"
	young := Prefix + now.Add(-time.Minute).UTC().Format(idTime) + "-0bb0-store"
	for _, n := range []string{old, young} {
		if err := ip(t.Context(), "netns", "add", n); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join("/etc/netns", n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// t.Context() has ended by the time cleanups run.
		ctx := context.Background()
		for _, n := range []string{old, young} {
			if err := DeleteNamespace(ctx, n); err != nil {
				t.Errorf("remove %s: %v", n, err)
			}
		}
	})
	deleted, err := Sweep(t.Context(), now, SweepAge)
	if err != nil {
		t.Fatal(err)
	}
	names, err := ListNamespaces(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(deleted, old) || slices.Contains(names, old) {
		t.Fatalf("the old leftover %s was not swept (deleted %v, left %v)", old, deleted, names)
	}
	if _, err := os.Stat(filepath.Join("/etc/netns", old)); !os.IsNotExist(err) {
		t.Fatalf("/etc/netns/%s left: %v", old, err)
	}
	if slices.Contains(deleted, young) || !slices.Contains(names, young) {
		t.Fatalf("the young namespace %s was swept (deleted %v)", young, deleted)
	}
}

// TestInterrupted: a run interrupted (SIGINT) after its start removes its
// namespaces, links and processes before it exits.
func TestInterrupted(t *testing.T) {
	before := snapshot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NO8S_COMPOSE_CHILD=interrupt", "NO8S_COMPOSE_CHILD_DIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	started := false
	for sc.Scan() {
		t.Log(sc.Text())
		if strings.Contains(sc.Text(), "every service started") {
			started = true
			break
		}
	}
	if !started {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the child run never started")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		t.Log(sc.Text())
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("interrupted run exited %d (%v), want 130", code, err)
	}
	assertClean(t, before)
}

// TestMain runs the interrupted child when asked: a small file (PostgreSQL,
// NATS, the migration and a store) started, then waiting for its signal.
func TestMain(m *testing.M) {
	switch os.Getenv("NO8S_COMPOSE_CHILD") {
	case "interrupt":
		os.Exit(interruptChild())
	case "preflight":
		if err := Preflight(); err != nil {
			os.Stdout.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func interruptChild() int {
	orig, err := os.ReadFile("../../../docker-compose.yml")
	if err != nil {
		return 2
	}
	s := string(orig)
	i, j := strings.Index(s, "\n  store-2:\n"), strings.Index(s, "\nvolumes:\n")
	if i < 0 || j < i {
		return 2
	}
	// The parent's directory: the child exits from its signal handler.
	file := filepath.Join(os.Getenv("NO8S_COMPOSE_CHILD_DIR"), "docker-compose.yml")
	if err := os.WriteFile(file, []byte(s[:i]+s[j:]), 0o644); err != nil {
		return 2
	}
	root, _ := filepath.Abs("../../..")
	// A child process of the test: no test context, it ends by its signal.
	r, err := Start(context.Background(), Config{ComposeFile: file, ProjectDir: root, Image: os.Getenv("NO8S_IMAGE_REF"),
		Binaries: strings.Fields(os.Getenv("NO8S_IMAGE_BINARIES")), NATSServer: os.Getenv("NO8S_NATS_SERVER"), Log: os.Stdout})
	if err != nil {
		os.Stdout.WriteString(err.Error() + "\n")
		return 1
	}
	defer r.Close()
	select {} // until the signal: the run's handler removes everything and exits 130
}

// TestPreflightWithoutRoot: run as an unprivileged user, the check fails
// (it never skips) and names what it lacks.
func TestPreflightWithoutRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "composerun.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--inh-caps=-all", "--", bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "NO8S_COMPOSE_CHILD=preflight")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "needs") || !strings.Contains(string(out), "CAP_NET_ADMIN") {
		t.Fatalf("preflight as nobody: %v, %s; want a failure naming root or CAP_NET_ADMIN", err, out)
	}
	t.Logf("as nobody: %s", strings.TrimSpace(string(out)))
}
