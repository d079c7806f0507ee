package outbox

import (
	"testing"
	"time"
)

// TestPauseGrowsWithTheRound: a round of one event is followed by a short
// pause, a busy round by the whole gap, and a round that published nothing
// (or a relay without a gap) by none.
func TestPauseGrowsWithTheRound(t *testing.T) {
	def := DefaultConfig()
	for _, c := range []struct {
		name string
		cfg  Config
		n    int64
		want time.Duration
	}{
		{"nothing published", def, 0, 0},
		{"one event", def, 1, def.RoundGap / time.Duration(def.BusyRound)},
		{"half busy", def, int64(def.BusyRound / 2), def.RoundGap / 2},
		{"busy", def, int64(def.BusyRound), def.RoundGap},
		{"a full batch", def, int64(def.BatchSize), def.RoundGap},
		{"no gap", Config{BusyRound: 8}, 100, 0},
		{"every round the whole gap", Config{RoundGap: 5 * time.Millisecond}, 1, 5 * time.Millisecond},
	} {
		if got := c.cfg.Pause(c.n); got != c.want {
			t.Errorf("%s: Pause(%d) = %v, want %v", c.name, c.n, got, c.want)
		}
	}
	if def.RoundGap <= 0 || def.BusyRound <= 1 {
		t.Fatalf("default RoundGap %v, BusyRound %d: the pause would not grow with the round", def.RoundGap, def.BusyRound)
	}
}
