package main

// env.go is the infrastructure every scenario shares: a control plane of real
// processes (nats-server, no8s-store, no8s-admission, no8s-gateway and a noop
// no8s-reconciler serving the scenarios' types, plus whatever scheduler and
// reconciler replicas a scenario starts on top) on a fresh
// database, an HTTP client tuned for load, a pgx pool on the same database,
// process RSS, a closed-loop load generator with latency percentiles, and the
// PASS/MISS report lines.
//
// A scenario typically does:
//
//	if err := env.Fresh(ctx); err != nil { return err }   // its own stack and database
//	status, body, err := env.postJSON(ctx, "/api/v1/resource-types", typeBody)
//	res, err := runLoad(ctx, loadSpec{Concurrency: 32, Warmup: time.Second, Duration: 5 * time.Second}, op)
//	mem, err := env.serviceMemory()
//	printTargets(targetResult{...})
//
// A scenario returns its error; main adds the log directory (env.failed).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/kubeapi"
	"github.com/no8s/no8s/services/internal/reconcilers"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/reconcilerworker/noop"
)

var (
	binDirFlag   = flag.String("bin-dir", "", "directory with no8s-store, no8s-admission, no8s-gateway, no8s-reconciler, no8s-scheduler ($NO8S_BIN_DIR; default <repo>/bin, built when missing or stale)")
	buildFlag    = flag.Bool("build", false, "always build the service binaries into a temporary directory")
	keepLogsFlag = flag.Bool("keep-logs", false, "keep the service logs directory even when every scenario passes")
	// The peer scenario sets it (make bench-peer): its API server serves TLS.
	gatewayTLSFlag = flag.Bool("gateway-tls", false, "the stack's gateway serves its API over TLS (a self-signed certificate the bench alone trusts), HTTP/1.1 as before")
)

// serviceNames are the no8s processes of a stack, in start order.
var serviceNames = []string{"store", "admission", "gateway", "reconciler"}

// binaryNames are the no8s binaries the scenarios run: the stack's, and the
// scheduler that scenarios measuring reconciles start themselves.
var binaryNames = append(append([]string{}, serviceNames...), "scheduler", "registry-sync")

// benchTypes are the resource types the scenarios create resources of: the
// stack's noop reconciler serves them (the live-reconciler rule). No
// scheduler runs, so nothing is reconciled unless a scenario starts one.
var benchTypes = []string{"DatabaseCluster/v1", "DatabaseCluster/v1beta1", "DatabaseCluster/v2", "WatchBenchA/v1", "WatchBenchB/v1"}

// benchEnv is a control plane of real processes on a fresh PostgreSQL
// database, for scenarios to measure. Each no8s service runs as its own
// process on a free loopback port; this process is the load generator.
type benchEnv struct {
	// gatewayURL is the gateway's base URL, e.g. http://127.0.0.1:41234.
	gatewayURL string
	// databaseURL is the stack's database (fresh per stack): a PostgreSQL
	// database, or with embedded a SQLite file in the work directory.
	databaseURL string
	// embedded runs the store on its embedded backend (sqlite:) instead of
	// PostgreSQL; pool is nil then. Set it with useBackend before Restart.
	embedded bool
	// natsURL is the stack's nats-server.
	natsURL string
	// storeAddr and admissionAddr are the gRPC addresses; workerAddr is the
	// store's worker listener, where the reconciler connects.
	storeAddr, admissionAddr, workerAddr string
	// pool is a pgx pool on databaseURL, sized for 32 concurrent workers
	// (nil on the embedded backend).
	pool *pgxpool.Pool
	// api is the REST API's client, on client.
	api *client.Client
	// client is an HTTP client tuned for load (keep-alive, many idle
	// connections per host).
	client *http.Client

	// roots trusts the gateway's certificate alone and gatewayTLS are
	// its TLS flags, with -gateway-tls (nil otherwise).
	roots      *x509.CertPool
	gatewayTLS []string

	binDir   string          // the no8s binaries
	figs     figureSet       // the run's headline figures (-figures)
	scenario string          // the scenario running, which names its figures
	otelEnv  []string        // -otlp: the OTEL_* environment of the no8s processes
	stopOTLP func()          // -otlp: reports the spans received and stops the receiver
	spanWins []spanWindow    // -otlp-stages: the measured windows it reports on
	ids      benchIdentities // -identities: the stack's credentials
	natsBin  string          // the nats-server binary
	workDir  string          // temporary: logs/, nats data, built binaries
	buildDir string          // set when binaries were built here
	stackN   int             // stacks started so far, to name log files
	procs    []*benchProc
	// procsMu guards procs against the scraper (-scrape), which reads it
	// from its own goroutine.
	procsMu sync.Mutex
	dropDB  func()
	// bootstrapToken is every gateway's bootstrap token (startGateway).
	bootstrapToken string
	// serviceURL is the gateway the stack's services write to (serviceAPI;
	// "" until started).
	serviceURL string
	used       bool // Fresh was called once on this stack
	keepLogs   bool
}

// benchProc is one child process of the stack.
type benchProc struct {
	name string
	// pprofAddr is its profiles' loopback address (-profile), or "".
	pprofAddr string
	// metricsAddr is its probes' and /metrics' loopback address (-scrape),
	// or "".
	metricsAddr string
	cmd         *exec.Cmd
	logPath     string
	logFile     *os.File
	done        chan struct{}
	err         error
}

