package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/reconcilers"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store"
	"github.com/no8s/no8s/services/store/litestore"
	"github.com/no8s/no8s/services/store/pgoutbox"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
)

// binDir holds the binaries under test, built once in TestMain.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if addr := os.Getenv(rogueEnv); addr != "" {
		return runRogueWorker(addr) // this process is TestWorkerDoorIsNarrow's rogue worker
	}
	if addr := os.Getenv(traceWebhookEnv); addr != "" {
		return runTraceWebhook(addr) // this process is TestTraceOfACreate's webhook
	}
	if url := os.Getenv(queuePublisherEnv); url != "" {
		return runQueuePublisher(url) // this process is TestQueueInputKill9's publisher
	}
	dir, err := os.MkdirTemp("", "no8s-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/no8s", "./cmd/no8s-store", "./cmd/no8s-admission", "./cmd/no8s-gateway", "./cmd/no8s-scheduler", "./cmd/no8s-reconciler", "./cmd/no8s-registry-sync")
	cmd.Dir = ".."
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		return 1
	}
	binDir = dir
	if err := useAdminToken(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// natsServerBinary finds a real nats-server: $NO8S_NATS_SERVER, the repo's
// bin/ (make nats-server), or PATH.
func natsServerBinary(t *testing.T) string {
	if p := os.Getenv("NO8S_NATS_SERVER"); p != "" {
		return p
	}
	if p, err := filepath.Abs("../../bin/nats-server"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("nats-server")
	if err != nil {
		t.Fatal("no nats-server binary: run `make nats-server` or set NO8S_NATS_SERVER")
	}
	return p
}

// proc is a child process under test.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// exited says that p has exited and how, or returns nil while it runs.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return nil
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := l.Addr().String()
		l.Close()
		if handedOut.claim(a) {
			return a
		}
	}
}

// mostlyWaits marks a test that spends its time waiting (for a lease to
// lapse, a sync interval, a timeout), not loading the machine: such tests
// run side by side, after the serial ones (t.Parallel, at most -parallel at
// once), so that the package stays within make test's budget. Tests that
// put a load on the machine, kill processes under load or measure stay
// serial, and so do those that set the environment of the processes they
// start (t.Setenv, as grantTestSecrets does: the environment is the test
// binary's).
func mostlyWaits(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// handedOut remembers every address freeAddr returned in this test binary:
// the kernel may give a just-closed port again, and two services of one
// cluster told the same port fail at bind (as admission's probe and its
// listener once did in CI).
var handedOut = &addrSet{seen: map[string]bool{}}

type addrSet struct {
	mu   sync.Mutex
	seen map[string]bool
}

// claim reports whether a was not handed out before, and records it.
func (s *addrSet) claim(a string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[a] {
		return false
	}
	s.seen[a] = true
	return true
}

// start runs a binary with its output in a log file that is printed when
// the test fails. Its probes are off unless args name a --health-listen:
// the services' default probe ports may be taken on a shared machine.
func start(t *testing.T, name, bin string, args []string, env ...string) *proc {
	t.Helper()
	return startEnv(t, name, bin, args, append(append(append(os.Environ(), "NO8S_HEALTH_LISTEN=off"), bootstrapEnv()...), env...))
}

// startEnv is start with exactly the environment env.
func startEnv(t *testing.T, name, bin string, args, env []string) *proc {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM, 10*time.Second)
		// A no8s process that NATS refused something did what its NATS
		// user may not: the NATS policy (authz.NATS) misses its job.
		if b, _ := os.ReadFile(logf.Name()); name != "nats-server" && natsRefused.Match(b) {
			t.Errorf("%s: NATS refused it something (the NATS policy misses its job): %s", name, natsRefused.Find(b))
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("---- %s log (tail) ----\n%s", name, b)
		}
	})
	return p
}

// natsRefused finds a NATS permissions violation in a process's log.
var natsRefused = regexp.MustCompile(`(?i)[^\n]*permissions violation[^\n]*`)

