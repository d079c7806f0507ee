//go:build failpoint

package failpoint

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Compiled reports whether this binary was built with failpoints (the
// build tag failpoint). It is true here.
const Compiled = true

// Set is the failpoints enabled in a process.
type Set struct {
	on map[Name]bool
}

// FromEnv returns the failpoints NO8S_FAILPOINTS names (Parse).
func FromEnv() (Set, error) { return Parse(os.Getenv(Env)) }

// Parse returns the failpoints named in list, comma-separated (spaces
// around names ignored); an unknown name is an error, so that a typo does
// not leave a test waiting for a stop that never comes.
func Parse(list string) (Set, error) {
	s := Set{on: map[Name]bool{}}
	for n := range strings.SplitSeq(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(Names(), Name(n)) {
			return Set{}, fmt.Errorf("%s: unknown failpoint %q (known: %v)", Env, n, Names())
		}
		s.on[Name(n)] = true
	}
	return s, nil
}

// Enabled reports whether failpoint n is enabled.
func (s Set) Enabled(n Name) bool { return s.on[n] }

// List returns the enabled failpoints, sorted.
func (s Set) List() []Name {
	var out []Name
	for n := range s.on {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