// procInfo names a running no8s process.
type procInfo struct {
	name string
	pid  int
}

// newBenchEnv locates (or builds) the binaries and starts a stack.
func newBenchEnv(ctx context.Context) (*benchEnv, error) {
	work, err := os.MkdirTemp("", "no8s-bench-")
	if err != nil {
		return nil, err
	}
	_, _, bootstrap, err := authn.NewToken()
	if err != nil {
		return nil, err
	}
	e := &benchEnv{workDir: work, keepLogs: *keepLogsFlag, bootstrapToken: bootstrap}
	if *gatewayTLSFlag {
		cert, certFile, keyFile, err := kubeapi.WriteServingCert(work, "no8s-gateway (no8s-bench)")
		if err != nil {
			return nil, err
		}
		e.roots = x509.NewCertPool()
		e.roots.AddCert(cert)
		e.gatewayTLS = []string{"--tls-cert-file", certFile, "--tls-key-file", keyFile}
	}
	e.client = &http.Client{
		Timeout: 60 * time.Second,
		// Every request without an Authorization header of its own sends
		// the bootstrap token: the bench is the stack's administrator.
		Transport: client.BearerTransport(http1Transport(e.roots), bootstrap, ""),
	}
	if err := e.locateBinaries(ctx); err != nil {
		e.keepLogs = true
		e.Close()
		return nil, err
	}
	if e.stopOTLP, err = e.startOTLP(); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.start(ctx); err != nil {
		err = e.failed(err)
		e.Close()
		return nil, err
	}
	return e, nil
}

// Fresh gives the calling scenario a stack of its own: the first call uses
// the stack started by newBenchEnv, every later call restarts the whole stack
// on a fresh database. Call it at the start of every scenario.
func (e *benchEnv) Fresh(ctx context.Context) error {
	if !e.used {
		e.used = true
		return nil
	}
	return e.Restart(ctx)
}

// backendName names the store's backend of the running stack.
func (e *benchEnv) backendName() string {
	if e.embedded {
		return "embedded (SQLite)"
	}
	return "PostgreSQL"
}

// backendLabel names the store's backend in file names: pg or sqlite.
func (e *benchEnv) backendLabel() string {
	if e.embedded {
		return "sqlite"
	}
	return "pg"
}

// useBackend selects the store's backend of the stacks started from now on:
// the embedded one, or PostgreSQL.
func (e *benchEnv) useBackend(embedded bool) { e.embedded = embedded }

// Restart stops every process, drops the database and starts a new stack on
// a fresh database and a fresh nats-server data directory.
func (e *benchEnv) Restart(ctx context.Context) error {
	e.stop()
	e.used = true
	return e.start(ctx)
}

// Close stops the stack, drops its database and removes the temporary
// directory unless a failure asked to keep the logs.
func (e *benchEnv) Close() {
	e.stop()
	if e.stopOTLP != nil {
		e.stopOTLP() // after the processes, which export their last spans on the way out
	}
	if e.keepLogs {
		fmt.Fprintf(os.Stderr, "no8s-bench: service logs kept in %s\n", filepath.Join(e.workDir, "logs"))
		return
	}
	_ = os.RemoveAll(e.workDir)
}

// failed keeps the logs, checks which processes died, and returns err with
// the log directory and the dead processes named. main calls it on a
// scenario's error.
func (e *benchEnv) failed(err error) error {
	if err == nil {
		return nil
	}
	e.keepLogs = true
	msg := err.Error()
	if derr := e.checkAlive(); derr != nil {
		msg += "; " + derr.Error()
	}
	return fmt.Errorf("%s (service logs in %s)", msg, filepath.Join(e.workDir, "logs"))
}

// checkAlive returns an error naming every stack process that has exited.
func (e *benchEnv) checkAlive() error {
	var dead []string
	for _, p := range e.procs {
		select {
		case <-p.done:
			dead = append(dead, fmt.Sprintf("%s exited (%v), log %s", p.name, p.err, p.logPath))
		default:
		}
	}
	if len(dead) == 0 {
		return nil
	}
	return errors.New(strings.Join(dead, "; "))
}

// services returns the no8s processes of the stack (not PostgreSQL, not
// nats-server), in start order, those a scenario started included.
func (e *benchEnv) services() []procInfo {
	var out []procInfo
	for _, p := range e.procs {
		if p.name != "nats-server" {
			out = append(out, procInfo{name: p.name, pid: p.cmd.Process.Pid})
		}
	}
	return out
}

// procMem is the memory of one no8s process, in bytes.
type procMem struct {
	procInfo
	rss  int64 // VmRSS, resident now
	peak int64 // VmHWM, the most resident so far
}

// serviceMemory returns the resident set size (and its peak) of each no8s
// process, in the order of services.
func (e *benchEnv) serviceMemory() ([]procMem, error) {
	return e.procMemory(false)
}

