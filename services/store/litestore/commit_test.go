package litestore

import (
	"testing"

	"github.com/no8s/no8s/services/store/storage/storetest"
)

// TestOneCommitPath checks that no code outside commit.go takes a revision
// or writes an outbox row. eventlog.go, the outbox's reader, may name the
// counter (a stream rebuild moves it) but writes no event.
func TestOneCommitPath(t *testing.T) {
	storetest.CheckOneCommitPath(t, "commit.go",
		[]string{"INSERT INTO outbox", "RenderEvent", "envelope.Encode", "eventstream.Encode", "takeRevision(", "revision_counter"},
		map[string][]string{"eventlog.go": {"revision_counter"}})
}
