package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/resource"
)

// stallItemLease is the scheduler's item lease in these tests: the bound
// after which work that no worker leased is reported
// (ReconcilerNotResponding). The checks wait far longer than it.
const stallItemLease = 3 * time.Second

// startStallScheduler starts a scheduler with the short item lease and a
// quick registry poll.
func (c *cluster) startStallScheduler() *proc {
	return start(c.t, "scheduler-stall", filepath.Join(binDir, "no8s-scheduler"),
		append([]string{"--store-addr", c.storeAddrs[0], "--nats-url", c.natsURL, "--holder", "stall",
			"--item-lease", stallItemLease.String(), "--liveness-poll", "500ms", "--health-listen", c.healthAddr("scheduler-stall")},
			c.identityArgs(identity.Scheduler)...),
		"NO8S_LOG_LEVEL=debug")
}

// startNoop starts the noop reconciler for DatabaseCluster/v1 as replica
// name at storeAddr (a store's worker address, or a proxy's), with a short
// reconcile lease, without waiting for it: it returns the process and its
// /readyz URL.
func (c *cluster) startNoop(name, storeAddr string) (*proc, string) {
	c.t.Helper()
	health := c.healthAddr("reconciler-" + name)
	p := start(c.t, "reconciler-"+name, filepath.Join(binDir, "no8s-reconciler"),
		[]string{"noop", "--types", "DatabaseCluster/v1", "--nats-url", c.natsURL, "--store-addr", storeAddr,
			"--health-listen", health, "--replica-id", name, "--log-level", "debug", "--lease", "5s"},
		c.reconcilerEnv("noop", "DatabaseCluster/v1")...)
	return p, "http://" + health + "/readyz"
}

