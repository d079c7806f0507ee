package main

import (
	"math"
	"slices"
	"testing"
)

func TestStripFlags(t *testing.T) {
	args := []string{"-run", "^reconcile$", "-ab-pairs", "5", "--ab-b=-identities -nats-auth", "-ab-a", "", "-reconcile-rates", "100", "-figures=x.json", "-keep-logs"}
	got := stripFlags(args, abOwnFlags)
	want := []string{"-run", "^reconcile$", "-reconcile-rates", "100", "-keep-logs"}
	if !slices.Equal(got, want) {
		t.Fatalf("stripFlags = %q, want %q", got, want)
	}
}

func TestCompareABPairsRatios(t *testing.T) {
	fig := func(v float64) figuresFile {
		return figuresFile{Figures: []namedFigure{{"reconcile: p99, ms", v}}}
	}
	// The machine slows down pair by pair: the arms' medians are far
	// apart in time, the per-pair ratio is steady at +10%.
	results := [][2]figuresFile{{fig(100), fig(110)}, {fig(200), fig(220)}, {fig(400), fig(440)}, {fig(50), fig(60)}}
	rows := compareAB(results)
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	r := rows[0]
	if r.a != 150 || r.b != 165 {
		t.Errorf("medians A %v B %v, want 150 and 165", r.a, r.b)
	}
	if math.Abs(r.ratio-1.1) > 1e-9 || math.Abs(r.lowest-1.1) > 1e-9 || math.Abs(r.highest-1.2) > 1e-9 {
		t.Errorf("ratio %v [%v, %v], want 1.1 [1.1, 1.2]", r.ratio, r.lowest, r.highest)
	}
	if got := fmtRatio(r.ratio); got != "+10.0%" {
		t.Errorf("fmtRatio = %q", got)
	}
}
