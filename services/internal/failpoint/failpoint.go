// Package failpoint stops a process at a named point of its code, for the
// tests that need a crash at an exact place (the outbox relay between
// reading committed rows and publishing them, say).
//
// Failpoints exist only in binaries built with the build tag failpoint
// (`make build-failpoint`, into bin/failpoint/), and are enabled there by
// the environment variable NO8S_FAILPOINTS (comma-separated names). Every
// other build (`make build`, `make image`, every release) compiles
// failpoint_off.go: Set.Enabled is the constant false, so the compiler
// removes the code behind it, and NO8S_FAILPOINTS changes nothing.
//
// A failpoint is a Name below (their one home) and a test of
// Set.Enabled where the process should stop; the Set is read from the
// environment in main (FromEnv) and handed down in configuration.
package failpoint

// Env is the environment variable that enables failpoints, by name and
// comma-separated, in a binary built with the tag.
const Env = "NO8S_FAILPOINTS"

// Tag is the build tag that compiles failpoints in.
const Tag = "failpoint"

// Name names a failpoint.
type Name string

// The failpoints.
const (
	// RelayBeforePublish stops the outbox relay after it read a batch of
	// committed outbox rows and before it publishes any of them: it logs
	// that it stopped and blocks until its context ends. A test then
	// kills the process there, as a crash between reading and publishing.
	RelayBeforePublish Name = "relay-before-publish"
)

// Names lists every failpoint.
func Names() []Name { return []Name{RelayBeforePublish} }