// procMemory is serviceMemory, with nats-server's when withNATS is set.
func (e *benchEnv) procMemory(withNATS bool) ([]procMem, error) {
	procs := e.services()
	if withNATS {
		for _, p := range e.procs {
			if p.name == "nats-server" {
				procs = append(procs, procInfo{name: p.name, pid: p.cmd.Process.Pid})
			}
		}
	}
	var out []procMem
	for _, p := range procs {
		m := procMem{procInfo: p}
		var err error
		if m.rss, err = readProcKB(p.pid, "VmRSS"); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		if m.peak, err = readProcKB(p.pid, "VmHWM"); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// readProcKB returns a kB field of /proc/PID/status in bytes: VmRSS is the
// resident set size, VmHWM its peak.
func readProcKB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, err
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// ---- CPU accounting ------------------------------------------------------

// clockTicks is USER_HZ, the unit of /proc/PID/stat times (100 on Linux).
const clockTicks = 100

// cpuSample is the CPU time (user + system) used so far by each process of
// the stack, PostgreSQL (every process named postgres) and this load
// generator, and by the whole machine, to tell where the cores went during
// a phase, and whether something else on the machine took them.
type cpuSample struct {
	at      time.Time
	used    map[string]time.Duration
	groups  []string      // the names of used, in print order
	machine time.Duration // every non-idle CPU time of /proc/stat
}

// sampleCPU reads the CPU times of the stack's processes (those a scenario
// started included), of every postgres process, and of this process.
// Compare two samples taken while the same processes ran.
func (e *benchEnv) sampleCPU() cpuSample {
	s := cpuSample{at: time.Now(), used: map[string]time.Duration{}}
	for _, p := range e.services() {
		if _, ok := s.used[p.name]; !ok {
			s.groups = append(s.groups, p.name)
		}
		s.used[p.name] += procCPU(strconv.Itoa(p.pid))
	}
	s.groups = append(s.groups, "postgres", "nats-server", "bench")
	for _, p := range e.procs {
		if p.name == "nats-server" {
			s.used[p.name] += procCPU(strconv.Itoa(p.cmd.Process.Pid))
		}
	}
	s.used["bench"] = procCPU("self")
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, d := range ents {
			if _, err := strconv.Atoi(d.Name()); err != nil {
				continue
			}
			if comm, err := os.ReadFile("/proc/" + d.Name() + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "postgres" {
				s.used["postgres"] += procStatCPU(d.Name(), true)
			}
		}
	}
	s.machine = machineCPU()
	return s
}

// machineCPU returns the busy (non-idle, non-iowait) CPU time of the
// machine since boot, from /proc/stat.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	// user nice system idle iowait irq softirq steal
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		busy += v
	}
	return time.Duration(busy) * time.Second / clockTicks
}

// procCPU returns utime + stime of /proc/<pid>/stat (0 when unreadable).
func procCPU(pid string) time.Duration { return procStatCPU(pid, false) }

// procStatCPU is procCPU, with the children it has waited for (cutime +
// cstime) when children is set: a PostgreSQL backend that exits in a
// window keeps counting, in the postmaster's.
func procStatCPU(pid string, children bool) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	if children && len(f) >= 15 {
		cut, _ := strconv.ParseInt(f[13], 10, 64)
		cst, _ := strconv.ParseInt(f[14], 10, 64)
		ut += cut + cst
	}
	return time.Duration(ut+st) * time.Second / clockTicks
}

// other returns the cores used between prev and s by everything on the
// machine outside the stack, PostgreSQL and this process.
func (s cpuSample) other(prev cpuSample) float64 {
	wall := s.at.Sub(prev.at).Seconds()
	if wall <= 0 {
		return 0
	}
	return max(0, (s.machine-prev.machine-s.spent(prev, "")).Seconds()/wall)
}

// spent is the CPU time every group used between prev and s, but the group
// named except ("" for none; "bench" leaves out the load generator).
func (s cpuSample) spent(prev cpuSample, except string) time.Duration {
	var t time.Duration
	for _, g := range s.groups {
		if g != except {
			t += s.used[g] - prev.used[g]
		}
	}
	return t
}

// groupCores is the cores group used between prev and s (0 when the
// sample has no such group).
func (s cpuSample) groupCores(prev cpuSample, group string) float64 {
	wall := s.at.Sub(prev.at).Seconds()
	if wall <= 0 {
		return 0
	}
	return (s.used[group] - prev.used[group]).Seconds() / wall
}

// cores formats the CPU used between prev and s as cores per group, e.g.
// "gateway 0.52  admission 0.20  ...  other 0.10  (machine 1.95 of 2)";
// "other" is what the rest of the machine used meanwhile: other processes,
// kernel threads, interrupt work (part of it the stack's loopback traffic,
// about 0.1 core under load) and hypervisor steal. Much more than that means
// a disturbed measurement.
func (s cpuSample) cores(prev cpuSample) string {
	wall := s.at.Sub(prev.at).Seconds()
	if wall <= 0 {
		return ""
	}
	var parts []string
	var total float64
	for _, g := range s.groups {
		c := s.groupCores(prev, g)
		total += c
		parts = append(parts, fmt.Sprintf("%s %.2f", g, c))
	}
	machine := (s.machine - prev.machine).Seconds() / wall
	parts = append(parts, fmt.Sprintf("other %.2f", max(0, machine-total)))
	return fmt.Sprintf("%s  (machine %.2f of %d)", strings.Join(parts, "  "), machine, runtime.NumCPU())
}

// ---- HTTP helpers --------------------------------------------------------

