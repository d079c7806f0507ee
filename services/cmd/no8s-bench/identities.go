package main

// identities.go runs the bench's control plane with identities on (the
// -identities flag): a CA in the bench's work directory, a credential per
// service and per reconciler deployment, mutual TLS on every internal gRPC
// listener and the policy enforced, as a production installation runs.

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/no8s/no8s/libs/sdk/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

var identitiesFlag = flag.Bool("identities", false, "run every process with an identity: mutual TLS on internal gRPC and the call policy enforced")

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
	if b.ca == nil {
		ca, err := identityca.New(time.Now(), identityca.DefaultCAValidity)
		if err != nil {
			return "", err
		}
		b.ca, b.root, b.dirs = ca, filepath.Join(e.workDir, "identities"), map[string]string{}
	}
	key := id.String() + "|" + strings.Join(id.Types, ",")
	if dir, ok := b.dirs[key]; ok {
		return dir, nil
	}
	dir := filepath.Join(b.root, fmt.Sprintf("%d-%s-%s", len(b.dirs), id.Kind, id.Name))
	if err := b.ca.IssueTo(dir, id, time.Now(), identityca.DefaultLeafValidity); err != nil {
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
