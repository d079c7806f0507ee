package backoff

import (
	"testing"
	"time"
)

func TestDelayDoublesAndCaps(t *testing.T) {
	base, max := time.Minute, 1024*time.Minute
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute}
	for i, w := range want {
		if got := Delay(base, max, i+1, 0, 0); got != w {
			t.Errorf("failures %d: %v, want %v", i+1, got, w)
		}
	}
	if got := Delay(base, max, 11, 0, 0); got != max {
		t.Errorf("failures 11: %v, want the cap %v", got, max)
	}
	if got := Delay(base, max, 500, 0, 0); got != max {
		t.Errorf("failures 500: %v, want the cap", got)
	}
	if got := Delay(base, max, 0, 0, 0); got != base {
		t.Errorf("failures 0: %v, want base", got)
	}
}

func TestJitterBoundedStableAndSpread(t *testing.T) {
	base := 10 * time.Second
	lo, hi := base, base
	for i := range int64(2000) {
		d := Delay(base, time.Hour, 1, DefaultJitter, Seed(i, 1))
		if d < 9*time.Second || d > 11*time.Second {
			t.Fatalf("seed %d: %v outside ±10%%", i, d)
		}
		if d != Delay(base, time.Hour, 1, DefaultJitter, Seed(i, 1)) {
			t.Fatal("jitter is not a function of the seed")
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo > 9200*time.Millisecond || hi < 10800*time.Millisecond {
		t.Fatalf("jitter does not spread: [%v, %v]", lo, hi)
	}
}