// stop sends sig and waits up to grace, then kills.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill9 kills the process at once.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// cluster is a control plane of real processes.
type cluster struct {
	t          *testing.T
	dbURL      string
	natsURL    string
	natsDir    string
	natsAddr   string
	nats       *proc
	stores     []*proc
	storeAddrs []string
	// workerAddrs maps a store's address to its worker address (the
	// reconcilers' door), so that a restart keeps both.
	workerAddrs map[string]string
	admissions  []string
	// admissionProcs are the admission processes, in admissions' order.
	admissionProcs []*proc
	gateways       []string
	// gatewayProcs are the gateway processes, in gateways' order.
	gatewayProcs []*proc
	// serviceGateways are the gateways' service listeners (https://…),
	// in gateways' order, with identities on (startGateway).
	serviceGateways []string
	pool            *pgxpool.Pool
	// dbFile is the embedded backend's file (newSQLiteCluster), "" on
	// PostgreSQL.
	dbFile string
	// sqlite reads dbFile for count (opened on first use).
	sqlite *sql.DB
	// probes are the /readyz URLs of the processes started, by name.
	probes map[string]string
	// idRoot holds the CA and every process's credentials once
	// withIdentities turned identities on ("" : off).
	idRoot string
	// natsConf is the nats-server configuration that takes only the CA's
	// NATS users (newAuthCluster), "" for a server that takes anyone.
	natsConf string
}

// identitiesEnv turns identities off in every cluster the harness starts
// when it is "off" (NO8S_E2E_IDENTITIES=off go test ./e2e/): a run of the
// suite as an installation without credentials. Otherwise every cluster
// starts with identities on (newCluster, newSQLiteCluster), as the
// services are deployed; the tests of identities themselves
// (withIdentities) keep them on either way.
const identitiesEnv = "NO8S_E2E_IDENTITIES"

// identitiesByDefault says whether newCluster and newSQLiteCluster turn
// identities on: always, unless identitiesEnv is "off".
func identitiesByDefault() bool { return os.Getenv(identitiesEnv) != "off" }

// natsUsersEnv, set to "off", runs every cluster's nats-server taking any
// client, as an installation whose NATS has no users. Otherwise, with
// identities on, every cluster's nats-server runs with the project's
// configuration (deploy/nats/nats-server.conf and `no8s identity
// nats-config`'s part): it takes only the CA's NATS users, and every
// process connects as its identity's (withNATSUsers). The tests of NATS
// users themselves (newAuthCluster) run so either way.
const natsUsersEnv = "NO8S_E2E_NATS_USERS"

// natsUsersByDefault says whether newCluster and newSQLiteCluster run
// their nats-server with NATS users: with identities on, unless
// natsUsersEnv is "off".
func natsUsersByDefault() bool { return identitiesByDefault() && os.Getenv(natsUsersEnv) != "off" }

// withNATSUsers, with identities on and before the cluster's nats-server
// starts, gives the CA NATS keys (`no8s identity init-ca --nats`) and the
// server the configuration that takes only the CA's users; the harness's
// own connections are then a NATS admin's (natsOptions).
func (c *cluster) withNATSUsers() {
	c.t.Helper()
	if c.natsConf != "" {
		return
	}
	c.withIdentities()
	if r := no8sEnv(c.t, nil, "", "identity", "init-ca", "--ca-dir", c.caDir(), "--nats"); r.code != 0 {
		c.t.Fatalf("no8s identity init-ca --nats: %d %s", r.code, r.stderr)
	}
	c.natsConf = natsConfig(c.t, c.caDir(), c.natsDir)
}

// withIdentities turns identities on for every process the cluster starts
// from now on: a CA made with `no8s identity init-ca`, and each process's
// credentials issued with `no8s identity issue`, the commands an operator
// runs. With identities on already it does nothing.
func (c *cluster) withIdentities() {
	c.t.Helper()
	if c.idRoot != "" {
		return
	}
	c.idRoot = c.t.TempDir()
	if r := no8sEnv(c.t, nil, "", "identity", "init-ca", "--ca-dir", c.caDir()); r.code != 0 {
		c.t.Fatalf("no8s identity init-ca: %d %s", r.code, r.stderr)
	}
}

func (c *cluster) caDir() string { return filepath.Join(c.idRoot, "ca") }

