package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// noPostgreSQL is the environment of a machine without PostgreSQL: no
// NO8S_DATABASE_URL or DATABASE_URL, and every PostgreSQL setting a program might fall back on
// pointing at 127.0.0.1:1, where nothing listens, so that any use of
// PostgreSQL fails.
func noPostgreSQL() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "NO8S_DATABASE_URL=") || strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "NO8S_TEST_DATABASE_URL=")
	})
	return append(env, "PGHOST=127.0.0.1", "PGPORT=1", "NO8S_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2")
}

// TestEmbeddedWithoutPostgreSQL is a newcomer's machine without PostgreSQL
// (issue 11): `make run`'s command (no8s dev) starts on the embedded store,
// the seed README's curl flow works with the noop reconciler, and
// examples/hello-reconciler's tests pass against the no8s binary.
func TestEmbeddedWithoutPostgreSQL(t *testing.T) {
	env := noPostgreSQL()
	state := filepath.Join(t.TempDir(), "state")
	// make run runs `bin/no8s dev $(ARGS)`: the same command, on free ports
	// and a temporary data directory instead of the defaults.
	addrs := startDev(t, state, env)
	if want := "sqlite:" + filepath.Join(state, "store.db"); addrs.Store != want {
		t.Fatalf("no8s dev's store is %q, want the embedded one %q", addrs.Store, want)
	}
	base := addrs.APIURL
	c := &cluster{t: t, dbFile: filepath.Join(state, "store.db")}

	seedFlow(t, base, curl, c.count, func() {
		startEnv(t, "reconciler-noop", filepath.Join(binDir, "no8s-reconciler"), []string{"noop", "--types", "DatabaseCluster/v1",
			"--nats-url", addrs.NATSURL, "--store-addr", addrs.WorkerAddr, "--health-listen", "off", "--identity-ca", addrs.CADir}, env)
		waitFor(t, 20*time.Second, "the noop reconciler live", func() error {
			r := do(t, "GET", base+"/api/v1/reconcilers", nil)
			if r.status != 200 || !strings.Contains(string(r.body), `"DatabaseCluster"`) {
				return fmt.Errorf("GET /reconcilers: %d %s", r.status, r.body)
			}
			return nil
		})
	})
	// no8s dev serves Tenants with the tenant reconciler by default.
	waitFor(t, 20*time.Second, "the tenant reconciler live in no8s dev", func() error {
		r := do(t, "GET", base+"/api/v1/reconcilers", nil)
		var regs []struct {
			Name  string `json:"name"`
			Types []struct {
				Name, Version string
			} `json:"types"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &regs) != nil {
			return fmt.Errorf("GET /reconcilers: %d %s", r.status, r.body)
		}
		for _, reg := range regs {
			for _, ty := range reg.Types {
				if reg.Name == "tenant" && ty.Name == "Tenant" && ty.Version == "v1" {
					return nil
				}
			}
		}
		return fmt.Errorf("no reconciler tenant serving Tenant/v1: %s", r.body)
	})
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("the data directory: %v", err)
	}

	// The example reconciler's own tests, as its README runs them, against
	// the same no8s binary and without PostgreSQL.
	ex := exec.Command("go", "test", "-count=1", "./...")
	ex.Dir = filepath.Join("..", "..", "examples", "hello-reconciler")
	ex.Env = append(env, "GOWORK=off", "NO8S_BIN="+filepath.Join(binDir, "no8s"))
	out, err := ex.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/hello-reconciler: go test: %v\n%s", err, out)
	}
	t.Logf("examples/hello-reconciler without PostgreSQL: %s", strings.TrimSpace(string(out)))
	t.Logf("no8s dev on the embedded store (%s), API on %s", addrs.Store, addrs.APIURL)
}

// TestLibraryModulesStayLean: a reconciler author's module pulls in none of
// the control plane's dependencies, through the SDK, its test kit or their
// tests (issue 11).
func TestLibraryModulesStayLean(t *testing.T) {
	// The Prometheus client library is the metrics plumbing of the platform
	// (libs/platform/metrics) that the SDK's worker runs on; the Prometheus
	// server (promtool's module) is never a dependency, and libs/api, the
	// vocabulary every module imports, has no metrics at all.
	common := []string{"github.com/jackc/pgx", "github.com/labstack/echo", "github.com/pressly/goose",
		"github.com/santhosh-tekuri/jsonschema", "github.com/nats-io/nats-server", "modernc.org/sqlite", "github.com/no8s/no8s/services",
		"github.com/prometheus/prometheus"}
	for _, m := range []struct {
		dir, gowork string
		extra       []string
	}{
		{"../../libs/sdk", "", nil}, {"../../libs/sdk/testkit", "", nil}, {"../../examples/hello-reconciler", "off", nil},
		// The platform's infrastructure, which the SDK builds on: never the SDK.
		// (grpc-gateway comes with the OTLP exporter, a module of its own.)
		{"../../libs/platform", "", []string{"github.com/no8s/no8s/libs/sdk", "github.com/google/go-github", "github.com/grpc-ecosystem/grpc-gateway"}},
		{"../../libs/api", "", []string{"github.com/prometheus/", "google.golang.org/grpc"}},
		// The API client: the standard library and libs/api only.
		{"../../libs/client", "off", []string{"github.com/prometheus/", "github.com/google/go-github", "google.golang.org/grpc",
			"github.com/nats-io", "google.golang.org/protobuf", "github.com/no8s/no8s/libs/sdk", "github.com/no8s/no8s/proto"}},
	} {
		forbidden := append(slices.Clone(common), m.extra...)
		cmd := exec.Command("go", "list", "-deps", "-test", "./...")
		cmd.Dir = m.dir
		cmd.Env = os.Environ()
		if m.gowork != "" {
			cmd.Env = append(cmd.Env, "GOWORK="+m.gowork)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: go list: %v", m.dir, err)
		}
		var bad []string
		for _, pkg := range strings.Fields(string(out)) {
			if slices.ContainsFunc(forbidden, func(f string) bool { return strings.HasPrefix(pkg, f) }) {
				bad = append(bad, pkg)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s depends on %s", m.dir, strings.Join(bad, ", "))
		} else {
			t.Logf("%s: %d packages, none of %s", m.dir, len(strings.Fields(string(out))), strings.Join(forbidden, ", "))
		}
	}
}

// devAddrs is what `no8s dev` writes to its --ready-file.
type devAddrs struct {
	APIURL     string `json:"api_url"`
	NATSURL    string `json:"nats_url"`
	StoreAddr  string `json:"store_addr"`
	WorkerAddr string `json:"worker_addr"`
	DataDir    string `json:"data_dir"`
	Store      string `json:"store"`
	MetricsURL string `json:"metrics_url"`
	CADir      string `json:"ca_dir"`
	// CAFile is what a client of an https APIURL trusts (no8s dev --tls).
	CAFile string `json:"ca_file"`
	// The developer's NATS users no8s dev issues (files of NATS credentials).
	NATSPublisherCreds string `json:"nats_publisher_creds"`
	NATSReaderCreds    string `json:"nats_reader_creds"`
	// TokenFile holds the administrator's API token.
	TokenFile string `json:"token_file"`
}

// startDevServing runs `no8s dev` (startDev) with type typ/v1 of schema
// created and the noop reconciler serving it, and waits until noop and
// registry-sync are live; it returns no8s dev's addresses and process.
func startDevServing(t *testing.T, env []string, typ string, schema map[string]any) (devAddrs, *proc) {
	t.Helper()
	addrs, dev := startDevProc(t, filepath.Join(t.TempDir(), "state"), freeAddr(t), "", env)
	base := addrs.APIURL
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": typ, "version": "v1", "schema": schema}); r.status != 201 {
		t.Fatalf("create %s: %d %s", typ, r.status, r.body)
	}
	startEnv(t, "reconciler-noop", filepath.Join(binDir, "no8s-reconciler"), []string{"noop", "--types", typ + "/v1",
		"--nats-url", addrs.NATSURL, "--store-addr", addrs.WorkerAddr, "--health-listen", "off", "--identity-ca", addrs.CADir}, env)
	waitFor(t, 30*time.Second, "the noop reconciler and registry-sync live", func() error {
		r := do(t, "GET", base+"/api/v1/reconcilers", nil)
		if r.status != 200 || !strings.Contains(string(r.body), `"`+typ+`"`) || !strings.Contains(string(r.body), `"HttpSource"`) {
			return fmt.Errorf("GET /reconcilers: %d %s", r.status, r.body)
		}
		return nil
	})
	return addrs, dev
}

// startDev runs `no8s dev` (make run's command) with its state in dataDir,
// on free ports, with env, and waits until it is ready.
func startDev(t *testing.T, dataDir string, env []string) devAddrs {
	t.Helper()
	addrs, _ := startDevProc(t, dataDir, freeAddr(t), "", env)
	return addrs
}

// startDevProc runs `no8s dev` with its API on listen and its embedded NATS
// on natsPort ("" picks a free one), and extra flags; it waits until it is
// ready and returns its addresses and process. The same call again, after
// the process died, restarts it on the same state and addresses.
func startDevProc(t *testing.T, dataDir, listen, natsPort string, env []string, extra ...string) (devAddrs, *proc) {
	t.Helper()
	if err := seedDevToken(dataDir); err != nil {
		t.Fatal(err)
	}
	return runDev(t, dataDir, listen, natsPort, env, extra...)
}

// runDev is startDevProc without the administrator's token seeded: no8s
// dev makes its own at first start.
func runDev(t *testing.T, dataDir, listen, natsPort string, env []string, extra ...string) (devAddrs, *proc) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	if natsPort == "" {
		var err error
		if _, natsPort, err = net.SplitHostPort(freeAddr(t)); err != nil {
			t.Fatal(err)
		}
	}
	dev := startEnv(t, "no8s-dev", filepath.Join(binDir, "no8s"), append([]string{"dev", "--data-dir", dataDir,
		"--listen", listen, "--nats-port", natsPort, "--store-addr", "127.0.0.1:0", "--admission-addr", "127.0.0.1:0",
		"--worker-listen", "127.0.0.1:0", "--ready-file", ready, "--cli-config", filepath.Join(t.TempDir(), "cli.yaml"),
		// The tests' clients are one identity on one address, some of
		// them hundreds of requests a second: the limits per caller are
		// the gateway tests' (a test's own --rate-limit comes after).
		noRateLimit}, extra...), env)
	var addrs devAddrs
	waitFor(t, 60*time.Second, "no8s dev ready", func() error {
		if err := dev.exited(); err != nil {
			return err
		}
		data, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &addrs)
	})
	return addrs, dev
}
