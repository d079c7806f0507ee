package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/identityca"
)

// TestIdentitiesRotateWithoutRestart renews and rotates the credentials
// of a running control plane of separate processes with the commands an
// operator runs (`no8s identity issue`, `rotate-ca`, `retire-ca`), and no
// process restarts:
//   - a credential issued again on disk is what the store presents to the
//     next connection;
//   - an expired credential is refused;
//   - during a CA rotation, services holding the new CA's certificates and
//     services still on the old one meet (both CAs trusted), and after
//     retire-ca a certificate of the old CA is refused;
//   - through it all every process keeps running and a resource created
//     after each step becomes ready: store, admission, gateway, scheduler
//     and reconciler stay connected.
func TestIdentitiesRotateWithoutRestart(t *testing.T) {
	c := newCluster(t)
	c.withIdentities()
	base := c.startAll()
	if r := do(t, "POST", base+"/api/v1/resource-types", `{"name":"Rotated","version":"v1","schema":{"type":"object"}}`); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	procs := []*proc{c.stores[0], c.admissionProcs[0], c.startScheduler(c.storeAddrs[0], "sched", 0), c.startReconciler(c.storeAddrs[0], "Rotated/v1")}
	n := 0
	createReady := func(step string) {
		t.Helper()
		n++
		r := do(t, "POST", base+"/api/v1/resources", `{"name":"r`+strconv.Itoa(n)+`","resource_type_name":"Rotated","resource_type_version":"v1","spec":{}}`)
		if r.status != 201 {
			t.Fatalf("%s: create: %d %s", step, r.status, r.body)
		}
		waitResource(t, base, int64(r.json(t)["id"].(float64)), "ready", func(m map[string]any) bool { return m["status"] == "ready" })
		for _, p := range procs {
			if err := p.exited(); err != nil {
				t.Fatalf("%s: %s exited: %v", step, p.name, err)
			}
		}
		t.Logf("%s: a new resource became ready; no process restarted", step)
	}
	createReady("before")

	// Every credential the cluster uses, by its issue arguments.
	issued := [][]string{
		{"--service", identity.Store}, {"--service", identity.Admission}, {"--service", identity.Gateway}, {"--service", identity.Scheduler},
		{"--reconciler", "noop", "--types", "Rotated/v1"},
	}
	reissue := func(args ...string) string {
		t.Helper()
		dir := c.credentials(args...)
		if r := no8sEnv(t, nil, "", append([]string{"identity", "issue", "--ca-dir", c.caDir(), "--out", dir}, args...)...); r.code != 0 {
			t.Fatalf("no8s identity issue %v: %d %s", args, r.code, r.stderr)
		}
		return dir
	}
	reissueAll := func() {
		t.Helper()
		for _, args := range issued {
			reissue(args...)
		}
	}
	// serverLeaf is the certificate the listener at addr presents to a new
	// connection from the credentials in dir (a health check: any
	// identity may ask), or the error of that connection.
	load := func(dir string) *identity.Credentials {
		t.Helper()
		creds, err := identity.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return creds
	}
	serverLeaf := func(addr, server string, creds *identity.Credentials) (*x509.Certificate, error) {
		t.Helper()
		conn, err := grpcserver.Dial(addr, authz.DialOptions(creds, server)...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var p peer.Peer
		if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(false)); err != nil {
			return nil, err
		}
		info, ok := p.AuthInfo.(credentials.TLSInfo)
		if !ok || len(info.State.PeerCertificates) == 0 {
			t.Fatalf("no TLS peer certificate from %s", addr)
		}
		return info.State.PeerCertificates[0], nil
	}
	storeAddr, workerAddr, admissionAddr := c.storeAddrs[0], c.workerAddr(c.storeAddrs[0]), c.admissions[0]
	// Each listener, with the identity it presents.
	ports := []struct{ name, addr, server string }{
		{"store", storeAddr, identity.Store}, {"workers' door", workerAddr, identity.Store}, {"admission", admissionAddr, identity.Admission},
	}
	gateway := load(c.credentials("--service", identity.Gateway))
	accepted := func(step string, creds *identity.Credentials) {
		t.Helper()
		for _, p := range ports {
			if _, err := serverLeaf(p.addr, p.server, creds); err != nil {
				t.Errorf("%s: %s refused a current credential: %v", step, p.name, err)
			}
		}
	}
	refused := func(step string, creds *identity.Credentials) {
		t.Helper()
		for _, p := range ports {
			name := p.name
			if _, err := serverLeaf(p.addr, p.server, creds); err == nil {
				t.Errorf("%s: %s accepted it", step, name)
			} else {
				t.Logf("%s: %s refused it (%v)", step, name, err)
			}
		}
	}
	// A credential of the first CA, kept aside.
	firstCADir := c.credentials("--client", "first-ca")
	firstCA := load(firstCADir)
	accepted("a client of the first CA", firstCA)

	// 1. Renewal in place: the store presents its new certificate to the
	// next connection.
	before, err := serverLeaf(storeAddr, identity.Store, gateway)
	if err != nil {
		t.Fatal(err)
	}
	reissue("--service", identity.Store)
	waitFor(t, 10*time.Second, "the store presenting its renewed certificate", func() error {
		leaf, err := serverLeaf(storeAddr, identity.Store, gateway)
		if err != nil {
			return err
		}
		if leaf.SerialNumber.Cmp(before.SerialNumber) == 0 {
			return fmt.Errorf("still serial %s", before.SerialNumber)
		}
		return nil
	})
	createReady("store credential renewed")

	// 2. An expired credential is refused.
	expired := filepath.Join(t.TempDir(), "expired")
	if r := no8sEnv(t, nil, "", "identity", "issue", "--ca-dir", c.caDir(), "--out", expired, "--client", "short", "--valid", "2s"); r.code != 0 {
		t.Fatalf("issue a short credential: %s", r.stderr)
	}
	short := load(expired) // loaded while valid, presented once expired
	waitFor(t, 20*time.Second, "the short credential to expire", func() error {
		if time.Now().Before(short.NotAfter()) {
			return fmt.Errorf("valid until %s", short.NotAfter().Format(time.RFC3339))
		}
		return nil
	})
	refused("an expired credential", short)

	// 3. CA rotation: the new CA issues, both are trusted, every identity
	// is issued again (with the two-CA bundle) while the services run.
	if r := no8sEnv(t, nil, "", "identity", "rotate-ca", "--ca-dir", c.caDir()); r.code != 0 {
		t.Fatalf("rotate-ca: %s", r.stderr)
	}
	// First the new bundle goes to every credentials directory (each
	// keeps its certificate), as rotate-ca says, the client of the first
	// CA's too; then the store alone is issued again: the store on the new
	// CA, everyone else on the first.
	bundle, err := os.ReadFile(filepath.Join(c.caDir(), identityca.BundleFile))
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{firstCADir}
	for _, args := range issued {
		dirs = append(dirs, c.credentials(args...))
	}
	for _, dir := range dirs {
		cert, err1 := os.ReadFile(filepath.Join(dir, identity.CertFile))
		key, err2 := os.ReadFile(filepath.Join(dir, identity.KeyFile))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if err := identityca.WriteCredentials(dir, cert, key, bundle); err != nil {
			t.Fatal(err)
		}
	}
	reissue("--service", identity.Store)
	accepted("during the rotation, a client of the first CA", firstCA)
	createReady("store on the new CA, the rest on the first")
	reissueAll()
	leaf, err := serverLeaf(storeAddr, identity.Store, gateway)
	if err != nil {
		t.Fatal(err)
	}
	if string(leaf.AuthorityKeyId) != issuingCAKeyID(t, c.caDir()) {
		t.Error("after the rotation, the store does not present a certificate of the new CA")
	}
	createReady("every identity on the new CA, both trusted")

	// 4. retire-ca: only the new CA is trusted once every identity is
	// issued again with the new bundle.
	if r := no8sEnv(t, nil, "", "identity", "retire-ca", "--ca-dir", c.caDir()); r.code != 0 {
		t.Fatalf("retire-ca: %s", r.stderr)
	}
	reissueAll()
	refused("after retire-ca, a client of the first CA", firstCA)
	accepted("after retire-ca, the gateway", gateway)
	createReady("the first CA retired")
}

// issuingCAKeyID is the subject key id of the CA that issues in a CA
// directory (the first certificate of its bundle): the authority key id of
// the certificates it issues.
func issuingCAKeyID(t *testing.T, caDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(caDir, identityca.BundleFile))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("no PEM in %s", caDir)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return string(cert.SubjectKeyId)
}