// credentials returns the credentials directory of a service (issue
// args "--service", name), a reconciler ("--reconciler", name, "--types",
// list) or a client ("--client", name), issued on first use; "" with
// identities off. A service's certificate also names 127.0.0.1 (--host),
// so that grpcurl, which checks host names, accepts the listeners.
func (c *cluster) credentials(args ...string) string {
	c.t.Helper()
	if c.idRoot == "" {
		return ""
	}
	dir := filepath.Join(c.idRoot, strings.Join(args, "_"))
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	issue := append([]string{"identity", "issue", "--ca-dir", c.caDir(), "--out", dir}, args...)
	if len(args) > 0 && args[0] == "--service" {
		issue = append(issue, "--host", "127.0.0.1")
	}
	r := no8sEnv(c.t, nil, "", issue...)
	if r.code != 0 {
		c.t.Fatalf("no8s identity issue %v: %d %s", args, r.code, r.stderr)
	}
	return dir
}

// identityArgs are a service's --identity-dir flag with identities on.
func (c *cluster) identityArgs(service string) []string {
	if c.idRoot == "" {
		return nil
	}
	return []string{"--identity-dir", c.credentials("--service", service)}
}

// reconcilerEnv is the environment giving the reconciler deployment name
// its credentials with identities on ($NO8S_IDENTITY_DIR: a certificate
// for reconciler/name claiming types, "Name/v1" each); nil with
// identities off.
func (c *cluster) reconcilerEnv(name string, types ...string) []string {
	c.t.Helper()
	if c.idRoot == "" {
		return nil
	}
	return []string{identity.EnvDir + "=" + c.credentials("--reconciler", name, "--types", strings.Join(types, ","))}
}

// releaseType frees types ("Name/v1") in the cluster's CA with `no8s
// identity release-type`, as an operator does before handing them to
// another reconciler (a type is issued to one reconciler at a time);
// nothing with identities off.
func (c *cluster) releaseType(types ...string) {
	c.t.Helper()
	if c.idRoot == "" {
		return
	}
	if r := no8sEnv(c.t, nil, "", append([]string{"identity", "release-type", "--ca-dir", c.caDir()}, types...)...); r.code != 0 {
		c.t.Fatalf("no8s identity release-type %v: %d %s", types, r.code, r.stderr)
	}
}

// dialStore connects to a gRPC listener of the store at addr (its main or
// its workers' address) as the identity issued with args (`no8s identity
// issue` flags: "--service", identity.Gateway for the public API's calls,
// "--reconciler", name, "--types", list at the workers' door): TLS with
// that certificate, checking that the server is service/store. With
// identities off, plaintext as every client was. The connection closes
// when the test ends.
func (c *cluster) dialStore(t *testing.T, addr string, args ...string) *grpc.ClientConn {
	t.Helper()
	var opts []grpc.DialOption
	if dir := c.credentials(args...); dir != "" {
		creds, err := identity.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		opts = authz.DialOptions(creds, identity.Store)
	}
	conn, err := grpcserver.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// healthAddr returns a free address for a process's probes, remembered
// under name.
func (c *cluster) healthAddr(name string) string {
	addr := freeAddr(c.t)
	if c.probes == nil {
		c.probes = map[string]string{}
	}
	c.probes[name] = "http://" + addr + "/readyz"
	return addr
}

// newCluster starts a nats-server process on a fresh database, with
// identities on unless NO8S_E2E_IDENTITIES=off (identitiesEnv), and NATS
// users with them unless NO8S_E2E_NATS_USERS=off (natsUsersEnv).
func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterUsers(t, natsUsersByDefault())
}

// newClusterUsers is newCluster, with NATS users (withNATSUsers) when
// natsUsers is true.
func newClusterUsers(t *testing.T, natsUsers bool) *cluster {
	t.Helper()
	c := &cluster{t: t, dbURL: testenv.Database(t), natsDir: t.TempDir(), natsAddr: freeAddr(t)}
	if identitiesByDefault() {
		c.withIdentities()
	}
	if natsUsers {
		c.withNATSUsers()
	}
	c.natsURL = "nats://" + c.natsAddr
	c.startNATS()
	pool, err := pgxpool.New(t.Context(), c.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c.pool = pool
	return c
}

// newSQLiteCluster starts a nats-server process; its stores use the
// embedded backend on a fresh SQLite file (c.pool is nil: read the
// database through backend). Identities are on as in newCluster.
func newSQLiteCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{t: t, dbFile: filepath.Join(t.TempDir(), "store.db"), natsDir: t.TempDir(), natsAddr: freeAddr(t)}
	if identitiesByDefault() {
		c.withIdentities()
		if natsUsersByDefault() {
			c.withNATSUsers()
		}
	}
	c.dbURL = store.SQLiteScheme + c.dbFile
	c.natsURL = "nats://" + c.natsAddr
	c.startNATS()
	return c
}