// do sends a request to the gateway (path is relative to gatewayURL) with an
// optional body (nil, []byte, string, or a value encoded as JSON) and returns
// the status, headers and whole body, through libs/client's Raw (no
// decoding: the load generator stays cheap). An error answer is a status,
// not an error.
func (e *benchEnv) do(ctx context.Context, method, path string, body any) (int, http.Header, []byte, error) {
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			return 0, nil, nil, err
		}
	}
	status, h, data, err := e.api.Raw(ctx, method, path, raw, "")
	if client.AsError(err) != nil {
		err = nil
	}
	return status, h, data, err
}

// watchClient is an API client for watches, as the bench's administrator:
// no overall timeout (a watch lasts the scenario) and no connection limit
// (one connection per watcher).
func (e *benchEnv) watchClient() (*client.Client, error) {
	return client.New(e.gatewayURL, client.WithUserAgent("no8s-bench"), client.WithToken(e.bootstrapToken), client.WithHTTPClient(&http.Client{Transport: http1Transport(e.roots)}))
}

// postJSON POSTs body and fails unless the answer is 2xx.
func (e *benchEnv) postJSON(ctx context.Context, path string, body any) ([]byte, error) {
	status, _, data, err := e.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	if status/100 != 2 {
		return nil, fmt.Errorf("POST %s: %d %s", path, status, truncateBytes(data, 500))
	}
	return data, nil
}

// listAll reads every page of a list (path carries the query, without limit
// or continue) with limit=1000, following X-Continue-Token, and returns the
// number of items and pages. Items are decoded only as far as counting needs.
func (e *benchEnv) listAll(ctx context.Context, path string) (items, pages int, err error) {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	token := ""
	for {
		u := path + sep + "limit=1000"
		if token != "" {
			u += "&continue=" + url.QueryEscape(token)
		}
		status, h, data, err := e.do(ctx, http.MethodGet, u, nil)
		if err != nil {
			return items, pages, fmt.Errorf("GET %s: %w", u, err)
		}
		if status != http.StatusOK {
			return items, pages, fmt.Errorf("GET %s: %d %s", u, status, truncateBytes(data, 500))
		}
		var page []json.RawMessage
		if err := json.Unmarshal(data, &page); err != nil {
			return items, pages, fmt.Errorf("GET %s: not a JSON array: %w", u, err)
		}
		items += len(page)
		pages++
		token = h.Get(client.HeaderContinueToken)
		if token == "" {
			return items, pages, nil
		}
	}
}

// timeLists lists path (listAll) times times and returns how long each list
// took; every one must find want items.
func (e *benchEnv) timeLists(ctx context.Context, path string, want, times int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, times)
	for range times {
		t0 := time.Now()
		n, pages, err := e.listAll(ctx, path)
		if err != nil {
			return out, err
		}
		if n != want {
			return out, fmt.Errorf("listed %d items in %d pages of %s, want %d", n, pages, path, want)
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// ---- load generator ------------------------------------------------------

// loadSpec describes a closed-loop load: Concurrency workers each run op
// back to back. With Duration, they run for Warmup + Duration and the
// operations that complete within Duration are counted. With Count, exactly
// Count operations run (seq 0 to Count-1); those that complete during Warmup
// are not counted.
type loadSpec struct {
	Concurrency int
	Warmup      time.Duration
	Duration    time.Duration
	Count       int
}

// loadResult is what runLoad measured.
type loadResult struct {
	concurrency int
	ops         int           // counted operations
	elapsed     time.Duration // measured window
	latencies   []time.Duration
	errors      int   // failed operations (counted or not)
	firstErr    error // the first failure
}

// rate is counted operations per second.
func (r loadResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ops) / r.elapsed.Seconds()
}

// percentile returns the p-th percentile (0 < p <= 100) of the latencies.
func (r loadResult) percentile(p float64) time.Duration {
	return percentile(r.latencies, p)
}

// percentile returns the p-th percentile (nearest rank) of sorted or
// unsorted durations; it sorts d in place.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	rank := int(p/100*float64(len(d))+0.999999) - 1
	rank = max(0, min(rank, len(d)-1))
	return d[rank]
}

// runLoad runs op from spec.Concurrency workers. seq numbers every call
// uniquely from 0, so that ops can make unique names. The load stops at the
// first error when stopOnError is set; otherwise errors are counted. The
// context cancels it.
func runLoad(parent context.Context, spec loadSpec, stopOnError bool, op func(ctx context.Context, seq int64) error) (loadResult, error) {
	if spec.Concurrency < 1 {
		spec.Concurrency = 1
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		seq      atomic.Int64
		errCount atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	measureFrom := start.Add(spec.Warmup)
	var measureTo time.Time
	if spec.Count == 0 {
		measureTo = measureFrom.Add(spec.Duration)
	}
	lats := make([][]time.Duration, spec.Concurrency)
	ends := make([]time.Time, spec.Concurrency)
	for w := range spec.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				if spec.Count == 0 && !t0.Before(measureTo) {
					return
				}
				n := seq.Add(1) - 1
				if spec.Count > 0 && n >= int64(spec.Count) {
					return
				}
				err := op(ctx, n)
				t1 := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errCount.Add(1)
					errOnce.Do(func() { firstErr = err })
					if stopOnError {
						cancel()
						return
					}
					continue
				}
				if t1.Before(measureFrom) || (spec.Count == 0 && t1.After(measureTo)) {
					continue
				}
				lats[w] = append(lats[w], t1.Sub(t0))
				ends[w] = t1
			}
		}()
	}
	wg.Wait()
	res := loadResult{concurrency: spec.Concurrency, errors: int(errCount.Load()), firstErr: firstErr}
	last := measureTo
	if spec.Count > 0 {
		last = measureFrom
		for _, t := range ends {
			if t.After(last) {
				last = t
			}
		}
	}
	for _, l := range lats {
		res.latencies = append(res.latencies, l...)
	}
	res.ops = len(res.latencies)
	res.elapsed = last.Sub(measureFrom)
	if err := parent.Err(); err != nil {
		return res, err
	}
	if stopOnError && firstErr != nil {
		return res, firstErr
	}
	return res, nil
}

