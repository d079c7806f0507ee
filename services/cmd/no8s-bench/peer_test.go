package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReadK8sWatch feeds a Kubernetes watch stream as kube-apiserver
// writes it (one JSON event after the other) to a readyWatch: only an
// object whose create was sent, with its Ready condition True at the
// watch's generation or later, counts, at its first such event; an ERROR
// event ends the stream with its message.
func TestReadK8sWatch(t *testing.T) {
	version := 100
	ev := func(typ, name, ready string, gen int64) string {
		version++
		obj := map[string]any{"metadata": map[string]any{"name": name, "generation": gen, "resourceVersion": strconv.Itoa(version)}}
		if ready != "" {
			obj["status"] = map[string]any{"conditions": []any{
				map[string]any{"type": "Other", "status": "True", "observedGeneration": gen},
				map[string]any{"type": "Ready", "status": ready, "observedGeneration": gen},
			}}
		}
		b, err := json.Marshal(map[string]any{"type": typ, "object": obj})
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	stream := ev("ADDED", "a", "", 1) + // no status yet
		ev("MODIFIED", "a", "False", 1) +
		ev("BOOKMARK", "", "", 0) +
		ev("MODIFIED", "b", "True", 1) + // at generation 1: not enough
		ev("MODIFIED", "b", "True", 2) +
		ev("MODIFIED", "b", "True", 2) + // a second event: the first one counts
		ev("MODIFIED", "c", "True", 2) + // not sent: ignored
		ev("MODIFIED", "a", "True", 3)
	w := &readyWatch{minGen: 2, sent: map[string]time.Time{}, answered: map[string]time.Time{}, ready: map[string]time.Time{}}
	w.markSent("a", time.Now())
	w.markSent("b", time.Now())
	rv, err := readK8sWatch(context.Background(), strings.NewReader(stream), "1", w)
	if err != nil {
		t.Fatal(err)
	}
	if rv != "108" {
		t.Errorf("last resourceVersion %q, want 108 (the last event's)", rv)
	}
	if _, missing := w.readyTimes([]string{"a", "b"}); missing != 0 {
		t.Fatalf("%d of a, b not seen ready: %v", missing, w.ready)
	}
	if _, ok := w.ready["c"]; ok {
		t.Error("c, whose create was not sent, was counted")
	}
	if !w.ready["b"].Before(w.ready["a"]) {
		t.Error("b's first ready event at generation 2 came before a's; the times say otherwise")
	}

	gone := `{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old resource version: 1 (42)"}}`
	if _, err := readK8sWatch(context.Background(), strings.NewReader(gone), "1", w); !errors.Is(err, errWatchGone) {
		t.Fatalf("410 ERROR event: %v, want errWatchGone (the watcher lists again)", err)
	}
	other := `{"type":"ERROR","object":{"kind":"Status","code":500,"message":"internal error"}}`
	if _, err := readK8sWatch(context.Background(), strings.NewReader(other), "1", w); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("ERROR event: %v, want its message", err)
	}
	if _, err := readK8sWatch(context.Background(), strings.NewReader(`{"type":`), "1", w); err == nil {
		t.Fatal("a cut event was taken")
	}
}

// TestPeerObjectMatchesNo8sBody checks that the peer's objects carry the
// no8s create body's labels, annotations and spec, so both sides store the
// same data.
func TestPeerObjectMatchesNo8sBody(t *testing.T) {
	var ours, peer map[string]any
	if err := json.Unmarshal(createBody("ReconcileBench", "v1", "x-1"), &ours); err != nil {
		t.Fatal(err)
	}
	raw := []byte(strings.ReplaceAll(strings.ReplaceAll(peerObjectTemplate, "%[1]s", peerReadyKind), "%[2]s", "x-1"))
	if err := json.Unmarshal(raw, &peer); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	meta := peer["metadata"].(map[string]any)
	for _, k := range []string{"labels", "annotations"} {
		a, _ := json.Marshal(ours[k])
		b, _ := json.Marshal(meta[k])
		if string(a) != string(b) {
			t.Errorf("%s: no8s %s, peer %s", k, a, b)
		}
	}
	a, _ := json.Marshal(ours["spec"])
	b, _ := json.Marshal(peer["spec"])
	if string(a) != string(b) {
		t.Errorf("spec: no8s %s, peer %s", a, b)
	}
	if meta["name"] != "x-1" || peer["kind"] != peerReadyKind || peer["apiVersion"] != peerGroup+"/"+peerVersion {
		t.Errorf("peer object %s", raw)
	}
}

// TestPeerTargets: each target is judged on the mean of no8s's runs over
// the peer's figure, the dispatches on the worse no8s run.
func TestPeerTargets(t *testing.T) {
	lat := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	sz := peerSizes{rates: []int{100, 200}, list: 10000}
	k8s := peerResult{label: "Kubernetes", rates: []rateResult{{rate: 100, lat: lat(10, 40)}, {rate: 200, lat: lat(900, 5000)}},
		satRate: 400, list: 600 * time.Millisecond, creates: map[int]loadResult{}, mem: []procMem{{rss: 800 << 20}}}
	run := func(p50 int, sat float64, items uint64) peerResult {
		return peerResult{label: "no8s", rates: []rateResult{{rate: 100, lat: lat(p50, 15)}, {rate: 200, lat: lat(50, 90)}},
			satRate: sat, storeCPU: time.Millisecond, list: 150 * time.Millisecond, creates: map[int]loadResult{},
			mem: []procMem{{rss: 100 << 20}}, dispatched: dispatchCount{items: items, attempts: 1000}, counted: true}
	}
	ours := []peerResult{run(8, 900, 1000), run(12, 700, 1001)}
	mean := func(f func(peerResult) float64) float64 { return (f(ours[0]) + f(ours[1])) / 2 }
	got := map[string]bool{}
	for _, tr := range peerTargets(k8s, ours, sz, mean) {
		got[tr.name] = tr.ok
	}
	want := map[string]bool{
		"create→Ready p50 at 100/s":                  true,  // mean 10 ms against 10
		"create→Ready p99 at 100/s":                  true,  // 15 against 40: 0.375
		"highest rate kept up":                       true,  // 200 against 100
		"reconciles/s at saturation":                 true,  // 800 against 400
		"dispatches per reconcile at saturation":     false, // the second run: 1,001 for 1,000
		"PostgreSQL CPU per reconcile at saturation": true,  // 1 ms
		"creates/s at c=32":                          false, // nothing measured
		"LIST 10000 (time)":                          true,  // 150 against 600 ms: 0.25
		"RSS of every process":                       true,  // 100 against 800 MiB
	}
	for name, ok := range want {
		if g, found := got[name]; !found || g != ok {
			t.Errorf("%s: got %v (found %v), want %v", name, g, found, ok)
		}
	}
	if len(got) != len(want) {
		t.Errorf("targets %v, want %d of them", got, len(want))
	}
}
