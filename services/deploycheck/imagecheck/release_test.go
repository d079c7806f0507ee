package imagecheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s/services/internal/failpoint"
)

// repoRoot is the repository's root, where the Makefile is.
const repoRoot = "../../.."

// makeBuild runs `make target BIN=dir` at the repository's root.
func makeBuild(t *testing.T, target, dir string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "make", "-s", target, "BIN="+dir)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v: %s", target, err, out)
	}
}

// TestReleaseBuildsCarryNoFailpoints: every binary `make build` makes
// ($NO8S_BUILD_BIN, as make test passes it, or built here into a
// directory of its own) has no failpoint build tag (`go version -m`, the
// -tags setting) and none of the failpoints' code (their names are not in
// the file), while the store `make build-failpoint` makes
// ($NO8S_FAILPOINT_BIN, or built here) has both, so that the check can
// fail. `make image` cross-compiles its binaries with the same command as
// `make build` (checked in its dry run: GO_BUILD, no -tags anywhere); make
// image-check runs CheckBuild, which includes CheckNoFailpoints, on the
// binaries taken out of the image.
func TestReleaseBuildsCarryNoFailpoints(t *testing.T) {
	bin := os.Getenv("NO8S_BUILD_BIN")
	if bin == "" {
		bin = t.TempDir()
		makeBuild(t, "build", bin)
	}
	cmds, err := os.ReadDir("../../cmd")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if !c.IsDir() {
			continue
		}
		file := filepath.Join(bin, c.Name())
		bi, out, err := ReadBuildInfo(t.Context(), file)
		if err != nil {
			t.Fatalf("%s (make build): %v", c.Name(), err)
		}
		if err := bi.CheckNoFailpoints(); err != nil {
			t.Errorf("%s (make build): %v\n%s", c.Name(), err, out)
		}
		if name := hasFailpointName(t, file); name != "" {
			t.Errorf("%s (make build) holds the failpoint %s's code", c.Name(), name)
		}
	}

	fpDir := os.Getenv("NO8S_FAILPOINT_BIN")
	if fpDir == "" {
		root := t.TempDir()
		makeBuild(t, "build-failpoint", root)
		fpDir = filepath.Join(root, "failpoint")
	}
	fp := filepath.Join(fpDir, "no8s-store")
	bi, out, err := ReadBuildInfo(t.Context(), fp)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(bi.Tags(), failpoint.Tag) || bi.CheckNoFailpoints() == nil {
		t.Errorf("the store of make build-failpoint: tags %v, want %s:\n%s", bi.Tags(), failpoint.Tag, out)
	}
	if hasFailpointName(t, fp) == "" {
		t.Error("the store of make build-failpoint holds no failpoint's name: the check above could not fail")
	}

	// make image: its go build lines are make build's GO_BUILD, no tags.
	dry := func(target string) []string {
		cmd := exec.CommandContext(t.Context(), "make", "-n", target, "VERSION=v0-test", "COMMIT=c0", "BIN=/nonexistent")
		cmd.Dir = repoRoot
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v: %s", target, err, b)
		}
		var lines []string
		for l := range strings.Lines(string(b)) {
			if strings.Contains(l, "go build") {
				lines = append(lines, strings.TrimSpace(l))
			}
		}
		if len(lines) == 0 {
			t.Fatalf("make -n %s runs no go build:\n%s", target, b)
		}
		return lines
	}
	goBuild := regexp.MustCompile(`CGO_ENABLED=0 go build -trimpath -ldflags '[^']*'`)
	release := goBuild.FindString(dry("build")[0])
	if release == "" {
		t.Fatalf("make build's go build: %q", dry("build"))
	}
	for _, l := range dry("image") {
		if !strings.Contains(l, release) || strings.Contains(l, "-tags") || strings.Contains(l, failpoint.Tag) {
			t.Errorf("make image builds with %q, want make build's %q and no tags", l, release)
		}
	}
}

// hasFailpointName returns the name of a failpoint found in the file, ""
// when none is.
func hasFailpointName(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range failpoint.Names() {
		if bytes.Contains(b, []byte(n)) {
			return string(n)
		}
	}
	return ""
}
