package watch

import (
	"testing"
	"time"
)

// A live watcher rests in proportion to the live watchers, up to the flush
// interval: one of a few writes each event at once, one of a thousand
// coalesces a burst as before; a negative interval never rests.
func TestRestGrowsWithLiveWatchers(t *testing.T) {
	for _, c := range []struct {
		flush time.Duration
		live  int64
		want  time.Duration
	}{
		{0, 0, 0},
		{0, 1, 0},
		{0, 19, 0},
		{0, 20, time.Millisecond},
		{0, 100, 5 * time.Millisecond},
		{0, 400, DefaultFlushInterval},
		{0, 1000, DefaultFlushInterval},
		{50 * time.Millisecond, 1000, 50 * time.Millisecond},
		{-1, 1000, 0},
	} {
		h := &Hub{cfg: Config{FlushInterval: c.flush}.withDefaults()}
		h.stats.live.Store(c.live)
		if got := h.rest(); got != c.want {
			t.Errorf("flush interval %v, %d live watchers: rest %v, want %v", c.flush, c.live, got, c.want)
		}
	}
}

// The live count follows registrations, and a registration ended twice (by
// the hub, then by its watcher) is counted off once.
func TestLiveCountFollowsRegistrations(t *testing.T) {
	h := &Hub{cfg: Config{}.withDefaults(), subs: map[*sub]struct{}{}}
	a, _, err := h.subscribe(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.subscribe(Filter{}); err != nil {
		t.Fatal(err)
	}
	h.unsubscribe(a)
	h.unsubscribe(a)
	if got := h.stats.live.Load(); got != 1 {
		t.Fatalf("live %d after two registrations and one ended twice, want 1", got)
	}
	h.mu.Lock()
	h.endAllLocked(goneReset)
	h.mu.Unlock()
	if got := h.stats.live.Load(); got != 0 {
		t.Fatalf("live %d after every registration ended, want 0", got)
	}
}
