package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// What tests create on the machine's shared servers (PostgreSQL databases
// and roles, MariaDB databases and users) is named
//
//	no8s_<start>_<run>_<purpose>_<random>
//
// where <start> is the Unix time (seconds) at which the test run (the test
// process) named its first object, and <run> six hex digits it drew then. Tests drop what they
// create; what a killed run left behind is removed by .ci/cleanup-leftovers,
// which reads <start> back and drops only what is older than a few hours, so
// that runs sharing a server never drop each other's databases. Names of any
// other shape are never touched by it.

// Run is one test run: the prefix of everything it creates on shared
// servers.
type Run struct {
	prefix string
}

// NewRun is a run that started at start, with a random id.
func NewRun(start time.Time) Run {
	return Run{prefix: fmt.Sprintf("no8s_%010d_%s_", start.Unix(), randomHex(3))}
}

// thisRun is the run of this test process, drawn once at its first use; it
// never changes afterwards.
var thisRun = sync.OnceValue(func() Run { return NewRun(time.Now()) })

// ThisRun is the run of this test process.
func ThisRun() Run { return thisRun() }

// Name is a fresh name of the run for purpose (lower-case letters, digits
// and underscores, kept short: PostgreSQL cuts names at 63 bytes):
// no8s_<start>_<run>_<purpose>_<8 random hex digits>. It needs no quoting
// in SQL.
func (r Run) Name(purpose string) string {
	return r.prefix + purpose + "_" + randomHex(4)
}

// Name is a fresh name of this test process's run for purpose (Run.Name).
func Name(purpose string) string { return ThisRun().Name(purpose) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
