// Package version says which build a no8s binary is: the version and commit
// `make build` stamps into it with -ldflags -X, or what Go's build
// information holds when it was built another way.
//
// Every binary answers --version (and `no8s version`) with String.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by the Makefile:
//
//	-X github.com/no8s/no8s/services/internal/version.version=$(VERSION)
//	-X github.com/no8s/no8s/services/internal/version.commit=$(COMMIT)
//
// They are written only by the linker, never at run time.
var (
	version string
	commit  string
)

// Version returns the stamped version (git describe of the build's commit),
// else the module version from the build information, else "(devel)".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// Commit returns the stamped commit hash, else the vcs.revision of the build
// information, else "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// String is the line every binary prints for --version:
// "<binary> <version> commit <commit> (<go version>, <os>/<arch>)".
func String(binary string) string {
	return fmt.Sprintf("%s %s commit %s (%s, %s/%s)", binary, Version(), Commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
