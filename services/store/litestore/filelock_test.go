package litestore

import (
	"path/filepath"
	"testing"
)

func TestFileLockIsExclusive(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "no8s.db")
	a, err := takeFileLock(ctx, relayLockFile(path), 0)
	if err != nil || a == nil {
		t.Fatalf("first lock: %v, %v", a, err)
	}
	b, err := takeFileLock(ctx, relayLockFile(path), 0)
	if err != nil || b != nil {
		t.Fatalf("second lock while the first is held: %v, %v; want none", b, err)
	}
	a.release()
	c, err := takeFileLock(ctx, relayLockFile(path), 0)
	if err != nil || c == nil {
		t.Fatalf("lock after release: %v, %v", c, err)
	}
	c.release()
}