// backend is the cluster's database as the store's backend, for the
// checks that read it the store's way.
func (c *cluster) backend() storage.Backend { return c.openBackend(storage.Options{}) }

// openBackend opens the cluster's database as a store in this process,
// with opts; on the embedded backend a store of its own on the same file.
func (c *cluster) openBackend(opts storage.Options) storage.Backend {
	if c.pool != nil {
		return storage.Backend{Store: pgstore.New(c.pool, opts), Log: pgoutbox.New(c.pool), Name: "postgres", Close: func() {}}
	}
	s, err := litestore.Open(c.t.Context(), c.dbFile, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(c.t.Context(), slog.New(slog.DiscardHandler)); err != nil {
		c.t.Fatal(err)
	}
	return storage.Backend{Store: s, Log: s.EventLog(), Name: "sqlite", Close: func() { _ = s.Close() }}
}

func (c *cluster) startNATS() {
	host, port, _ := net.SplitHostPort(c.natsAddr)
	args := []string{"-a", host, "-p", port, "-js", "-sd", c.natsDir}
	if c.natsConf != "" {
		// JetStream and its storage are the file's; no monitoring port
		// (the file's is fixed: servers side by side would share it).
		args = []string{"-c", c.natsConf, "-a", host, "-p", port, "-m", "0"}
	}
	c.nats = start(c.t, "nats-server", natsServerBinary(c.t), args)
	waitFor(c.t, 10*time.Second, "nats-server", func() error {
		nc, err := nats.Connect(c.natsURL, c.natsOptions()...)
		if err != nil {
			return err
		}
		nc.Close()
		return nil
	})
}

// startStore starts a store process (or restarts one on addr).
func (c *cluster) startStore(addr string) *proc {
	return c.startStoreBin(addr, filepath.Join(binDir, "no8s-store"))
}

// startStoreBin is startStore with the store binary bin and env added to
// the process's environment (a build with failpoints, say).
func (c *cluster) startStoreBin(addr, bin string, env ...string) *proc {
	if addr == "" {
		addr = freeAddr(c.t)
		c.storeAddrs = append(c.storeAddrs, addr)
	}
	p := start(c.t, "store", bin,
		append([]string{"--listen", addr, "--worker-listen", c.workerAddr(addr), "--database-url", c.dbURL, "--nats-url", c.natsURL,
			"--health-listen", c.healthAddr(fmt.Sprintf("store-%d", len(c.stores)))}, c.identityArgs(identity.Store)...), append([]string{"NO8S_LOG_LEVEL=debug"}, env...)...)
	c.stores = append(c.stores, p)
	waitTCP(c.t, addr, p)
	waitTCP(c.t, c.workerAddr(addr), p)
	return p
}

// workerAddr returns the worker address of the store at storeAddr: where
// reconcilers connect, and only the WorkerService is served. The first
// call picks a free one.
func (c *cluster) workerAddr(storeAddr string) string {
	if c.workerAddrs == nil {
		c.workerAddrs = map[string]string{}
	}
	if a, ok := c.workerAddrs[storeAddr]; ok {
		return a
	}
	a := freeAddr(c.t)
	c.workerAddrs[storeAddr] = a
	return a
}

func (c *cluster) startAdmission(storeAddr string) string {
	addr := freeAddr(c.t)
	p := start(c.t, "admission", filepath.Join(binDir, "no8s-admission"), append([]string{"--listen", addr, "--store-addr", storeAddr, "--nats-url", c.natsURL,
		"--health-listen", c.healthAddr(fmt.Sprintf("admission-%d", len(c.admissions))), "--outbound-allow", "loopback,private"}, c.identityArgs(identity.Admission)...))
	waitTCP(c.t, addr, p)
	c.admissions = append(c.admissions, addr)
	c.admissionProcs = append(c.admissionProcs, p)
	return addr
}

// startGateway starts a gateway and returns its base URL.
func (c *cluster) startGateway(storeAddr, admissionAddr string) string {
	return c.startGatewayArgs(storeAddr, admissionAddr)
}

// noRateLimit turns the gateway's requests-per-identity limit off: the
// tests send hundreds of writes a second with the administrator's token
// (chaos, metrics cardinality, outbox) and poll every resource of a load
// without pauses, as no client should; the limit has its own tests in the
// gateway package. The other limits keep their defaults.
const noRateLimit = "--rate-limit=0"

// startGatewayArgs is startGateway with extra flags (--oidc-issuer, ...).
func (c *cluster) startGatewayArgs(storeAddr, admissionAddr string, extra ...string) string {
	addr := freeAddr(c.t)
	args := append([]string{"--listen", addr, "--store-addr", storeAddr, "--admission-addr", admissionAddr, "--nats-url", c.natsURL, "--outbound-allow", "loopback,private",
		noRateLimit}, c.identityArgs(identity.Gateway)...)
	args = append(args, extra...)
	if c.idRoot != "" {
		// With identities on, registry-sync and the tenant reconciler write
		// through the service listener (apiURL).
		saddr := freeAddr(c.t)
		args = append(args, "--service-listen", saddr)
		c.serviceGateways = append(c.serviceGateways, "https://"+saddr)
	}
	gp := start(c.t, "gateway", filepath.Join(binDir, "no8s-gateway"), args)
	base := "http://" + addr
	waitFor(c.t, 20*time.Second, "gateway health", func() error {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("health %d", resp.StatusCode)
		}
		return nil
	})
	if c.probes == nil {
		c.probes = map[string]string{}
	}
	c.probes[fmt.Sprintf("gateway-%d", len(c.gateways))] = base + "/readyz"
	c.gateways = append(c.gateways, base)
	c.gatewayProcs = append(c.gatewayProcs, gp)
	return base
}