// logLines returns the lines of p's log that contain every one of want.
func (p *proc) logLines(t *testing.T, want ...string) []string {
	t.Helper()
	b, err := os.ReadFile(p.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		all := true
		for _, w := range want {
			all = all && strings.Contains(line, w)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// readyz returns the status code and body of a GET of url.
func readyz(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// applyClusters applies DatabaseCluster/v1 resources named names with
// storage_gb gb.
func applyClusters(t *testing.T, base string, gb int, names ...string) cliResult {
	t.Helper()
	var docs []string
	for _, n := range names {
		docs = append(docs, fmt.Sprintf("kind: Resource\ntype: DatabaseCluster/v1\nmetadata:\n  name: %s\nspec:\n  engine: postgres\n  storage_gb: %d\n", n, gb))
	}
	f := filepath.Join(t.TempDir(), "clusters.yaml")
	if err := os.WriteFile(f, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return no8s(t, base, "", "apply", "-f", f)
}

// getCluster reads one DatabaseCluster/v1 through the CLI.
func getCluster(t *testing.T, base, name string) client.Resource {
	t.Helper()
	var r client.Resource
	out := ok(t, base, "get", "DatabaseCluster/v1", name, "-o", "json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("get -o json: %v\n%s", err, out)
	}
	return r
}

// reconcilerAvailable returns r's ReconcilerAvailable condition (zero when
// it has none).
func reconcilerAvailable(r client.Resource) client.Condition {
	for _, cd := range r.Conditions {
		if cd.Type == resource.ConditionReconcilerAvailable {
			return cd
		}
	}
	return client.Condition{}
}

// TestStallWrongStoreAddress: a reconciler started at a store address where
// nothing listens says so (/readyz 503 naming the address, one WARN however
// often it retries) and does not register, so creates of its type are
// refused with no_reconciler; restarted at the right address, creates
// succeed and reach Ready.
func TestStallWrongStoreAddress(t *testing.T) {
	mostlyWaits(t)
	c := newCluster(t)
	base := c.startAll()
	c.startStallScheduler()
	ok(t, base, "apply", "-f", filepath.Join(examples, "databasecluster.yaml"))

	wrong := freeAddr(t) // nothing listens there
	p, ready := c.startNoop("wrong", wrong)
	waitFor(t, 30*time.Second, "/readyz 503 naming "+wrong, func() error {
		if err := p.exited(); err != nil {
			return err
		}
		code, body, err := readyz(ready)
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(body, wrong) || !strings.Contains(body, `"store"`) {
			return fmt.Errorf("/readyz %d %s", code, body)
		}
		return nil
	})
	// It retries (one DEBUG line per check) and warns once.
	waitFor(t, 60*time.Second, "five retries logged", func() error {
		if n := len(p.logLines(t, "level=DEBUG", "still unreachable", wrong)); n < 5 {
			return fmt.Errorf("%d retries so far", n)
		}
		return nil
	})
	if warns := p.logLines(t, "level=WARN"); len(warns) != 1 || !strings.Contains(warns[0], wrong) {
		t.Fatalf("want exactly one WARN, naming %s; got %d:\n%s", wrong, len(warns), strings.Join(warns, ""))
	}
	if code, body, _ := readyz(ready); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz after the retries: %d %s", code, body)
	}
	r := applyClusters(t, base, 10, "stalled")
	if r.code == 0 || !strings.Contains(r.stderr, "no_reconciler") {
		t.Fatalf("a create while the reconciler cannot reach the store: %+v", r)
	}

	p.stop(syscall.SIGTERM, 10*time.Second)
	c.startReconcilerArgs("noop", c.storeAddrs[0], nil, "noop", "--types", "DatabaseCluster/v1")
	if r := applyClusters(t, base, 10, "stalled"); r.code != 0 {
		t.Fatalf("a create once the reconciler reaches the store: %+v", r)
	}
	ok(t, base, "wait", "DatabaseCluster/v1", "stalled", "--for=condition=Ready", "--timeout=60s")
}

// TestStallReconcilerNotResponding: resources whose reconciler stops
// taking work (SIGKILLed, or its link to the store cut by a proxy) get,
// once their spec changes and the work waits longer than the scheduler's
// item lease, a Warning Event and a condition of reason
// ReconcilerNotResponding naming the reconciler and its replicas, shown by
// no8s describe and in no8s wait's timeout message; once the reconciler is
// back they become Ready with nothing else done.
func TestStallReconcilerNotResponding(t *testing.T) {
	mostlyWaits(t)
	for _, tc := range []struct {
		name string
		cut  func(c *cluster, p *proc, px *tcpProxy)
		fix  func(c *cluster, px *tcpProxy)
		// unserved: the spec changes once the type has no live
		// reconciler; else (killed) while its registration lives on.
		unserved bool
		// says is what the condition's message says.
		says string
	}{
		{"killed", func(_ *cluster, p *proc, _ *tcpProxy) { p.kill9() }, func(c *cluster, px *tcpProxy) { c.startNoop("stall", px.addr()) },
			false, "has not been leased by a worker"},
		{"store link cut", func(_ *cluster, _ *proc, px *tcpProxy) { px.setCut(true) }, func(_ *cluster, px *tcpProxy) { px.setCut(false) },
			true, "no live reconciler serves DatabaseCluster/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			base := c.startAll()
			c.startStallScheduler()
			ok(t, base, "apply", "-f", filepath.Join(examples, "databasecluster.yaml"))
			px := newTCPProxy(t, c.workerAddr(c.storeAddrs[0]))
			p, ready := c.startNoop("stall", px.addr())
			names := []string{"first", "second"}
			waitFor(t, 30*time.Second, "the reconciler ready", func() error {
				if err := p.exited(); err != nil {
					return err
				}
				if code, body, err := readyz(ready); err != nil || code != http.StatusOK {
					return fmt.Errorf("/readyz %d %s %v", code, body, err)
				}
				return nil
			})
			waitFor(t, 30*time.Second, "creates accepted", func() error {
				if r := applyClusters(t, base, 10, names...); r.code != 0 {
					return fmt.Errorf("%+v", r)
				}
				return nil
			})
			for _, n := range names {
				ok(t, base, "wait", "DatabaseCluster/v1", n, "--for=condition=Ready", "--timeout=60s")
			}

			tc.cut(c, p, px)
			if tc.unserved {
				// Its registration goes at once: the scheduler finds the
				// type unserved (condition NoLiveReconciler while nothing
				// waits), and creates of the type are refused.
				for _, n := range names {
					waitFor(t, 60*time.Second, n+" NoLiveReconciler", func() error {
						if cd := reconcilerAvailable(getCluster(t, base, n)); cd.Reason != resource.ReasonNoLiveReconciler {
							return fmt.Errorf("ReconcilerAvailable %+v", cd)
						}
						return nil
					})
				}
				tries := 0
				waitFor(t, 60*time.Second, "creates refused with no_reconciler", func() error {
					tries++
					if r := applyClusters(t, base, 10, fmt.Sprintf("new-%d", tries)); r.code == 0 || !strings.Contains(r.stderr, "no_reconciler") {
						return fmt.Errorf("%+v", r)
					}
					return nil
				})
			}
			if r := applyClusters(t, base, 20, names...); r.code != 0 {
				t.Fatalf("spec update: %+v", r)
			}
			for _, n := range names {
				waitFor(t, 90*time.Second, n+" ReconcilerNotResponding", func() error {
					cd := reconcilerAvailable(getCluster(t, base, n))
					if cd.Reason != resource.ReasonReconcilerNotResponding || cd.Status != "False" {
						return fmt.Errorf("ReconcilerAvailable %+v", cd)
					}
					if !strings.Contains(cd.Message, tc.says) || !strings.Contains(cd.Message, `reconciler "noop"`) || !strings.Contains(cd.Message, "stall (last heartbeat") {
						return fmt.Errorf("the condition does not say %q and name the reconciler and its replica: %s", tc.says, cd.Message)
					}
					return nil
				})
				desc := ok(t, base, "describe", "DatabaseCluster/v1", n)
				expectOut(t, "describe "+n, desc, "ReconcilerAvailable", resource.ReasonReconcilerNotResponding, "Warning", "scheduler")
				w := no8s(t, base, "", "wait", "DatabaseCluster/v1", n, "--for=condition=Ready", "--timeout=2s")
				if w.code == 0 || !strings.Contains(w.stderr, "timed out") || !strings.Contains(w.stderr, resource.ReasonReconcilerNotResponding) || !strings.Contains(w.stderr, `"noop"`) {
					t.Fatalf("wait's timeout message does not say why: %+v", w)
				}
				t.Logf("wait: %s", w.stderr)
			}

			tc.fix(c, px)
			for _, n := range names {
				ok(t, base, "wait", "DatabaseCluster/v1", n, "--for=condition=Ready", "--timeout=120s")
				r := getCluster(t, base, n)
				var spec struct {
					StorageGB int `json:"storage_gb"`
				}
				if err := json.Unmarshal(r.Spec, &spec); err != nil || r.ObservedGeneration != r.Generation || spec.StorageGB != 20 {
					t.Fatalf("%s after the fix: generation %d observed %d spec %s (%v)", n, r.Generation, r.ObservedGeneration, r.Spec, err)
				}
			}
		})
	}
}

// tcpProxy forwards TCP connections to a target until cut: cutting closes
// the connections it carries and refuses new ones (accepted, then closed)
// until it is restored.
type tcpProxy struct {
	t      *testing.T
	lis    net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &tcpProxy{t: t, lis: lis, target: target, conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	wg.Go(px.serve)
	t.Cleanup(func() {
		_ = lis.Close()
		px.setCut(true)
		wg.Wait()
	})
	return px
}

func (px *tcpProxy) addr() string { return px.lis.Addr().String() }

// setCut cuts (closing every carried connection) or restores the link.
func (px *tcpProxy) setCut(cut bool) {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.cut = cut
	if cut {
		for conn := range px.conns {
			_ = conn.Close()
		}
		clear(px.conns)
	}
}

// track remembers conns, or closes them when the link is cut.
func (px *tcpProxy) track(conns ...net.Conn) bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.cut {
		for _, conn := range conns {
			_ = conn.Close()
		}
		return false
	}
	for _, conn := range conns {
		px.conns[conn] = struct{}{}
	}
	return true
}

func (px *tcpProxy) serve() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		in, err := px.lis.Accept()
		if err != nil {
			return
		}
		if !px.track(in) {
			continue
		}
		wg.Go(func() {
			out, err := net.DialTimeout("tcp", px.target, 5*time.Second)
			if err != nil {
				_ = in.Close()
				return
			}
			if !px.track(out) {
				_ = in.Close()
				return
			}
			var pipes sync.WaitGroup
			pipes.Go(func() { _, _ = io.Copy(out, in); _ = out.Close() })
			pipes.Go(func() { _, _ = io.Copy(in, out); _ = in.Close() })
			pipes.Wait()
		})
	}
}