// ---- report --------------------------------------------------------------

// newTable returns a tabwriter on stdout for aligned columns; Flush it.
func newTable() *tabwriter.Writer {
	return tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
}

// targetResult is one target of an issue and whether this run met it.
type targetResult struct {
	name   string // what is measured, e.g. "creates at c=32 vs ceiling"
	ok     bool
	detail string // the figures, e.g. "41% (target >= 30%)"
}

// printTargets prints one PASS/MISS line per target.
func printTargets(ts ...targetResult) {
	fmt.Println("targets:")
	tw := newTable()
	for _, t := range ts {
		verdict := "MISS"
		if t.ok {
			verdict = "PASS"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", verdict, t.name, t.detail)
	}
	tw.Flush()
}

// fmtDur formats a latency with a precision that suits its size.
func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	}
}

// fmtMiB formats a byte count in MiB.
func fmtMiB(b int64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// ---- stack lifecycle -----------------------------------------------------

// start creates a fresh database and starts nats-server, store, admission
// and gateway, waiting until the gateway reports healthy.
func (e *benchEnv) start(ctx context.Context) error {
	e.stackN++
	logDir := filepath.Join(e.workDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	if e.embedded {
		file := filepath.Join(e.workDir, fmt.Sprintf("store-%d.db", e.stackN))
		e.databaseURL = "sqlite:" + file
		e.dropDB = func() {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(file + suffix)
			}
		}
	} else {
		dbURL, drop, err := testenv.CreateDatabase(ctx, "bench")
		if err != nil {
			return err
		}
		e.databaseURL, e.dropDB = dbURL, drop
	}

	// nats-server
	natsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(natsAddr)
	natsDir := filepath.Join(e.workDir, fmt.Sprintf("nats-%d", e.stackN))
	e.natsURL = "nats://" + natsAddr
	natsArgs, err := e.natsServerArgs(host, port, natsDir)
	if err != nil {
		return err
	}
	np, err := e.startProc("nats-server", e.natsBin, natsArgs...)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, 15*time.Second, "nats-server", np, func() error {
		nc, err := e.connectNATS(nats.Timeout(time.Second))
		if err != nil {
			return err
		}
		nc.Close()
		return nil
	}); err != nil {
		return err
	}

	// store (applies the migrations at start)
	if e.storeAddr, err = freeAddr(); err != nil {
		return err
	}
	if e.workerAddr, err = freeAddr(); err != nil {
		return err
	}
	args, err := e.serviceArgs(identity.Store, []string{"--listen", e.storeAddr, "--worker-listen", e.workerAddr, "--database-url", e.databaseURL, "--nats-url", e.natsURL})
	if err != nil {
		return err
	}
	sp, err := e.startProc("store", filepath.Join(e.binDir, "no8s-store"), args...)
	if err != nil {
		return err
	}
	if err := waitTCP(ctx, e.storeAddr, sp); err != nil {
		return err
	}
	if err := waitTCP(ctx, e.workerAddr, sp); err != nil {
		return err
	}

	// admission
	if e.admissionAddr, err = freeAddr(); err != nil {
		return err
	}
	args, err = e.serviceArgs(identity.Admission, []string{"--listen", e.admissionAddr, "--store-addr", e.storeAddr, "--nats-url", e.natsURL,
		"--outbound-allow", "loopback"}) // the webhook benchmark's webhook listens on loopback
	if err != nil {
		return err
	}
	ap, err := e.startProc("admission", filepath.Join(e.binDir, "no8s-admission"), args...)
	if err != nil {
		return err
	}
	if err := waitTCP(ctx, e.admissionAddr, ap); err != nil {
		return err
	}

	// gateway: authentication on, the bench the administrator with the
	// bootstrap token (e.client sends it)
	if e.gatewayURL, err = e.startGateway(ctx, "gateway", e.gatewayTLS...); err != nil {
		return err
	}
	if e.api, err = client.New(e.gatewayURL, client.WithHTTPClient(e.client), client.WithTimeout(0), client.WithRetries(0),
		client.WithUserAgent("no8s-bench")); err != nil {
		return err
	}

	// the noop reconciler, serving the scenarios' types
	renv, err := e.reconcilerEnv(noop.DefaultName, benchTypes)
	if err != nil {
		return err
	}
	rp, err := e.startProcEnv("reconciler", filepath.Join(e.binDir, "no8s-reconciler"), renv, "noop",
		"--types", strings.Join(benchTypes, ","), "--nats-url", e.natsURL, "--store-addr", e.workerAddr, "--health-listen", "off")
	if err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, "noop reconciler registered", rp, func() error {
		return e.registered(ctx, benchTypes)
	}); err != nil {
		return err
	}

	if e.embedded {
		return nil
	}
	cfg, err := pgxpool.ParseConfig(e.databaseURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = 34
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	e.pool = pool
	return nil
}

