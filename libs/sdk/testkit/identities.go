package testkit

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/sdk"
)

// The control plane runs with identities on (no8s dev's default): every
// gRPC connection to it presents a certificate from its CA, and the store
// answers each method only to the identities whose job it is. The kit
// issues those certificates by running the same no8s binary (`no8s
// identity issue`), as a developer would: it does not import the control
// plane's code.

// issuer issues credentials from the control plane's CA into the kit's
// directory, remembering what it issued.
type issuer struct {
	bin, caDir, dir string

	// issued maps a credential's key to its directory; claims each type
	// to the reconciler it was last issued to.
	issued map[string]string
	claims map[string]string
}

// issue returns a credentials directory for the identity that args name
// (`--service NAME`, `--reconciler NAME --types T/v1,...`), issuing it the
// first time.
func (is *issuer) issue(key string, args ...string) (string, error) {
	if dir, ok := is.issued[key]; ok {
		return dir, nil
	}
	dir := filepath.Join(is.dir, fmt.Sprintf("%02d-%s", len(is.issued), strings.ReplaceAll(key, "/", "-")))
	if err := is.run(append([]string{"identity", "issue", "--ca-dir", is.caDir, "--out", dir, "--valid", "24h"}, args...)...); err != nil {
		return "", err
	}
	is.issued[key] = dir
	return dir, nil
}

// reconciler issues the identity reconciler/name with exactly types. A
// type the kit issued to another reconciler before is released first: the
// CA gives a type to one reconciler at a time, while a test may hand a type
// from one reconciler to another (the registry's exclusion of two live
// reconcilers is what such a test looks at).
func (is *issuer) reconciler(name string, types []sdk.TypeRef) (string, error) {
	refs := make([]string, len(types))
	for i, t := range types {
		refs[i] = t.String()
	}
	slices.Sort(refs)
	var taken []string
	for _, r := range refs {
		if holder, ok := is.claims[r]; ok && holder != name {
			taken = append(taken, r)
		}
	}
	if len(taken) > 0 {
		if err := is.run(append([]string{"identity", "release-type", "--ca-dir", is.caDir}, taken...)...); err != nil {
			return "", err
		}
	}
	key := "reconciler/" + name + "/" + strings.Join(refs, ",")
	if _, ok := is.issued[key]; ok && len(taken) > 0 {
		delete(is.issued, key) // its claim was released above: issue again
	}
	dir, err := is.issue(key, "--reconciler", name, "--types", strings.Join(refs, ","))
	if err != nil {
		return "", err
	}
	for _, r := range refs {
		is.claims[r] = name
	}
	return dir, nil
}

func (is *issuer) run(args ...string) error {
	out, err := exec.Command(is.bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", is.bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ReconcilerIdentity issues the credentials of reconciler/name serving
// exactly types from the control plane's CA and returns their directory:
// the NO8S_IDENTITY_DIR of a worker started from the environment
// (worker.RunMain). With identities off it returns "".
func (e *Env) ReconcilerIdentity(t testing.TB, name string, types ...sdk.TypeRef) string {
	t.Helper()
	dir, err := e.reconcilerIdentity(name, types)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return dir
}

func (e *Env) reconcilerIdentity(name string, types []sdk.TypeRef) (string, error) {
	if e.issuer == nil {
		return "", nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.issuer.reconciler(name, types)
}

// DialWorkers connects to the store's workers' door as reconciler/name
// serving types, as that reconciler's workers do: for a test that acts as
// a reconciler itself (takes a lease, completes an attempt). The store
// holds the connection to that name and those types. It is closed when the
// test ends.
func (e *Env) DialWorkers(t testing.TB, name string, types ...sdk.TypeRef) *grpc.ClientConn {
	t.Helper()
	dir, err := e.reconcilerIdentity(name, types)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	conn, err := DialAs(e.workerAddr, dir)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// DialAs connects to a no8s gRPC service on loopback presenting the
// credentials in identityDir (tls.crt, tls.key, ca.crt) and checking that
// the server is the store; an empty identityDir dials in plaintext, as
// Dial does (identities off).
func DialAs(addr, identityDir string) (*grpc.ClientConn, error) {
	if identityDir == "" {
		return Dial(addr)
	}
	creds, err := identity.Load(identityDir)
	if err != nil {
		return nil, err
	}
	return dial(addr, credentials.NewTLS(creds.ClientTLS(identity.ServiceID(identity.Store))))
}
