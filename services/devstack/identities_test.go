package devstack

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/platform/identity"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/identityca"
)

// TestIdentitiesOnByDefault: no8s dev's store serves, on both its ports,
// only callers with a certificate from the stack's CA, and holds each to
// the call policy; the CA and the credentials are where Ready says and
// outlive a restart.
func TestIdentitiesOnByDefault(t *testing.T) {
	cfg := testConfig(t)
	ready, _ := runStack(t, cfg)
	if ready.CADir != filepath.Join(cfg.DataDir, "identity", "ca") || ready.IdentityDir != filepath.Join(cfg.DataDir, "identity") {
		t.Fatalf("ready: ca %q identities %q", ready.CADir, ready.IdentityDir)
	}
	tenantCreds, err := identity.Load(filepath.Join(ready.IdentityDir, "reconciler-tenant"))
	if err != nil || tenantCreds.ID().String() != "reconciler/tenant" || len(tenantCreds.ID().Types) != 1 || !tenantCreds.ID().Serves("Tenant/v1") {
		t.Fatalf("the tenant reconciler's credentials: %v %v", tenantCreds, err)
	}
	// registry-sync keeps its service identity (its worker acts as the
	// reconciler registry-sync at the workers' door).
	if sync, err := identity.Load(filepath.Join(ready.IdentityDir, "service-registry-sync")); err != nil || sync.ID().String() != "service/registry-sync" {
		t.Fatalf("registry-sync's credentials: %v %v", sync, err)
	}
	ca, err := identityca.Load(ready.CADir)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(id identity.ID) *identity.Credentials {
		dir := t.TempDir()
		if err := identityca.ClaimTypes(ready.CADir, id, time.Now().Add(time.Hour), time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := ca.IssueTo(dir, id, time.Now(), time.Hour); err != nil {
			t.Fatal(err)
		}
		creds, err := identity.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return creds
	}
	conn := func(addr string, opts ...grpc.DialOption) *grpc.ClientConn {
		c, err := grpc.NewClient(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ctx := t.Context()

	// Without a certificate: refused on both ports, in plaintext or TLS.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.Bundle())
	noCert := credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS13})
	for _, addr := range []string{ready.StoreAddr, ready.WorkerAddr} {
		for name, tc := range map[string]credentials.TransportCredentials{"plaintext": insecure.NewCredentials(), "TLS without a certificate": noCert} {
			c := conn(addr, grpc.WithTransportCredentials(tc))
			_, err := storev1.NewStoreServiceClient(c).ListResourceTypes(ctx, &storev1.ListResourceTypesRequest{})
			if addr == ready.WorkerAddr {
				_, err = reconcilev1.NewWorkerServiceClient(c).ListResources(ctx, &reconcilev1.ListResourcesRequest{ResourceTypeName: "Tenant", ResourceTypeVersion: "v1"})
			}
			if code := status.Code(err); code != codes.Unavailable {
				t.Errorf("%s at %s: %v, want Unavailable (no connection)", name, addr, err)
			}
		}
	}

	// With the right identity: served.
	gateway := issue(identity.ServiceID(identity.Gateway))
	store := storev1.NewStoreServiceClient(conn(ready.StoreAddr, authz.DialOptions(gateway, identity.Store)...))
	if _, err := store.ListResourceTypes(ctx, &storev1.ListResourceTypesRequest{}); err != nil {
		t.Fatalf("the gateway's identity at the store: %v", err)
	}
	widgets := issue(identity.ID{Kind: identity.Reconciler, Name: "widgets", Types: []string{"Widget/v1"}})
	workers := reconcilev1.NewWorkerServiceClient(conn(ready.WorkerAddr, authz.DialOptions(widgets, identity.Store)...))
	if _, err := workers.ListResources(ctx, &reconcilev1.ListResourcesRequest{ResourceTypeName: "Widget", ResourceTypeVersion: "v1"}); err != nil {
		t.Fatalf("a reconciler's identity at the workers' door: %v", err)
	}
	// A valid identity outside its rights: the policy refuses it.
	asReconciler := storev1.NewStoreServiceClient(conn(ready.StoreAddr, authz.DialOptions(widgets, identity.Store)...))
	if _, err := asReconciler.ListResourceTypes(ctx, &storev1.ListResourceTypesRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a reconciler at the store's main port: %v, want PermissionDenied", err)
	}
	if _, err := os.Stat(filepath.Join(ready.CADir, identityca.KeyFile)); err != nil {
		t.Fatal(err)
	}
}

// TestIdentitiesOff: --identities=off serves plaintext and writes no CA.
func TestIdentitiesOff(t *testing.T) {
	cfg := testConfig(t)
	cfg.RegistrySync, cfg.TenantReconciler, cfg.Identities = false, false, false
	ready, _ := runStack(t, cfg)
	if ready.CADir != "" || ready.IdentityDir != "" {
		t.Fatalf("ready names identities: %+v", ready)
	}
	c, err := grpc.NewClient(ready.StoreAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := storev1.NewStoreServiceClient(c).ListResourceTypes(t.Context(), &storev1.ListResourceTypesRequest{}); err != nil {
		t.Fatalf("plaintext with identities off: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, IdentityDirName)); !os.IsNotExist(err) {
		t.Fatalf("identity directory with identities off: %v", err)
	}
}

// TestLoadIdentitiesKeepsAndRenews: a restart keeps the CA and the
// credentials; a credential within identityca.DefaultRenewBefore of its expiry, or issued by
// a CA since replaced, is issued again.
func TestLoadIdentitiesKeepsAndRenews(t *testing.T) {
	cfg := Config{DataDir: t.TempDir()}
	log := slogDiscard()
	now := time.Now()
	ids := []identity.ID{identity.ServiceID(identity.Store), {Kind: identity.Reconciler, Name: "tenant", Types: []string{"Tenant/v1"}}}
	first, err := loadIdentities(cfg, ids, now, log)
	if err != nil {
		t.Fatal(err)
	}
	storeCert, tenantCert := certOf(t, first.service(identity.Store)), certOf(t, first.of(ids[1]))
	again, err := loadIdentities(cfg, ids, now.Add(time.Hour), log)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(certOf(t, again.service(identity.Store)), storeCert) {
		t.Fatal("a restart issued the store's credentials again")
	}
	// The store's credential a day from its expiry.
	ca, err := identityca.Load(cfg.CADir())
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.IssueTo(filepath.Join(cfg.IdentityDir(), "service-store"), ids[0], now, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	renewed, err := loadIdentities(cfg, ids, now, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := renewed.service(identity.Store).NotAfter(); got.Before(now.Add(identityca.DefaultRenewBefore)) {
		t.Fatalf("a credential close to its expiry was not issued again (valid until %s)", got)
	}
	// A new CA (the old one removed): every credential is issued again.
	if err := os.RemoveAll(cfg.CADir()); err != nil {
		t.Fatal(err)
	}
	fresh, err := loadIdentities(cfg, ids, now, log)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(certOf(t, fresh.of(ids[1])), tenantCert) {
		t.Fatal("credentials of a removed CA were kept")
	}
}

// certOf is the certificate file creds were read from, as it is now.
func certOf(t *testing.T, creds *identity.Credentials) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(creds.Dir(), identity.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