// startGateway starts a gateway named name on the stack's store and
// admission, with extra flags, and waits until it is healthy; it returns
// its base URL. Authentication is on unless extra says otherwise, with the
// bench's bootstrap token (bootstrapToken).
func (e *benchEnv) startGateway(ctx context.Context, name string, extra ...string) (string, error) {
	gwAddr, err := freeAddr()
	if err != nil {
		return "", err
	}
	tokenFile, err := e.bootstrapTokenFile()
	if err != nil {
		return "", err
	}
	// No limits per caller: the api scenarios send ~700 requests a second
	// with one token from one address, the watch scenarios open many
	// streams, and a limit would measure itself instead of the gateway.
	limits := []string{"--rate-limit=0", "--max-watches-per-identity=0", "--max-body-reads-per-source=0"}
	args, err := e.serviceArgs(identity.Gateway, append(append([]string{"--listen", gwAddr, "--store-addr", e.storeAddr, "--admission-addr", e.admissionAddr, "--nats-url", e.natsURL,
		"--outbound-allow", "loopback", "--bootstrap-token-file", tokenFile}, limits...), extra...))
	if err != nil {
		return "", err
	}
	gp, err := e.startProc(name, filepath.Join(e.binDir, "no8s-gateway"), args...)
	if err != nil {
		return "", err
	}
	url := "http://" + gwAddr
	if slices.Contains(extra, "--tls-cert-file") {
		url = "https://" + gwAddr
	}
	return url, waitFor(ctx, 30*time.Second, name+" /health", gp, func() error {
		return getOK(e.client, url+"/health")
	})
}

// getOK fails unless a GET of url answers 200: a probe.
func getOK(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return nil
}

// bootstrapTokenFile writes the bench's bootstrap token to a file of the
// work directory (once) and returns its path.
func (e *benchEnv) bootstrapTokenFile() (string, error) {
	path := filepath.Join(e.workDir, "bootstrap.token")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	return path, os.WriteFile(path, []byte(e.bootstrapToken+"\n"), 0o600)
}

// stop ends every process (SIGTERM, then SIGKILL after a grace period, the
// services before nats-server), closes the pool and drops the database.
// serviceAPI returns the URL of the gateway that the stack's services
// write to (the garbage collector, registry-sync, the tenant reconciler),
// starting it on the first call of a stack: with identities on, a gateway
// with a service listener, where each presents its own certificate; off, a
// gateway without authentication, as they then have no credential.
func (e *benchEnv) serviceAPI(ctx context.Context) (string, error) {
	if e.serviceURL != "" {
		return e.serviceURL, nil
	}
	if !*identitiesFlag {
		u, err := e.startGateway(ctx, "gateway-services", "--auth", "none")
		e.serviceURL = u
		return u, err
	}
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	if _, err := e.startGateway(ctx, "gateway-services", "--service-listen", addr); err != nil {
		return "", err
	}
	e.serviceURL = "https://" + addr
	return e.serviceURL, nil
}

func (e *benchEnv) stop() {
	e.serviceURL = ""
	if e.pool != nil {
		e.pool.Close()
		e.pool = nil
	}
	e.client.CloseIdleConnections()
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].end()
	}
	e.procsMu.Lock()
	e.procs = nil
	e.procsMu.Unlock()
	if e.dropDB != nil {
		e.dropDB()
		e.dropDB = nil
	}
}

// startProc starts a binary with its stdout and stderr in a log file.
func (e *benchEnv) startProc(name, bin string, args ...string) (*benchProc, error) {
	return e.startProcEnv(name, bin, nil, args...)
}

