package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"
)

var figuresFlag = flag.String("figures", "", "write the run's headline figures (name → value) as JSON to this file (what -ab-pairs compares)")

// figureSet holds the headline figures of a run, by name, in the order they
// were recorded. Names carry their unit ("… p99 ms", "… /s").
type figureSet struct {
	mu     sync.Mutex
	values map[string]float64
	order  []string
}

// figure records a headline figure of the running scenario (a later value
// of the same name replaces the earlier one).
func (e *benchEnv) figure(name string, v float64) {
	name = e.scenario + ": " + name
	f := &e.figs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.values == nil {
		f.values = map[string]float64{}
	}
	if _, ok := f.values[name]; !ok {
		f.order = append(f.order, name)
	}
	f.values[name] = v
}

// figuresFile is the JSON -figures writes: the figures in recorded order.
type figuresFile struct {
	Figures []namedFigure `json:"figures"`
}

type namedFigure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// writeFigures writes the figures to the -figures file, if one is named.
func (e *benchEnv) writeFigures() error {
	if *figuresFlag == "" {
		return nil
	}
	f := &e.figs
	f.mu.Lock()
	out := figuresFile{Figures: make([]namedFigure, 0, len(f.order))}
	for _, n := range f.order {
		out.Figures = append(out.Figures, namedFigure{n, f.values[n]})
	}
	f.mu.Unlock()
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(*figuresFlag, b, 0o644); err != nil {
		return fmt.Errorf("-figures: %w", err)
	}
	return nil
}

// readFigures reads a file writeFigures wrote.
func readFigures(path string) (figuresFile, error) {
	var f figuresFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// ms is d in milliseconds, for a figure.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
