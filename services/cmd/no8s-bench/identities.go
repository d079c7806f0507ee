package main

// identities.go runs the bench's control plane with identities on (the
// -identities flag): a CA in the bench's work directory, a credential per
// service and per reconciler deployment, mutual TLS on every internal gRPC
// listener and the policy enforced, as a production installation runs.
// -nats-auth adds NATS users: nats-server runs with the project's
// configuration (deploy/nats/nats-server.conf) and takes only the CA's
// users, each with its identity's permissions; the bench's own
// connections are a NATS admin's.

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

var (
	identitiesFlag = flag.Bool("identities", false, "run every process with an identity: mutual TLS on internal gRPC and the call policy enforced")
	natsAuthFlag   = flag.Bool("nats-auth", false, "with -identities: nats-server takes only the CA's NATS users, each with its identity's permissions")
)

// benchIdentities issues the stack's credentials, each once.
type benchIdentities struct {
	root string
	mu   sync.Mutex
	ca   *identityca.CA
	dirs map[string]string
}

// credentials returns the credentials directory of id, issued on first
// use; "" with identities off.
func (e *benchEnv) credentials(id identity.ID) (string, error) {
	if !*identitiesFlag {
		return "", nil
	}
	b := &e.ids
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := e.ensureCA(); err != nil {
		return "", err
	}
	key := id.String() + "|" + strings.Join(id.Types, ",")
	if dir, ok := b.dirs[key]; ok {
		return dir, nil
	}
	dir := filepath.Join(b.root, fmt.Sprintf("%d-%s-%s", len(b.dirs), id.Kind, id.Name))
	issue := b.ca.IssueTo
	if id.Kind.NATSOnly() {
		issue = func(dir string, id identity.ID, now time.Time, valid time.Duration, _ ...string) error {
			return b.ca.IssueNATSTo(dir, id, now, valid)
		}
	}
	if err := issue(dir, id, time.Now(), identityca.DefaultLeafValidity); err != nil {
		return "", fmt.Errorf("issue %s: %w", id, err)
	}
	b.dirs[key] = dir
	return dir, nil
}

// serviceArgs are the --identity-dir flag of the control plane service
// name, nothing with identities off.
func (e *benchEnv) serviceArgs(name string, args []string) ([]string, error) {
	dir, err := e.credentials(identity.ServiceID(name))
	if err != nil || dir == "" {
		return args, err
	}
	return append(args, "--identity-dir", dir), nil
}

// reconcilerEnv is the NO8S_IDENTITY_DIR of the reconciler deployment
// name serving types, nothing with identities off.
func (e *benchEnv) reconcilerEnv(name string, types []string) ([]string, error) {
	dir, err := e.credentials(identity.ID{Kind: identity.Reconciler, Name: name, Types: types})
	if err != nil || dir == "" {
		return nil, err
	}
	return []string{identity.EnvDir + "=" + dir}, nil
}

// ensureCA creates the bench's CA on first use, with NATS keys under
// -nats-auth; the caller holds e.ids.mu.
func (e *benchEnv) ensureCA() error {
	b := &e.ids
	if b.ca != nil {
		return nil
	}
	ca, err := identityca.New(time.Now(), identityca.DefaultCAValidity)
	if err != nil {
		return err
	}
	root := filepath.Join(e.workDir, "identities")
	if *natsAuthFlag {
		if _, err := ca.EnableNATS(filepath.Join(root, "ca")); err != nil {
			return err
		}
	}
	b.ca, b.root, b.dirs = ca, root, map[string]string{}
	return nil
}

// natsServerArgs are nats-server's arguments for a server on host:port
// storing in dir: under -nats-auth the project's configuration beside the
// CA's (no8s identity nats-config), written into dir.
func (e *benchEnv) natsServerArgs(host, port, dir string) ([]string, error) {
	if !*natsAuthFlag {
		return []string{"-a", host, "-p", port, "-js", "-sd", dir}, nil
	}
	e.ids.mu.Lock()
	defer e.ids.mu.Unlock()
	if err := e.ensureCA(); err != nil {
		return nil, err
	}
	srv, err := e.ids.ca.NATSServer(time.Now())
	if err != nil {
		return nil, err
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	conf, err := os.ReadFile(filepath.Join(root, "deploy", "nats", "nats-server.conf"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf = []byte(strings.Replace(string(conf), "store_dir: /data", "store_dir: "+strconv.Quote(filepath.Join(dir, "js")), 1))
	if err := os.WriteFile(filepath.Join(dir, "no8s-auth.conf"), srv.Config(), 0o644); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(path, conf, 0o644); err != nil {
		return nil, err
	}
	return []string{"-c", path, "-a", host, "-p", port, "-m", "0"}, nil
}

// natsOptions are the bench's own NATS connection options: a NATS admin's
// user under -nats-auth, none otherwise.
func (e *benchEnv) natsOptions() ([]nats.Option, error) {
	if !*natsAuthFlag {
		return nil, nil
	}
	dir, err := e.credentials(identity.ID{Kind: identity.NATSAdmin, Name: "bench"})
	if err != nil {
		return nil, err
	}
	return []nats.Option{nats.UserCredentials(filepath.Join(dir, identity.NATSCredsFile))}, nil
}

// connectNATS connects the bench itself to the stack's NATS.
func (e *benchEnv) connectNATS(opts ...nats.Option) (*nats.Conn, error) {
	own, err := e.natsOptions()
	if err != nil {
		return nil, err
	}
	return nats.Connect(e.natsURL, append(opts, own...)...)
}