// startScheduler starts a scheduler process named holder (its name in the
// leadership lease) with the given lease (whole seconds; 0: the default 6 s).
func (c *cluster) startScheduler(storeAddr, holder string, lease time.Duration) *proc {
	return c.startSchedulerArgs(storeAddr, holder, lease)
}

// startSchedulerArgs is startScheduler with extra flags. Its garbage
// collector writes through the first gateway (its service listener with
// identities on), when one runs.
func (c *cluster) startSchedulerArgs(storeAddr, holder string, lease time.Duration, extra ...string) *proc {
	args := append([]string{"--store-addr", storeAddr, "--nats-url", c.natsURL, "--holder", holder, "--health-listen", c.healthAddr("scheduler-" + holder)},
		c.identityArgs(identity.Scheduler)...)
	if lease > 0 {
		args = append(args, "--lease", lease.String())
	}
	if len(c.gateways) > 0 {
		args = append(args, "--api-url", c.apiURL())
	}
	args = append(args, extra...)
	return start(c.t, "scheduler-"+holder, filepath.Join(binDir, "no8s-scheduler"), args, "NO8S_LOG_LEVEL=debug")
}

// startReconciler runs the noop reconciler (the real no8s-reconciler
// binary) serving types ("Type/v1") and waits until the registry says it
// serves them, so that resources of those types can be created.
func (c *cluster) startReconciler(storeAddr string, types ...string) *proc {
	c.t.Helper()
	return c.startReconcilerArgs("noop", storeAddr, nil, "noop", "--types", strings.Join(types, ","))
}

