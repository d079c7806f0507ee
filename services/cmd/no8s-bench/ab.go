package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

var (
	abAFlag     = flag.String("ab-a", "", "A/B: the A arm's extra flags, space-separated, e.g. \"-bin-dir /tmp/main-bin\" (with -ab-pairs)")
	abBFlag     = flag.String("ab-b", "", "A/B: the B arm's extra flags, space-separated, e.g. \"-identities -nats-auth\" (with -ab-pairs)")
	abPairsFlag = flag.Int("ab-pairs", 0, "A/B: run this many pairs of whole runs (each a fresh bench process and stack) in the order A B, B A, A B, …, and print for each figure the medians of A and of B and the median of the per-pair ratios B/A (0: no A/B)")
)

// abOwnFlags are the flags of the A/B driver itself, kept from its runs.
var abOwnFlags = []string{"ab-a", "ab-b", "ab-pairs", "figures"}

// runAB runs the bench as A and B alternately, pair by pair, with args (the
// driver's own arguments, less the A/B flags) plus each arm's flags, and
// compares the figures the runs record. The machine's drift moves both
// runs of a pair alike, so the per-pair ratio is steadier than the ratio
// of two medians measured at different times.
func runAB(ctx context.Context, args []string) error {
	n := *abPairsFlag
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("-ab-pairs: %w", err)
	}
	dir, err := os.MkdirTemp("", "no8s-bench-ab-*")
	if err != nil {
		return err
	}
	base := stripFlags(args, abOwnFlags)
	arms := [2]struct {
		name  string
		flags []string
	}{{"A", strings.Fields(*abAFlag)}, {"B", strings.Fields(*abBFlag)}}
	fmt.Printf("A/B: %d pairs, each run a fresh stack; logs and figures in %s\n  common: %s\n  A: %s\n  B: %s\n",
		n, dir, strings.Join(base, " "), *abAFlag, *abBFlag)
	results := make([][2]figuresFile, n)
	t0 := time.Now()
	for i := range n {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, a := range order {
			arm := arms[a]
			stem := filepath.Join(dir, fmt.Sprintf("%02d-%s", i+1, arm.name))
			f, took, err := abRun(ctx, exe, append(append(slices.Clone(base), arm.flags...), "-figures", stem+".json"), stem)
			if err != nil {
				return fmt.Errorf("pair %d, %s: %w", i+1, arm.name, err)
			}
			results[i][a] = f
			fmt.Printf("pair %d/%d %s: %d figures in %s (%s so far)\n", i+1, n, arm.name, len(f.Figures), took.Round(time.Second), time.Since(t0).Round(time.Second))
		}
	}
	printAB(results)
	return nil
}

// abRun runs one bench process with args, its output in stem.log, and
// reads the figures it wrote.
func abRun(ctx context.Context, exe string, args []string, stem string) (figuresFile, time.Duration, error) {
	logf, err := os.Create(stem + ".log")
	if err != nil {
		return figuresFile{}, 0, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Interrupted, a run stops its stack as the bench does on SIGTERM.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return figuresFile{}, 0, ctx.Err()
		}
		return figuresFile{}, 0, fmt.Errorf("%w (log: %s.log)", err, stem)
	}
	f, err := readFigures(stem + ".json")
	if errors.Is(err, os.ErrNotExist) {
		return f, 0, fmt.Errorf("the run recorded no figures: does -run name a scenario that records them? (log: %s.log)", stem)
	}
	return f, time.Since(start), err
}

// abRow is one figure compared: the median of each arm, and the median,
// lowest and highest of the per-pair ratios B/A.
type abRow struct {
	name                   string
	a, b                   float64
	ratio, lowest, highest float64
}

// compareAB compares every figure the first run recorded over the pairs
// that recorded it in both arms.
func compareAB(results [][2]figuresFile) []abRow {
	if len(results) == 0 {
		return nil
	}
	value := func(f figuresFile, name string) (float64, bool) {
		for _, x := range f.Figures {
			if x.Name == name {
				return x.Value, true
			}
		}
		return 0, false
	}
	var rows []abRow
	for _, fig := range results[0][0].Figures {
		var as, bs, ratios []float64
		for _, p := range results {
			a, okA := value(p[0], fig.Name)
			b, okB := value(p[1], fig.Name)
			if okA {
				as = append(as, a)
			}
			if okB {
				bs = append(bs, b)
			}
			if okA && okB && a != 0 {
				ratios = append(ratios, b/a)
			}
		}
		if len(ratios) == 0 {
			continue
		}
		rows = append(rows, abRow{name: fig.Name, a: median(as), b: median(bs),
			ratio: median(ratios), lowest: slices.Min(ratios), highest: slices.Max(ratios)})
	}
	return rows
}

// printAB prints compareAB's rows.
func printAB(results [][2]figuresFile) {
	fmt.Printf("\nA/B, %d pairs: medians of each arm, and B/A as the median of the per-pair ratios [lowest, highest]\n", len(results))
	tw := newTable()
	fmt.Fprintf(tw, "  figure\tA\tB\tB/A\trange\t\n")
	for _, r := range compareAB(results) {
		fmt.Fprintf(tw, "  %s\t%.1f\t%.1f\t%s\t[%s, %s]\t\n", r.name, r.a, r.b, fmtRatio(r.ratio), fmtRatio(r.lowest), fmtRatio(r.highest))
	}
	tw.Flush()
}

// fmtRatio prints r as a signed change: 1.05 is +5.0%.
func fmtRatio(r float64) string { return fmt.Sprintf("%+.1f%%", 100*(r-1)) }

// stripFlags returns args without the flags named (as -name value,
// -name=value, and their -- forms).
func stripFlags(args, names []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
			continue
		}
		name, _, inline := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !slices.Contains(names, name) {
			out = append(out, a)
			continue
		}
		if !inline {
			i++ // its value is the next argument
		}
	}
	return out
}
