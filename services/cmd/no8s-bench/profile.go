package main

// profile.go takes runtime profiles of the stack's processes under the
// benchmark's load (issue 13 scope 2): with -profile DIR, every no8s
// process the bench starts serves net/http/pprof on a loopback port of its
// own (NO8S_PPROF_LISTEN; nats-server its own through --profile PORT),
// and the scenarios take a CPU profile and an
// allocation profile of every process over their measured windows into DIR
// (outside the repository). Read them with go tool pprof, e.g.
//
//	go tool pprof -top -nodecount 40 DIR/reconcile-sat-store.cpu.pprof

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

var profileDirFlag = flag.String("profile", "", "directory for CPU and allocation profiles of every no8s process over the measured windows (empty: none)")

// profiling reports whether profiles are asked for.
func profiling() bool { return *profileDirFlag != "" }

// procEnv returns the environment of a no8s process: the bench's own,
// without the probe listeners (their fixed default ports may be taken by
// another stack on the machine), then extra (the scenario's own settings),
// plus a loopback pprof listener when profiles are asked for (addr is its
// address then, "" otherwise).
func procEnv(extra []string) (env []string, addr string, err error) {
	env = append(append(os.Environ(), "NO8S_HEALTH_LISTEN=off"), extra...)
	if !profiling() {
		return env, "", nil
	}
	addr, err = freeAddr()
	if err != nil {
		return nil, "", err
	}
	return append(env, "NO8S_PPROF_LISTEN="+addr), addr, nil
}

// startProfiles takes, in the background, a CPU profile and an allocation
// profile (the allocations made during the window) of every no8s process
// over d, into the profile directory as <label>-<process>.cpu.pprof and
// .allocs.pprof. The returned function waits for them and reports where
// they are. Without -profile it does nothing.
func (e *benchEnv) startProfiles(ctx context.Context, label string, d time.Duration) (wait func()) {
	if !profiling() || d < time.Second {
		return func() {}
	}
	dir := *profileDirFlag
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Printf("  (profiles: %v)\n", err)
		return func() {}
	}
	secs := int(d / time.Second)
	client := &http.Client{Timeout: d + 30*time.Second}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for _, p := range e.procs {
		if p.pprofAddr == "" {
			continue
		}
		for _, kind := range []string{"profile", "allocs"} {
			wg.Go(func() {
				ext := map[string]string{"profile": "cpu", "allocs": "allocs"}[kind]
				path := filepath.Join(dir, fmt.Sprintf("%s-%s.%s.pprof", label, p.name, ext))
				if err := fetchProfile(ctx, client, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", p.pprofAddr, kind, secs), path); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s %s: %v", p.name, kind, err))
					mu.Unlock()
				}
			})
		}
	}
	return func() {
		wg.Wait()
		fmt.Printf("  (profiles of the %s window in %s/%s-*.pprof)\n", label, dir, label)
		for _, f := range failures {
			fmt.Printf("  (profile failed: %s)\n", f)
		}
	}
}

// heapProfiles takes a heap profile (what is live after a garbage
// collection, and the allocations since the start) of every process
// serving profiles, nats-server included, into the profile directory as
// <label>-<process>.heap.pprof: where the memory is when the bench reads
// the processes' RSS. Without -profile it does nothing.
func (e *benchEnv) heapProfiles(ctx context.Context, label string) {
	if !profiling() {
		return
	}
	dir := *profileDirFlag
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Printf("  (heap profiles: %v)\n", err)
		return
	}
	client := &http.Client{Timeout: time.Minute}
	for _, p := range e.procs {
		if p.pprofAddr == "" {
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%s.heap.pprof", label, p.name))
		for i := 2; fileExists(path); i++ { // a second run of the same phase (bench-peer runs no8s twice)
			path = filepath.Join(dir, fmt.Sprintf("%s-%d-%s.heap.pprof", label, i, p.name))
		}
		if err := fetchProfile(ctx, client, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", p.pprofAddr), path); err != nil {
			fmt.Printf("  (heap profile failed: %s: %v)\n", p.name, err)
		}
	}
	fmt.Printf("  (heap profiles in %s/%s-*.heap.pprof)\n", dir, label)
}

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// fetchProfile writes the body of a pprof URL to path.
func fetchProfile(ctx context.Context, client *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// commits returns the transactions committed so far in the stack's
// database (pg_stat_database; the statistics lag by up to a second, so
// compare counts over long windows only).
func (e *benchEnv) commits(ctx context.Context) (int64, error) {
	if e.pool == nil {
		return 0, nil
	}
	// Each statement here is its own transaction, so it reads the
	// statistics afresh.
	var n int64
	err := e.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}