// startReconcilerArgs runs `no8s-reconciler <args>` as replica name, with
// extra environment variables, and waits until the reconciler it names
// serves every type it registers (for noop: --types; for
// postgres-database: PostgresDatabase/v1; for github-workflow:
// GitHubWorkflow/v1; for tenant: Tenant/v1). It connects to the worker
// address of the store at storeAddr; postgres-database and github-workflow
// register their types, and tenant writes, through the first gateway. With
// identities on it holds the credentials of reconciler/<its registered
// name> (noop: --name, default noop) claiming exactly those types.
func (c *cluster) startReconcilerArgs(name, storeAddr string, env []string, args ...string) *proc {
	c.t.Helper()
	full := append(slices.Clone(args), "--nats-url", c.natsURL, "--store-addr", c.workerAddr(storeAddr),
		"--health-listen", c.healthAddr("reconciler-"+name), "--replica-id", name, "--log-level", "debug")
	if (args[0] == "postgres-database" || args[0] == "github-workflow" || args[0] == "tenant") && len(c.gateways) > 0 {
		api := c.gateways[0]
		if args[0] == "tenant" {
			api = c.apiURL()
		}
		full = append(full, "--api-url", api)
	}
	// The reconciler's registered name and types: its credentials name
	// both (with identities on).
	reconciler, want := args[0], []string(nil)
	for i, a := range args {
		if i+1 < len(args) && args[0] == "noop" {
			switch a {
			case "--types":
				want = strings.Split(args[i+1], ",")
			case "--name":
				reconciler = args[i+1]
			}
		}
	}
	switch args[0] {
	case "postgres-database":
		want = []string{"PostgresDatabase/v1"}
	case "github-workflow":
		want = []string{"GitHubWorkflow/v1"}
	case "tenant":
		want = []string{"Tenant/v1"}
	}
	env = append(slices.Clone(env), c.reconcilerEnv(reconciler, want...)...)
	p := start(c.t, "reconciler-"+name, filepath.Join(binDir, "no8s-reconciler"), full, env...)
	_, nc := c.jetstream()
	waitFor(c.t, 20*time.Second, "reconciler "+name+" registered", func() error {
		if err := p.exited(); err != nil {
			return err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		reg, err := reconcilers.Read(c.t.Context(), js)
		if err != nil {
			return err
		}
		for _, w := range want {
			n, v, _ := strings.Cut(w, "/")
			if reg.Owners[reconcilers.TypeRef{Name: n, Version: v}] == "" {
				return fmt.Errorf("%s not served yet", w)
			}
		}
		return nil
	})
	return p
}

// startAll starts one store, one admission and one gateway.
func (c *cluster) startAll() string {
	c.startStore("")
	adm := c.startAdmission(c.storeAddrs[0])
	return c.startGateway(c.storeAddrs[0], adm)
}

func (c *cluster) jetstream() (jetstream.JetStream, *nats.Conn) {
	nc, err := nats.Connect(c.natsURL, c.natsOptions()...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return js, nc
}

// count returns a row count from the database.
func (c *cluster) count(query string, args ...any) int {
	c.t.Helper()
	var n int
	if c.pool == nil { // the embedded store: read its file
		if c.sqlite == nil {
			db, err := sql.Open("sqlite", "file:"+c.dbFile+"?mode=ro&_pragma=busy_timeout(5000)")
			if err != nil {
				c.t.Fatal(err)
			}
			c.t.Cleanup(func() { _ = db.Close() })
			c.sqlite = db
		}
		// SQLite numbers parameters ?1, ?2 where PostgreSQL has $1, $2.
		if err := c.sqlite.QueryRowContext(c.t.Context(), strings.ReplaceAll(query, "$", "?"), args...).Scan(&n); err != nil {
			c.t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	if err := c.pool.QueryRow(c.t.Context(), query, args...).Scan(&n); err != nil {
		c.t.Fatalf("%s: %v", query, err)
	}
	return n
}

func waitTCP(t *testing.T, addr string, p *proc) {
	t.Helper()
	waitFor(t, 20*time.Second, p.name+" on "+addr, func() error {
		if err := p.exited(); err != nil {
			return err
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// waitFor polls f until it succeeds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// response is an HTTP answer with its decoded JSON body.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response %d is not a JSON object: %s", r.status, r.body)
	}
	return m
}

func (r response) list(t *testing.T) []map[string]any {
	t.Helper()
	var l []map[string]any
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("response %d is not a JSON array: %s", r.status, r.body)
	}
	return l
}

var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func do(t *testing.T, method, url string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// curl runs a curl command line as a user would type it, with $BASE
// standing for the gateway, and returns the status and body. A command
// line that sends no Authorization header gets the administrator's token.
func curl(t *testing.T, base, cmdline string) response {
	t.Helper()
	return curlAs(t, base, withTokenHeader(cmdline))
}

// curlAnonymous is curl without a token: against a gateway with
// --auth=none.
func curlAnonymous(t *testing.T, base, cmdline string) response {
	t.Helper()
	return curlAs(t, base, cmdline)
}

// curlAs runs the command line as it is.
func curlAs(t *testing.T, base, cmdline string) response {
	t.Helper()
	cmdline = strings.ReplaceAll(cmdline, "http://localhost:8000", base)
	script := cmdline + ` -s -o "$OUT" -w '%{http_code}'`
	out := filepath.Join(t.TempDir(), "body")
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "OUT="+out, "NO8S_TOKEN="+adminToken)
	code, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, cmdline)
	}
	var status int
	fmt.Sscan(string(code), &status)
	body, _ := os.ReadFile(out)
	return response{status: status, body: body}
}
