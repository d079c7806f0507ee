package testkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	apiclient "github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/sdk/client"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// Env is a running control plane: a `no8s dev` process.
type Env struct {
	// URL is the api-gateway's base URL (http://127.0.0.1:port).
	URL string
	// DatabaseURL is the store's database: the embedded store's file
	// (sqlite:<path>) unless WithDatabaseURL chose PostgreSQL.
	DatabaseURL string
	// NATSURL is the control plane's NATS server's client URL.
	NATSURL string
	// NATS is a connection to it.
	NATS *nats.Conn
	// CADir is the control plane's CA directory, from which the kit issues
	// the credentials of the workers it runs (`no8s identity issue
	// --ca-dir`); "" with identities off.
	CADir string
	// StoreConn is a gRPC connection to the store's main listener, as
	// service/gateway: the kit's reads there (Store, Reconcile.ListHistory)
	// are the public API's, which the call policy gives the gateway alone.
	StoreConn *grpc.ClientConn
	// WorkerConn is a gRPC connection to the store's worker listener, the
	// one reconcilers use (only WorkerService is served there), as
	// service/registry-sync: the policy lets it read resources of every
	// type there, and nothing else. To act as a reconciler (take a lease),
	// dial as one: DialWorkers.
	WorkerConn *grpc.ClientConn
	// Store and Reconcile are the store's gRPC services on its main
	// listener; Worker is the workers' service (reads only: WorkerConn).
	Store     storev1.StoreServiceClient
	Reconcile reconcilev1.ReconcileServiceClient
	Worker    reconcilev1.WorkerServiceClient
	// Client reads resources the way reconcilers do.
	Client *client.Store
	// API is the REST API's client the helpers use.
	API *apiclient.Client
	// HTTP is the HTTP client under API. Its requests to URL carry the
	// control plane's administrator token (Token) unless they carry an
	// Authorization header of their own.
	HTTP *http.Client
	// Token is the control plane's administrator token: `no8s dev` creates
	// it at first start ("" when it runs with --auth=none).
	Token string
	// Log is where workers started by RunReconciler log.
	Log *slog.Logger

	opts       options
	workerAddr string
	// serviceURL is the gateway's service listener ("" without one).
	serviceURL string
	// issuer issues credentials from the control plane's CA (nil with
	// identities off); under mu.
	issuer *issuer
	mu     sync.Mutex
	stops  []func()
}

// Option configures Start.
type Option func(*options)

type options struct {
	log          *slog.Logger
	databaseURL  string
	historyLimit int
	scheduler    bool
	lease        time.Duration
}

// WithLogger sets where workers started by RunReconciler log (default:
// discarded unless NO8S_TESTKIT_LOG is set).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithDatabaseURL runs the store on this PostgreSQL database instead of the
// embedded store (created when missing).
func WithDatabaseURL(u string) Option { return func(o *options) { o.databaseURL = u } }

// WithHistoryLimit bounds reconciliation history rows per resource.
func WithHistoryLimit(n int) Option { return func(o *options) { o.historyLimit = n } }

// WithoutScheduler runs no scheduler: the test dispatches work items itself
// (Dispatch).
func WithoutScheduler() Option { return func(o *options) { o.scheduler = false } }

// WithLease sets the reconcile lease of workers started by RunReconciler and
// the scheduler's item lease (default 5 s).
func WithLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// BinaryEnv names the environment variable with the no8s binary's path.
const BinaryEnv = "NO8S_BIN"

// Binary returns the no8s binary the test kit runs: $NO8S_BIN, else no8s on
// PATH.
func Binary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinaryEnv, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("no8s")
	if err != nil {
		return "", fmt.Errorf("the no8s binary was not found: set %s to its path or put it on PATH "+
			"(in the no8s repository, `make build` writes bin/no8s)", BinaryEnv)
	}
	return p, nil
}

// Start runs a control plane for the test: `no8s dev` as a child process, on
// the embedded store in a temporary directory, with free loopback ports.
// Everything is torn down when the test ends.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	o := options{scheduler: true, lease: 5 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		if logging() {
			o.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		} else {
			o.log = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
	}
	env := &Env{opts: o, Log: o.log, HTTP: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(env.stop)
	if err := env.start(); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return env
}

// logging reports whether the control plane's log goes to stderr.
func logging() bool { return os.Getenv("NO8S_TESTKIT_LOG") != "" }

func (e *Env) onStop(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stops = append(e.stops, f)
}

// stop tears everything down in reverse order of start.
func (e *Env) stop() {
	e.mu.Lock()
	stops := e.stops
	e.stops = nil
	e.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
}

// ready is what `no8s dev --ready-file` writes.
type ready struct {
	APIURL     string `json:"api_url"`
	NATSURL    string `json:"nats_url"`
	StoreAddr  string `json:"store_addr"`
	WorkerAddr string `json:"worker_addr"`
	Store      string `json:"store"`
	// CADir is the control plane's CA directory ("" with identities off,
	// or from a no8s binary older than identities in no8s dev).
	CADir string `json:"ca_dir"`
	// ServiceURL is the gateway's service listener, where workers write as
	// their reconciler ("" with identities off, or from an older binary).
	ServiceURL string `json:"service_url"`
	// TokenFile holds the administrator's API token ("" with
	// authentication off).
	TokenFile string `json:"token_file"`
}

