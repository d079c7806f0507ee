package setsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
)

type store struct {
	mu   sync.Mutex
	objs map[string]string
	fail map[string]bool
}

func (s *store) ops() Ops[string, string, string] {
	return Ops[string, string, string]{
		Equal: func(d, c string) bool { return d == c },
		Create: func(_ context.Context, k, d string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.fail[k] {
				return fmt.Errorf("create %s failed", k)
			}
			s.objs[k] = d
			return nil
		},
		Update: func(_ context.Context, k, d, _ string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.objs[k] = d
			return nil
		},
		Delete: func(_ context.Context, k, _ string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.fail[k] {
				return fmt.Errorf("delete %s failed", k)
			}
			delete(s.objs, k)
			return nil
		},
	}
}

func TestSync(t *testing.T) {
	s := &store{objs: map[string]string{"keep": "1", "change": "old", "extra": "x"}, fail: map[string]bool{"broken": true}}
	desired := map[string]string{"keep": "1", "change": "new", "add": "a", "broken": "b"}
	res := Sync(t.Context(), desired, maps.Clone(s.objs), true, 4, s.ops(), strings.Compare)
	if res.Created != 1 || res.Updated != 1 || res.Deleted != 1 || res.Unchanged != 1 || len(res.Failed) != 1 || res.Failed["broken"] == nil {
		t.Fatalf("result %+v", res)
	}
	if want := map[string]string{"keep": "1", "change": "new", "add": "a"}; !maps.Equal(s.objs, want) {
		t.Fatalf("objects %v", s.objs)
	}
	// A second sync with the same desired set changes nothing.
	delete(desired, "broken")
	res = Sync(t.Context(), desired, maps.Clone(s.objs), true, 4, s.ops(), strings.Compare)
	if res.Created+res.Updated+res.Deleted != 0 || res.Unchanged != 3 {
		t.Fatalf("no-change sync %+v", res)
	}
}

// An incomplete desired set (a failed or partial read) deletes nothing.
func TestIncompleteNeverDeletes(t *testing.T) {
	s := &store{objs: map[string]string{"a": "1", "b": "1", "c": "1"}}
	res := Sync(t.Context(), map[string]string{"a": "2", "d": "1"}, maps.Clone(s.objs), false, 2, s.ops(), strings.Compare)
	if res.Deleted != 0 || res.DeletesSkipped != 2 || res.Created != 1 || res.Updated != 1 || len(s.objs) != 4 {
		t.Fatalf("result %+v objects %v", res, s.objs)
	}
	res = Sync(t.Context(), map[string]string{}, maps.Clone(s.objs), false, 2, s.ops(), strings.Compare)
	if res.Deleted != 0 || len(s.objs) != 4 {
		t.Fatalf("empty incomplete set deleted: %+v", res)
	}
}

// ErrStop ends the sync: no write starts after it.
func TestStop(t *testing.T) {
	var mu sync.Mutex
	var started []string
	ops := Ops[string, string, string]{
		Equal: func(d, c string) bool { return d == c },
		Create: func(_ context.Context, k, _ string) error {
			mu.Lock()
			defer mu.Unlock()
			started = append(started, k)
			if k == "b" {
				return fmt.Errorf("deposed: %w", ErrStop)
			}
			return nil
		},
		Delete: func(context.Context, string, string) error { t.Error("a delete ran after the stop"); return nil },
	}
	res := Sync(t.Context(), map[string]string{"a": "", "b": "", "c": "", "d": ""}, map[string]string{"z": ""}, true, 1, ops, strings.Compare)
	if !errors.Is(res.Stopped, ErrStop) || len(started) != 2 {
		t.Fatalf("result %+v started %v", res, started)
	}
}
