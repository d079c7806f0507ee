package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/testenv"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/")

// age is a table row's AGE, its last column: the one cell that depends on
// the clock.
var age = regexp.MustCompile(`(?m) [0-9]+[smhdy][0-9smhdy]*$`)

// TestCLIWatchTableGolden runs `no8s get TYPE -w` (a table) against no8s dev
// with the noop reconciler, over a create, an update and a delete, each
// reconciled before the next, and compares what it printed with
// testdata/get-watch.golden (go test -update rewrites it): the listed row
// aligned with the header, each change a row in the same columns, and the
// delete ending in a row with STATUS deleted.
func TestCLIWatchTableGolden(t *testing.T) {
	addrs, _ := startDevServing(t, noPostgreSQL(), "Widget", map[string]any{
		"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}})
	env := cliEnv(t, addrs.APIURL)
	run := func(stdin string, args ...string) {
		t.Helper()
		if r := no8sEnv(t, env, stdin, args...); r.code != 0 {
			t.Fatalf("no8s %s: %+v", strings.Join(args, " "), r)
		}
	}
	widget := func(name string, size int) string {
		return fmt.Sprintf("kind: Resource\ntype: Widget/v1\nmetadata: {name: %s}\nspec: {size: %d}\n", name, size)
	}
	ready := func(name string) { run("", "wait", "Widget/v1", name, "--for", "condition=Ready", "--timeout", "90s") }

	run(widget("first-widget-with-a-long-name", 1), "apply", "-f", "-")
	ready("first-widget-with-a-long-name")

	var stdout, stderr testenv.LogBuffer
	cmd := exec.CommandContext(t.Context(), filepath.Join(binDir, "no8s"), "get", "Widget/v1", "-w")
	cmd.Env = append(withoutNo8sEnv(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	waitFor(t, 30*time.Second, "the watch's list", func() error {
		if n := strings.Count(stdout.String(), "\n"); n < 2 {
			return fmt.Errorf("%d lines: %q", n, stdout.String())
		}
		return nil
	})

	run(widget("b", 1), "apply", "-f", "-")
	ready("b")
	run(widget("b", 2), "apply", "-f", "-")
	ready("b")
	run("", "delete", "Widget/v1", "b")
	// The row of the finished deletion is the last change: once printed,
	// everything before it is (the watch prints in revision order).
	waitFor(t, 90*time.Second, "the watch to print the deletion", func() error {
		if !regexp.MustCompile(`(?m)^default +b +deleted `).MatchString(stdout.String()) {
			return fmt.Errorf("the watch printed %q", stdout.String())
		}
		return nil
	})
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("the watch ended with %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the watch did not end on SIGINT\nstderr: %s", stderr.String())
	}

	got := []byte(age.ReplaceAllString(stdout.String(), " <age>"))
	path := filepath.Join("testdata", "get-watch.golden")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestCLIWatchTableGolden -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("get -w printed (AGE as <age>):\n%s\nwant (%s):\n%s", got, path, want)
	}
}
