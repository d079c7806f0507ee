package pgstore_test

import (
	"testing"

	"github.com/no8s/no8s/services/store/storage/storetest"
)

// TestOneCommitPath checks that no code outside commit.go takes a revision
// or writes the outbox itself.
func TestOneCommitPath(t *testing.T) {
	storetest.CheckOneCommitPath(t, "commit.go",
		[]string{"revision_seq", "outbox (", "pg_current_xact_id", "envelope.Encode", "eventstream.Encode", "storage.RenderEvent"}, nil)
}
