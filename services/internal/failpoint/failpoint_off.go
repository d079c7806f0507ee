//go:build !failpoint

package failpoint

// Compiled reports whether this binary was built with failpoints (the
// build tag failpoint). It is false here.
const Compiled = false

// Set is the failpoints enabled in a process: none in a build without the
// tag.
type Set struct{}

// FromEnv returns the failpoints enabled: none in a build without the tag,
// whatever NO8S_FAILPOINTS says.
func FromEnv() (Set, error) { return Set{}, nil }

// Enabled is false in a build without the tag: the compiler removes the
// code it guards.
func (Set) Enabled(Name) bool { return false }

// List returns the enabled failpoints: none in a build without the tag.
func (Set) List() []Name { return nil }
