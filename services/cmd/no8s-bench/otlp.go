package main

import (
	"cmp"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/platform/tracing/otlp/tracingtest"
)

var (
	otlpFlag       = flag.Bool("otlp", false, "tracing on: every no8s process samples every trace and exports its spans by OTLP/HTTP to a receiver in this process")
	otlpStagesFlag = flag.Bool("otlp-stages", false, "with -otlp: keep every span and print, for each measured window that marks itself (the reconcile scenario's rates), when each span starts after its trace's first one and how long it lasts: where a change's time goes, hop by hop (the receiver then takes more of this process's CPU)")
)

// spanWindow is a measured window whose traces -otlp-stages reports: the
// traces whose first span starts in [from, to).
type spanWindow struct {
	label    string
	from, to time.Time
}

// startOTLP starts the -otlp receiver and sets the OTEL_* environment of
// the no8s processes started after it; the returned function reports the
// spans received (with -otlp-stages, where they fall in their traces, per
// marked window) and stops the receiver. Without -otlp it does nothing.
func (e *benchEnv) startOTLP() (stop func(), err error) {
	if !*otlpFlag {
		return nil, nil
	}
	listen := tracingtest.ListenCounting
	if *otlpStagesFlag {
		listen = tracingtest.Listen
	}
	r, closeReceiver, err := listen()
	if err != nil {
		return nil, fmt.Errorf("-otlp: %w", err)
	}
	e.otelEnv = []string{
		tracing.EnvEndpoint + "=" + r.HTTPEndpoint,
		tracing.EnvProtocol + "=http/protobuf",
		"OTEL_TRACES_SAMPLER=always_on",
	}
	fmt.Printf("tracing on: every no8s process exports every span to the OTLP receiver at %s\n", r.HTTPEndpoint)
	return func() {
		fmt.Printf("OTLP receiver: %d spans received\n", r.Len())
		if *otlpStagesFlag {
			spans := r.Spans()
			traces := indexTraces(spans)
			for _, w := range e.spanWins {
				printStages(w, spans, traces)
			}
		}
		closeReceiver()
	}, nil
}

// markSpanWindow names a measured window for -otlp-stages.
func (e *benchEnv) markSpanWindow(label string, from, to time.Time) {
	if *otlpStagesFlag {
		e.spanWins = append(e.spanWins, spanWindow{label: label, from: from, to: to})
	}
}

// traceInfo is what -otlp-stages needs of a trace: when its first span
// starts, and whether it crosses processes.
type traceInfo struct {
	first    time.Time
	services map[string]bool
}

// indexTraces reads, once for every window, each trace's first span start
// and services.
func indexTraces(spans []tracingtest.Span) map[string]*traceInfo {
	traces := map[string]*traceInfo{}
	for _, s := range spans {
		t := traces[s.TraceID]
		if t == nil {
			t = &traceInfo{first: s.Start, services: map[string]bool{}}
			traces[s.TraceID] = t
		}
		if s.Start.Before(t.first) {
			t.first = s.Start
		}
		t.services[s.Service] = true
	}
	return traces
}

// printStages prints, for each span of the traces that begin in w and
// cross processes, when it starts after its trace's first span and how
// long it lasts, p50 and p99, in the order of the median start. An outbox
// publish is told apart by its event's type.
func printStages(w spanWindow, spans []tracingtest.Span, traces map[string]*traceInfo) {
	type stage struct {
		key           string
		starts, lasts []time.Duration
		p50           time.Duration
	}
	byKey := map[string]*stage{}
	in := map[string]bool{}
	for _, s := range spans {
		t := traces[s.TraceID]
		if len(t.services) < 2 || t.first.Before(w.from) || !t.first.Before(w.to) {
			continue
		}
		in[s.TraceID] = true
		key := s.Service + ": " + s.Name
		if et := s.Attrs["no8s.event_type"]; et != "" {
			key += " " + et
		}
		st := byKey[key]
		if st == nil {
			st = &stage{key: key}
			byKey[key] = st
		}
		st.starts = append(st.starts, s.Start.Sub(t.first))
		st.lasts = append(st.lasts, s.End.Sub(s.Start))
	}
	stages := make([]*stage, 0, len(byKey))
	for _, st := range byKey {
		st.p50 = percentile(st.starts, 50) // sorts starts once
		stages = append(stages, st)
	}
	slices.SortFunc(stages, func(a, b *stage) int { return cmp.Compare(a.p50, b.p50) })
	fmt.Printf("spans of the %d traces begun in the %s window (crossing processes): start after the trace's first span, and length, p50 / p99\n", len(in), w.label)
	tw := newTable()
	fmt.Fprintf(tw, "  span\tcount\tstarts at\tlasts\n")
	for _, st := range stages {
		fmt.Fprintf(tw, "  %s\t%d\t%s / %s\t%s / %s\n", st.key, len(st.starts),
			fmtDur(st.p50), fmtDur(percentile(st.starts, 99)),
			fmtDur(percentile(st.lasts, 50)), fmtDur(percentile(st.lasts, 99)))
	}
	tw.Flush()
}
