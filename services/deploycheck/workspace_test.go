package deploycheck_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// kubernetesModules are the module path prefixes of Kubernetes, etcd,
// controller-runtime and Helm: built from tools/k8s, never a dependency of
// the workspace's modules.
var kubernetesModules = []string{"k8s.io/", "sigs.k8s.io/", "go.etcd.io/", "helm.sh/"}

// goCmd runs the go command in dir and returns its standard output.
func goCmd(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderrOf(err))
	}
	return out
}

// stderrOf returns what a failed command printed on its standard error.
func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// copyWorkspace copies go.work and go.work.sum into a temporary directory,
// each module it uses named by its absolute path, and returns the copy's
// go.work.
func copyWorkspace(t *testing.T, gowork string) string {
	t.Helper()
	root := filepath.Dir(gowork)
	dir := t.TempDir()
	copied := filepath.Join(dir, "go.work")
	for _, name := range []string{"go.work", "go.work.sum"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil && !(name == "go.work.sum" && os.IsNotExist(err)) {
			t.Fatalf("copy the workspace: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatalf("copy the workspace: %v", err)
		}
	}
	args := []string{"work", "edit"}
	for _, u := range workUses(t, root) {
		if !filepath.IsAbs(u) {
			args = append(args, "-dropuse="+u, "-use="+filepath.Join(root, u))
		}
	}
	goCmd(t, root, append(args, copied)...)
	return copied
}

// workUses returns the module directories that root's go.work uses, as
// written there.
func workUses(t *testing.T, root string) []string {
	t.Helper()
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(goCmd(t, root, "work", "edit", "-json"), &work); err != nil {
		t.Fatalf("go work edit -json: %v", err)
	}
	var uses []string
	for _, u := range work.Use {
		uses = append(uses, u.DiskPath)
	}
	return uses
}

// workspace returns the path of the go.work this test runs under.
func workspace(t *testing.T) string {
	t.Helper()
	gowork := strings.TrimSpace(string(goCmd(t, ".", "env", "GOWORK")))
	if gowork == "" || gowork == "off" {
		t.Fatalf("not in a workspace (GOWORK=%q): run from the repository", gowork)
	}
	return gowork
}

// TestWorkspaceHasNoKubernetesModule lists the workspace's whole build list
// and refuses any module of Kubernetes, etcd, controller-runtime or Helm: the
// tools that need them (make k8s-tools) are built from tools/k8s, a module of
// its own.
func TestWorkspaceHasNoKubernetesModule(t *testing.T) {
	gowork := workspace(t)
	// go list -m all rewrites go.work.sum when it lacks a checksum: list
	// from a copy, so that the test leaves the repository as it was.
	copied := copyWorkspace(t, gowork)
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}}", "all")
	cmd.Dir = filepath.Dir(gowork)
	cmd.Env = append(os.Environ(), "GOWORK="+copied)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, stderrOf(err))
	}
	mods := strings.Fields(string(out))
	if len(mods) < 20 || !slices.Contains(mods, "github.com/no8s/no8s/services") {
		t.Fatalf("go list -m all listed %d modules, without the services module: %q", len(mods), mods)
	}
	for _, m := range mods {
		for _, p := range kubernetesModules {
			if strings.HasPrefix(m, p) {
				t.Errorf("the workspace's build list holds %s", m)
			}
		}
	}
}

// TestKubernetesToolsOutsideWorkspace checks that tools/k8s is a module that
// does pin Kubernetes, and that go.work uses neither it nor its etcd module.
func TestKubernetesToolsOutsideWorkspace(t *testing.T) {
	gowork := workspace(t)
	root := filepath.Dir(gowork)
	uses := workUses(t, root)
	if len(uses) == 0 {
		t.Fatalf("%s uses no module", gowork)
	}
	for _, u := range uses {
		p := filepath.ToSlash(filepath.Clean(u))
		if p == "tools/k8s" || strings.HasPrefix(p, "tools/k8s/") {
			t.Errorf("%s uses %s: the Kubernetes tools must stay outside the workspace", gowork, u)
		}
	}
	for _, mod := range []struct{ file, requires string }{
		{"tools/k8s/go.mod", "k8s.io/kubernetes "},
		{"tools/k8s/etcd/go.mod", "go.etcd.io/etcd/server/v3 "},
	} {
		b, err := os.ReadFile(filepath.Join(root, mod.file))
		if err != nil {
			t.Fatalf("the Kubernetes tools' module: %v", err)
		}
		if !strings.Contains(string(b), mod.requires) {
			t.Errorf("%s does not require %s", mod.file, mod.requires)
		}
	}
}
