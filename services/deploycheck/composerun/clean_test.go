//go:build deploycheck

package composerun

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

type state struct {
	links, netns []string
}

// snapshot is the root namespace's links and `ip netns list`.
func snapshot(t *testing.T) state {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	var s state
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			s.links = append(s.links, strings.TrimSuffix(f[1], ":"))
		}
	}
	if s.netns, err = ListNamespaces(t.Context()); err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.links)
	slices.Sort(s.netns)
	return s
}

// assertClean fails unless the links and namespaces are as before, ignoring
// those of other runs that started or ended meanwhile.
func assertClean(t *testing.T, before state) {
	t.Helper()
	after := snapshot(t)
	if !slices.Equal(before.links, after.links) {
		t.Errorf("root namespace links changed:\nbefore %v\nafter  %v", before.links, after.links)
	}
	for _, n := range after.netns {
		if _, _, ours := RunStart(n); ours && !slices.Contains(before.netns, n) {
			t.Errorf("namespace %s left behind", n)
		}
	}
	out, _ := exec.Command("pgrep", "-f", "no8s-compose-").Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("processes of a run left: %s", out)
	}
}
