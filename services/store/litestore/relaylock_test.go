package litestore

import (
	"path/filepath"
	"testing"
)

func TestRelayLockIsExclusive(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "no8s.db")
	a, err := tryRelayLock(ctx, path)
	if err != nil || a == nil {
		t.Fatalf("first lock: %v, %v", a, err)
	}
	b, err := tryRelayLock(ctx, path)
	if err != nil || b != nil {
		t.Fatalf("second lock while the first is held: %v, %v; want none", b, err)
	}
	a.release()
	c, err := tryRelayLock(ctx, path)
	if err != nil || c == nil {
		t.Fatalf("lock after release: %v, %v", c, err)
	}
	c.release()
}