// startProcEnv is startProc with env added to the bench's environment.
func (e *benchEnv) startProcEnv(name, bin string, env []string, args ...string) (*benchProc, error) {
	logPath := filepath.Join(e.workDir, "logs", fmt.Sprintf("%d-%s.log", e.stackN, name))
	for i := 2; ; i++ { // a process started again keeps its predecessor's log
		if _, err := os.Stat(logPath); err != nil {
			break
		}
		logPath = filepath.Join(e.workDir, "logs", fmt.Sprintf("%d-%s-%d.log", e.stackN, name, i))
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// Probes off unless args name a --health-listen: the services' default
	// probe ports may be taken by another stack on the machine. With
	// -scrape, each no8s process gets a listener of its own.
	var pprofAddr, metricsAddr string
	if name != "nats-server" {
		env = append(slices.Clone(env), e.otelEnv...)
		if args, metricsAddr, err = scrapeArgs(bin, args); err != nil {
			logf.Close()
			return nil, err
		}
		if metricsAddr != "" && !slices.Contains(args, metricsAddr) {
			env = append(slices.Clone(env), "NO8S_HEALTH_LISTEN="+metricsAddr)
		}
	}
	cmd := exec.Command(bin, args...)
	if cmd.Env, pprofAddr, err = procEnv(env); err != nil {
		logf.Close()
		return nil, err
	}
	if name == "nats-server" {
		// nats-server serves its own pprof (--profile PORT, on the host
		// of -a), so -profile covers the broker too.
		pprofAddr = ""
		if profiling() {
			if pprofAddr, err = freeAddr(); err != nil {
				logf.Close()
				return nil, err
			}
			_, port, _ := net.SplitHostPort(pprofAddr)
			cmd.Args = append(cmd.Args, "--profile", port)
		}
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Should the bench die without stopping them, the children die too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &benchProc{name: name, cmd: cmd, logPath: logPath, logFile: logf, done: make(chan struct{}), pprofAddr: pprofAddr, metricsAddr: metricsAddr}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	e.procsMu.Lock()
	e.procs = append(e.procs, p)
	e.procsMu.Unlock()
	return p, nil
}

// end stops p: SIGTERM, then SIGKILL after a grace period.
func (p *benchProc) end() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	_ = p.logFile.Close()
}

// stopProc stops one process of the stack (SIGTERM, as an operator would)
// and forgets it.
func (e *benchEnv) stopProc(p *benchProc) {
	p.end()
	e.procs = slices.DeleteFunc(e.procs, func(q *benchProc) bool { return q == p })
}

// startScheduler starts a no8s-scheduler (process "scheduler") whose lease
// holder is name, with extra flags appended, and waits until it leads: it
// holds an unexpired scheduler lease in the database.
func (e *benchEnv) startScheduler(ctx context.Context, name string, extra ...string) (*benchProc, error) {
	args, err := e.serviceArgs(identity.Scheduler, append([]string{"--store-addr", e.storeAddr, "--nats-url", e.natsURL, "--holder", name}, extra...))
	if err != nil {
		return nil, err
	}
	p, err := e.startProc("scheduler", filepath.Join(e.binDir, "no8s-scheduler"), args...)
	if err != nil {
		return nil, err
	}
	return p, waitFor(ctx, 30*time.Second, name+" leading", p, func() error {
		var leads bool
		if err := e.pool.QueryRow(ctx, `SELECT holder = $1 AND lease_expires_at > now() FROM scheduler_state WHERE id = 1`, name).Scan(&leads); err != nil {
			return err
		}
		if !leads {
			return errors.New("not leading yet")
		}
		return nil
	})
}

// startNoopReplicas starts one noop reconciler replica per id, registered
// as reconciler and serving types, named reconciler-<id>, with extra flags
// appended, and waits until the registry shows every replica and type.
func (e *benchEnv) startNoopReplicas(ctx context.Context, reconciler string, types []string, ids []string, extra ...string) error {
	var last *benchProc
	renv, err := e.reconcilerEnv(reconciler, types)
	if err != nil {
		return err
	}
	for _, id := range ids {
		args := append([]string{"noop", "--name", reconciler, "--types", strings.Join(types, ","), "--replica-id", id,
			"--nats-url", e.natsURL, "--store-addr", e.workerAddr, "--health-listen", "off"}, extra...)
		p, err := e.startProcEnv("reconciler-"+id, filepath.Join(e.binDir, "no8s-reconciler"), renv, args...)
		if err != nil {
			return err
		}
		last = p
	}
	return waitFor(ctx, 30*time.Second, fmt.Sprintf("%d replicas of %s registered", len(ids), reconciler), last, func() error {
		if err := e.registered(ctx, types); err != nil {
			return err
		}
		return e.replicasRegistered(ctx, reconciler, len(ids))
	})
}

// freeAddr returns a loopback address with a port that was free just now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitTCP(ctx context.Context, addr string, p *benchProc) error {
	return waitFor(ctx, 30*time.Second, p.name+" on "+addr, p, func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// waitFor polls f until it succeeds, p exits, or the timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, p *benchProc, f func() error) error {
	return pollFor(ctx, timeout, 25*time.Millisecond, what, p, f)
}

// pollFor is waitFor calling f every period: a wait measured over minutes
// polls less often, so that its queries do not load the database it
// measures.
func pollFor(ctx context.Context, timeout, period time.Duration, what string, p *benchProc, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited while waiting for %s: %v (log %s)", p.name, what, p.err, p.logPath)
		default:
		}
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: %w (log %s)", what, err, p.logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(period):
		}
	}
}

// ---- binaries ------------------------------------------------------------

// locateBinaries finds the no8s binaries: -bin-dir, $NO8S_BIN_DIR, or
// <repo>/bin; when the default ones are missing or older than the sources
// (or -build is given) it builds them into the temporary directory.
func (e *benchEnv) locateBinaries(ctx context.Context) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	explicit := *binDirFlag
	if explicit == "" {
		explicit = os.Getenv("NO8S_BIN_DIR")
	}
	dir := explicit
	if dir == "" {
		dir = filepath.Join(root, "bin")
	}
	oldest, missing := oldestBinary(dir)
	switch {
	case *buildFlag:
		err = e.build(ctx, root, "-build given")
	case missing != "" && explicit != "":
		return fmt.Errorf("%s: missing in %s", missing, dir)
	case missing != "":
		err = e.build(ctx, root, missing+" missing in "+dir)
	case explicit == "" && newerSource(root, oldest):
		err = e.build(ctx, root, "binaries in "+dir+" are older than the sources")
	default:
		e.binDir = dir
	}
	if err != nil {
		return err
	}
	e.natsBin, err = natsServerBinary(root, dir)
	return err
}

