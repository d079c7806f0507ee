package identityca_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

// serve accepts TLS connections on a loopback port with creds and reports
// each peer's identity (or handshake error) on the returned channel.
func serve(t *testing.T, creds *identity.Credentials) (string, <-chan result) {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", creds.ServerTLS())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	out := make(chan result, 16)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				tc := c.(*tls.Conn)
				if err := tc.Handshake(); err != nil {
					out <- result{err: err}
					return
				}
				id, err := identity.PeerID(tc.ConnectionState())
				out <- result{id: id, err: err}
				_, _ = io.WriteString(c, "ok")
			}(c)
		}
	}()
	return lis.Addr().String(), out
}

type result struct {
	id  identity.ID
	err error
}

// dial connects with creds to addr expecting the server identity want, and
// reads the server's "ok".
func dial(creds *identity.Credentials, addr string, want identity.ID) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, creds.ClientTLS(want))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(b) != "ok" {
		return errors.New("no answer from the server (the handshake was refused)")
	}
	return nil
}

func issue(t *testing.T, ca *identityca.CA, dir string, id identity.ID, validity time.Duration) *identity.Credentials {
	t.Helper()
	if err := ca.IssueTo(dir, id, time.Now(), validity); err != nil {
		t.Fatal(err)
	}
	creds, err := identity.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

func newCA(t *testing.T) *identityca.CA {
	t.Helper()
	ca, err := identityca.New(time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestMutualTLSCarriesIdentities(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	store := issue(t, ca, filepath.Join(dir, "store"), identity.ServiceID(identity.Store), time.Hour)
	noop := issue(t, ca, filepath.Join(dir, "noop"), identity.ID{Kind: identity.Reconciler, Name: "noop", Types: []string{"Noop/v1", "Other/v1beta1"}}, time.Hour)
	addr, got := serve(t, store)

	if err := dial(noop, addr, identity.ServiceID(identity.Store)); err != nil {
		t.Fatalf("noop → store: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.id.String() != "reconciler/noop" || !r.id.Serves("Noop/v1") || !r.id.Serves("Other/v1beta1") || r.id.Serves("Else/v1") {
		t.Fatalf("peer identity %+v", r.id)
	}

	// The client checks who the server is: store is not the scheduler.
	if err := dial(noop, addr, identity.ServiceID(identity.Scheduler)); err == nil || !strings.Contains(err.Error(), "the server is service/store, want service/scheduler") {
		t.Fatalf("want the server identity refused, got %v", err)
	}
	<-got
}

func TestForeignCAAndNoCertificateRefused(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	dir := t.TempDir()
	store := issue(t, ca, filepath.Join(dir, "store"), identity.ServiceID(identity.Store), time.Hour)
	forged := issue(t, other, filepath.Join(dir, "forged"), identity.ServiceID(identity.Scheduler), time.Hour)
	addr, got := serve(t, store)

	if err := dial(forged, addr, identity.ServiceID(identity.Store)); err == nil {
		t.Fatal("a certificate from another CA was accepted")
	}
	if r := <-got; r.err == nil {
		t.Fatalf("server accepted %v from another CA", r.id)
	}

	// No client certificate at all.
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // the attacker's side
	if err == nil {
		_, err = io.ReadAll(c)
		c.Close()
	}
	if r := <-got; r.err == nil || !strings.Contains(r.err.Error(), "certificate") {
		t.Fatalf("server accepted a client without a certificate: %+v (client: %v)", r, err)
	}
}

func TestExpiredCertificateRefused(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	store := issue(t, ca, filepath.Join(dir, "store"), identity.ServiceID(identity.Store), time.Hour)
	addr, got := serve(t, store)
	// Issued two hours ago for one hour (NotBefore is a minute before).
	old, key, err := ca.Issue(identity.ServiceID(identity.Gateway), time.Now().Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	gwDir := filepath.Join(dir, "gateway")
	if err := identityca.WriteCredentials(gwDir, old, key, ca.Bundle()); err != nil {
		t.Fatal(err)
	}
	if _, err := identity.Load(gwDir); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Load of an expired certificate: %v", err)
	}
	// Presented anyway (a process that loaded it while it was valid).
	cert, err := tls.X509KeyPair(old, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // the test's side
	if err == nil {
		_, err = io.ReadAll(c)
		c.Close()
	}
	if r := <-got; r.err == nil || !strings.Contains(r.err.Error(), "expired") {
		t.Fatalf("server accepted an expired certificate: %+v (client: %v)", r, err)
	}
}

func TestRenewedCredentialsUsedWithoutRestart(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	store := issue(t, ca, filepath.Join(dir, "store"), identity.ServiceID(identity.Store), time.Hour)
	gwDir := filepath.Join(dir, "gateway")
	gw := issue(t, ca, gwDir, identity.ServiceID(identity.Gateway), time.Hour)
	addr, got := serve(t, store)
	first := gw.NotAfter()

	// Renewed on disk for longer: the same Credentials present the new one.
	if err := ca.IssueTo(gwDir, identity.ServiceID(identity.Gateway), time.Now(), 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	touchLater(t, gwDir)
	if !gw.NotAfter().After(first) {
		t.Fatalf("credentials not read again: NotAfter %s, first %s", gw.NotAfter(), first)
	}
	if err := dial(gw, addr, identity.ServiceID(identity.Store)); err != nil {
		t.Fatal(err)
	}
	<-got

	// A broken write keeps the last good material in use, and says why.
	if err := os.WriteFile(filepath.Join(gwDir, identity.KeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	touchLater(t, gwDir)
	if gw.Err() == nil {
		t.Fatal("a broken key file is not reported")
	}
	if err := dial(gw, addr, identity.ServiceID(identity.Store)); err != nil {
		t.Fatalf("the last good credentials are not kept: %v", err)
	}
	<-got
}

// touchLater moves every file of dir a second into the future, so that a
// rewrite within the file system's time resolution is still seen.
func touchLater(t *testing.T, dir string) {
	t.Helper()
	later := time.Now().Add(time.Second)
	for _, f := range []string{identity.CertFile, identity.KeyFile, identity.CAFile} {
		if err := os.Chtimes(filepath.Join(dir, f), later, later); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCARotationWithOverlap(t *testing.T) {
	dir := t.TempDir()
	caDir := filepath.Join(dir, "ca")
	ca, created, err := identityca.LoadOrCreate(caDir, time.Now())
	if err != nil || !created {
		t.Fatalf("LoadOrCreate: created %v, %v", created, err)
	}
	if again, created, err := identityca.LoadOrCreate(caDir, time.Now()); err != nil || created || !again.Certificate().Equal(ca.Certificate()) {
		t.Fatalf("LoadOrCreate of an existing CA: created %v, %v", created, err)
	}
	storeDir, gwDir := filepath.Join(dir, "store"), filepath.Join(dir, "gateway")
	store := issue(t, ca, storeDir, identity.ServiceID(identity.Store), time.Hour)
	gw := issue(t, ca, gwDir, identity.ServiceID(identity.Gateway), time.Hour)
	addr, got := serve(t, store)

	// 1. The new CA joins the bundle; identities issued by the old one and
	// by the new one meet while the rotation runs.
	next, err := ca.Rotate(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Save(caDir); err != nil {
		t.Fatal(err)
	}
	next, err = identityca.Load(caDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.IssueTo(gwDir, identity.ServiceID(identity.Gateway), time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	touchLater(t, gwDir)
	// The store still holds its old certificate and the old bundle.
	if err := dial(gw, addr, identity.ServiceID(identity.Store)); err == nil {
		t.Fatal("the store trusted the new CA before its bundle had it")
	}
	<-got
	// So the bundle is spread first (the store keeps its certificate).
	if err := os.WriteFile(filepath.Join(storeDir, identity.CAFile), next.Bundle(), 0o644); err != nil {
		t.Fatal(err)
	}
	touchLater(t, storeDir)
	if err := dial(gw, addr, identity.ServiceID(identity.Store)); err != nil {
		t.Fatalf("new gateway → old store during the overlap: %v", err)
	}
	<-got

	// 2. The store is issued again; the old CA retired everywhere.
	retired := next.Retire()
	if err := retired.IssueTo(storeDir, identity.ServiceID(identity.Store), time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := identityca.WriteCredentials(gwDir, mustRead(t, gwDir, identity.CertFile), mustRead(t, gwDir, identity.KeyFile), retired.Bundle()); err != nil {
		t.Fatal(err)
	}
	touchLater(t, storeDir)
	touchLater(t, gwDir)
	if err := dial(gw, addr, identity.ServiceID(identity.Store)); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	<-got
	// A certificate of the old CA is refused now.
	oldDir := filepath.Join(dir, "old")
	old := issue(t, ca, oldDir, identity.ServiceID(identity.Scheduler), time.Hour)
	if err := dial(old, addr, identity.ServiceID(identity.Store)); err == nil {
		t.Fatal("a certificate of the retired CA was accepted")
	}
	<-got
}

func mustRead(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIssueRefusesInvalidIdentities(t *testing.T) {
	ca := newCA(t)
	for _, id := range []identity.ID{
		{Kind: identity.Service, Name: "evil"},
		{Kind: "admin", Name: "x"},
		{Kind: identity.Reconciler, Name: "Not_A_Label"},
		{Kind: identity.Reconciler, Name: "noop", Types: []string{"noop"}},
		{Kind: identity.Reconciler, Name: "noop", Types: []string{"Noop/V1"}},
		{Kind: identity.Client, Name: "ci", Types: []string{"Noop/v1"}},
		{Kind: identity.Reconciler, Name: strings.Repeat("a", 300)},
	} {
		if _, _, err := ca.Issue(id, time.Now(), time.Hour); !errors.Is(err, identity.ErrInvalid) {
			t.Errorf("Issue(%+v): %v, want ErrInvalid", id, err)
		}
	}
}

func TestTypeClaimsExpire(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	a := identity.ID{Kind: identity.Reconciler, Name: "a", Types: []string{"T/v1"}}
	b := identity.ID{Kind: identity.Reconciler, Name: "b", Types: []string{"T/v1"}}
	if err := identityca.ClaimTypes(dir, a, now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if err := identityca.ClaimTypes(dir, b, now.Add(time.Hour), now); !errors.Is(err, identityca.ErrClaimed) {
		t.Fatalf("b while a's claim lives: %v, want ErrClaimed", err)
	}
	// Once a's last certificate for T/v1 expired, the type is free.
	later := now.Add(2 * time.Hour)
	if err := identityca.ClaimTypes(dir, b, later.Add(time.Hour), later); err != nil {
		t.Fatalf("b after a's claim expired: %v", err)
	}
	claims, err := identityca.ReadClaims(dir)
	if err != nil || claims["T/v1"].Reconciler != "b" {
		t.Fatalf("claims %+v, %v", claims, err)
	}
	// Services and clients claim nothing.
	if err := identityca.ClaimTypes(dir, identity.ServiceID(identity.Store), later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, identityca.ClaimsFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := identityca.ClaimTypes(dir, a, later, later); err == nil || !strings.Contains(err.Error(), identityca.ClaimsFile) {
		t.Fatalf("a corrupt claims file: %v, want an error naming it", err)
	}
}
