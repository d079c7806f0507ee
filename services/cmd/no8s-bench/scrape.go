package main

// scrape.go measures the cost of being observed: with -scrape, every no8s
// process the bench starts serves its probes and /metrics on a loopback
// port of its own, and a scraper reads /metrics of each of them every
// -scrape interval for the whole run, as a Prometheus server would.

import (
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

var scrapeFlag = flag.Duration("scrape", 0, "scrape /metrics of every no8s process at this interval for the whole run (0: never)")

// scraping reports whether -scrape is on.
func scraping() bool { return *scrapeFlag > 0 }

// scrapeArgs replaces a "--health-listen off" in args with a listener of
// its own when scraping, so that the process serves /metrics; addr is its
// address then, "" otherwise.
func scrapeArgs(bin string, args []string) (out []string, addr string, err error) {
	if !scraping() {
		return args, "", nil
	}
	if filepath.Base(bin) == "no8s-gateway" {
		// The gateway serves /metrics on its API listener.
		if i := slices.Index(args, "--listen"); i >= 0 && i+1 < len(args) {
			return args, args[i+1], nil
		}
	}
	if addr, err = freeAddr(); err != nil {
		return nil, "", err
	}
	out = slices.Clone(args)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "--health-listen" {
			out[i+1] = addr
			return out, addr, nil
		}
	}
	return out, addr, nil
}

// scraper reads /metrics of every process of the stack each interval.
// Like a Prometheus server, it spreads its targets over the interval: each
// target is read at its own offset (its URL's hash, modulo the interval),
// so that the processes are not all interrupted at the same instant.
type scraper struct {
	ok, failed atomic.Int64
	bytes      atomic.Int64
	stop       context.CancelFunc
	done       sync.WaitGroup
}

// startScraper scrapes e's processes (those started so far and later) until
// stopped.
func (e *benchEnv) startScraper(ctx context.Context) *scraper {
	ctx, cancel := context.WithCancel(ctx)
	s := &scraper{stop: cancel}
	hc := &http.Client{Timeout: 5 * time.Second}
	s.done.Go(func() {
		// Targets appear as the stack starts processes: look for new ones
		// each interval and give each a loop of its own.
		seen := map[string]bool{}
		t := time.NewTicker(*scrapeFlag)
		defer t.Stop()
		for {
			for _, url := range e.metricsURLs() {
				if !seen[url] {
					seen[url] = true
					s.done.Go(func() { s.scrapeLoop(ctx, hc, url) })
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return s
}

// scrapeLoop scrapes url each interval, at url's offset in the interval.
func (s *scraper) scrapeLoop(ctx context.Context, hc *http.Client, url string) {
	every := *scrapeFlag
	h := fnv.New64a()
	h.Write([]byte(url))
	offset := time.Duration(h.Sum64() % uint64(every))
	now := time.Now()
	next := now.Truncate(every).Add(offset)
	if next.Before(now) {
		next = next.Add(every)
	}
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		s.scrapeOne(ctx, hc, url)
		next = next.Add(every)
		for !next.After(time.Now()) { // a scrape longer than the interval skips a turn
			next = next.Add(every)
		}
		timer.Reset(time.Until(next))
	}
}

func (s *scraper) scrapeOne(ctx context.Context, hc *http.Client, url string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		s.failed.Add(1)
		return
	}
	resp, err := hc.Do(req)
	if err != nil {
		s.failed.Add(1)
		return
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		s.failed.Add(1)
		return
	}
	s.ok.Add(1)
	s.bytes.Add(n)
}

// Stop ends the scraping and says what it did.
func (s *scraper) Stop() string {
	s.stop()
	s.done.Wait()
	return fmt.Sprintf("scraped /metrics every %s: %d scrapes (%.1f MiB), %d failed", *scrapeFlag, s.ok.Load(), float64(s.bytes.Load())/(1<<20), s.failed.Load())
}

// metricsURLs lists the /metrics URLs of the stack's live processes.
func (e *benchEnv) metricsURLs() []string {
	e.procsMu.Lock()
	defer e.procsMu.Unlock()
	var out []string
	for _, p := range e.procs {
		if p.metricsAddr != "" {
			out = append(out, "http://"+p.metricsAddr+"/metrics")
		}
	}
	return out
}