// oldestBinary returns the oldest modification time of the service binaries
// in dir, or the name of one that is missing.
func oldestBinary(dir string) (time.Time, string) {
	var oldest time.Time
	for _, s := range binaryNames {
		fi, err := os.Stat(filepath.Join(dir, "no8s-"+s))
		if err != nil {
			return time.Time{}, "no8s-" + s
		}
		if oldest.IsZero() || fi.ModTime().Before(oldest) {
			oldest = fi.ModTime()
		}
	}
	return oldest, ""
}

// newerSource reports whether a Go, SQL or go.mod file of the services,
// proto or migrations modules changed after t.
func newerSource(root string, t time.Time) bool {
	newer := errors.New("newer")
	for _, m := range []string{"services", "proto", "migrations"} {
		err := filepath.WalkDir(filepath.Join(root, m), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			n := d.Name()
			if !strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, ".sql") && n != "go.mod" {
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.ModTime().After(t) {
				return newer
			}
			return nil
		})
		if errors.Is(err, newer) {
			return true
		}
	}
	return false
}

// build compiles the service binaries into the temporary directory.
func (e *benchEnv) build(ctx context.Context, root, why string) error {
	dir := filepath.Join(e.workDir, "bin")
	fmt.Fprintf(os.Stderr, "no8s-bench: %s: building the services into %s\n", why, dir)
	args := []string{"build", "-o", dir + "/"}
	for _, s := range binaryNames {
		args = append(args, "./cmd/no8s-"+s)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(root, "services")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	e.binDir, e.buildDir = dir, dir
	return nil
}

// natsServerBinary finds nats-server: $NO8S_NATS_SERVER, the binaries'
// directory, <repo>/bin (make nats-server), or PATH.
func natsServerBinary(root, binDir string) (string, error) {
	if p := os.Getenv("NO8S_NATS_SERVER"); p != "" {
		return p, nil
	}
	for _, d := range []string{binDir, filepath.Join(root, "bin")} {
		p := filepath.Join(d, "nats-server")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("nats-server")
	if err != nil {
		return "", errors.New("no nats-server binary: run `make nats-server` or set NO8S_NATS_SERVER")
	}
	return p, nil
}

// repoRoot walks up from the working directory to the one holding go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory: run from inside the repository")
		}
		dir = parent
	}
}

// readRegistry reads the live reconciler registry over a connection of its
// own.
func (e *benchEnv) readRegistry(ctx context.Context) (reg *reconcilers.Registry, err error) {
	err = e.withJetStream(func(js jetstream.JetStream) error {
		reg, err = reconcilers.Read(ctx, js)
		return err
	})
	return reg, err
}

// withJetStream runs f on a JetStream context of a connection of its own.
func (e *benchEnv) withJetStream(f func(jetstream.JetStream) error) error {
	nc, err := e.connectNATS(nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return f(js)
}

// dispatchCount is what a no8s stack has dispatched and attempted so far:
// the work queue's last sequence (every work item published takes one; an
// item dropped as a duplicate takes none, and an acknowledged one leaves
// the stream but not the count) and the newest reconciliation history row
// (one per attempt).
type dispatchCount struct {
	items    uint64
	attempts int64
}

// countDispatches reads the stack's dispatchCount.
func (e *benchEnv) countDispatches(ctx context.Context) (dispatchCount, error) {
	var c dispatchCount
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM reconciliation_history`).Scan(&c.attempts); err != nil {
		return c, fmt.Errorf("count attempts: %w", err)
	}
	err := e.withJetStream(func(js jetstream.JetStream) error {
		st, err := js.Stream(ctx, subjects.ReconcileStream)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		c.items = info.State.LastSeq
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("count work items: %w", err)
	}
	return c, nil
}

// since is the work items published and attempts made since prev.
func (c dispatchCount) since(prev dispatchCount) dispatchCount {
	return dispatchCount{items: c.items - prev.items, attempts: c.attempts - prev.attempts}
}

// perAttempt is work items per attempt (0 without attempts).
func (c dispatchCount) perAttempt() float64 {
	if c.attempts <= 0 {
		return 0
	}
	return float64(c.items) / float64(c.attempts)
}

// String describes a count since an earlier one.
func (c dispatchCount) String() string {
	return fmt.Sprintf("%d work items published for %d attempts: %.2f per attempt", c.items, c.attempts, c.perAttempt())
}

// replicasRegistered reports whether the live reconciler registry shows at
// least n replicas of the reconciler name.
func (e *benchEnv) replicasRegistered(ctx context.Context, name string, n int) error {
	reg, err := e.readRegistry(ctx)
	if err != nil {
		return err
	}
	for _, r := range reg.Reconcilers {
		if r.Name == name && r.Replicas >= n {
			return nil
		}
	}
	return fmt.Errorf("fewer than %d replicas of %s registered", n, name)
}

// registered reports whether the live reconciler registry serves every
// type ("Type/version").
func (e *benchEnv) registered(ctx context.Context, types []string) error {
	reg, err := e.readRegistry(ctx)
	if err != nil {
		return err
	}
	for _, t := range types {
		name, version, _ := strings.Cut(t, "/")
		if reg.Owners[reconcilers.TypeRef{Name: name, Version: version}] == "" {
			return fmt.Errorf("%s is not served yet", t)
		}
	}
	return nil
}