func (e *Env) start() error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "no8s-testkit-")
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	// Registered first, so it runs last: after the process has exited.
	e.onStop(func() { _ = os.RemoveAll(dir) })
	readyFile := filepath.Join(dir, "ready.json")
	// --cli-config off: the developer's CLI configuration stays theirs.
	args := []string{"dev", "--data-dir", filepath.Join(dir, "state"), "--ready-file", readyFile, "--cli-config", "off",
		"--listen", "127.0.0.1:0", "--nats-port", "0", "--store-addr", "127.0.0.1:0", "--admission-addr", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0",
		// Timings for tests: a short leadership lease, a fast registry
		// poll, quick retries, and an item lease equal to the workers'.
		"--scheduler-lease", "3s", "--liveness-poll", "200ms", "--retry-delay", "200ms", "--item-lease", e.opts.lease.String()}
	if !e.opts.scheduler {
		args = append(args, "--no-scheduler")
	}
	// A reconciler's tests get a bare control plane: no registry-sync and
	// no tenant reconciler (each would register as a reconciler and create
	// the registry's bucket with its own TTL). The tenant types exist all
	// the same.
	args = append(args, "--no-registry-sync", "--no-tenant-reconciler")
	if e.opts.historyLimit > 0 {
		args = append(args, "--history-limit", strconv.Itoa(e.opts.historyLimit))
	}
	if e.opts.databaseURL != "" {
		args = append(args, "--database-url", e.opts.databaseURL)
	}
	cmd := exec.Command(bin, args...)
	// The store is the embedded one unless WithDatabaseURL says otherwise,
	// whatever the caller's environment holds.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "NO8S_DATABASE_URL=")
	})
	logPath := filepath.Join(dir, "no8s.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	var out io.Writer = logFile
	if logging() {
		out = io.MultiWriter(logFile, os.Stderr)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Should the test binary die without cleaning up, the control plane
	// dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	e.onStop(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			e.Log.Warn("no8s dev did not stop within 20s; killing it")
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
	})

	r, err := waitReadyFile(readyFile, exited, time.Minute)
	if err != nil {
		if errors.Is(err, errExited) {
			err = fmt.Errorf("%w (%v)", err, waitErr)
		}
		return fmt.Errorf("%s dev: %w; its log:\n%s", bin, err, tail(logPath, 40))
	}
	e.URL, e.NATSURL, e.DatabaseURL = r.APIURL, r.NATSURL, r.Store
	if err := e.useToken(r.TokenFile); err != nil {
		return err
	}
	if e.API, err = apiclient.New(r.APIURL, apiclient.WithHTTPClient(e.HTTP), apiclient.WithUserAgent("no8s-testkit")); err != nil {
		return fmt.Errorf("api client: %w", err)
	}
	e.workerAddr, e.serviceURL, e.CADir = r.WorkerAddr, r.ServiceURL, r.CADir
	// The kit's own connections, each with the identity the call policy
	// gives what the kit calls there (see StoreConn and WorkerConn); on
	// NATS, which takes only the CA's users, a NATS admin's: a test may
	// look at and write anything there (dispatching by hand, say).
	var storeID, workerID string
	natsOpts := []nats.Option{nats.Name("no8s-testkit")}
	if r.CADir != "" {
		e.issuer = &issuer{bin: bin, caDir: r.CADir, dir: filepath.Join(dir, "identities"), issued: map[string]string{}, claims: map[string]string{}}
		if storeID, err = e.issuer.issue("service/gateway", "--service", "gateway"); err != nil {
			return err
		}
		if workerID, err = e.issuer.issue("service/registry-sync", "--service", "registry-sync"); err != nil {
			return err
		}
		adminDir, err := e.issuer.issue("nats-admin/testkit", "--nats-admin", "testkit")
		if err != nil {
			return err
		}
		natsOpts = append(natsOpts, nats.UserCredentials(filepath.Join(adminDir, identity.NATSCredsFile)))
	}
	if e.NATS, err = nats.Connect(r.NATSURL, natsOpts...); err != nil {
		return fmt.Errorf("connect to nats: %w", err)
	}
	e.onStop(e.NATS.Close)
	if !e.opts.scheduler {
		// Without a scheduler the kit dispatches by hand (Dispatch), and
		// makes the work queue as the scheduler would: workers may not.
		if err := ensureWorkQueue(e.NATS); err != nil {
			return err
		}
	}
	if e.StoreConn, err = DialAs(r.StoreAddr, storeID); err != nil {
		return err
	}
	e.onStop(func() { _ = e.StoreConn.Close() })
	if e.WorkerConn, err = DialAs(r.WorkerAddr, workerID); err != nil {
		return err
	}
	e.onStop(func() { _ = e.WorkerConn.Close() })
	e.Store = storev1.NewStoreServiceClient(e.StoreConn)
	e.Reconcile = reconcilev1.NewReconcileServiceClient(e.StoreConn)
	e.Worker = reconcilev1.NewWorkerServiceClient(e.WorkerConn)
	e.Client = client.NewStore(e.WorkerConn)
	return nil
}

var errExited = errors.New("exited before it was ready")

// waitReadyFile waits for `no8s dev` to write its ready file.
func waitReadyFile(path string, exited <-chan struct{}, timeout time.Duration) (*ready, error) {
	deadline := time.After(timeout)
	for {
		if data, err := os.ReadFile(path); err == nil {
			var r ready
			if err := json.Unmarshal(data, &r); err != nil {
				return nil, fmt.Errorf("ready file %s: %w", path, err)
			}
			return &r, nil
		}
		select {
		case <-exited:
			return nil, errExited
		case <-deadline:
			return nil, fmt.Errorf("not ready within %s", timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Dial connects to a no8s gRPC service on loopback in plaintext: a control
// plane with identities off (`no8s dev --identities=off`). With identities
// on, use DialAs.
func Dial(addr string) (*grpc.ClientConn, error) {
	return dial(addr, insecure.NewCredentials())
}

func dial(addr string, tc credentials.TransportCredentials) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tc),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}
