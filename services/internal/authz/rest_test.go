package authz_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/problem"
)

// The callers of the rules' tests: nil is anonymous.
var (
	anonymous    *identity.ID
	registrySync = &identity.ID{Kind: identity.Service, Name: identity.RegistrySync}
	gatewaySvc   = &identity.ID{Kind: identity.Service, Name: identity.Gateway}
	schedulerSvc = &identity.ID{Kind: identity.Service, Name: identity.Scheduler}
	tenantRec    = &identity.ID{Kind: identity.Reconciler, Name: "tenant", Types: []string{"Tenant/v1"}}
	noopRec      = &identity.ID{Kind: identity.Reconciler, Name: "noop"}
	ciClient     = &identity.ID{Kind: identity.Client, Name: "ci"}
	// clientTenant is a client named like the tenant reconciler: the
	// kind counts, not only the name.
	clientTenant = &identity.ID{Kind: identity.Client, Name: "tenant"}
)

var callers = map[string]*identity.ID{"anonymous": anonymous, "service/registry-sync": registrySync, "service/gateway": gatewaySvc, "service/scheduler": schedulerSvc,
	"reconciler/tenant": tenantRec, "reconciler/noop": noopRec, "client/ci": ciClient, "client/tenant": clientTenant}

// TestCheckKeys runs every reserved key (and an ordinary one) through
// add, change, keep and remove by every caller.
func TestCheckKeys(t *testing.T) {
	type keyCase struct {
		kind    authz.KeyKind
		key     string
		writers []string // callers allowed to add, change and remove
	}
	keys := []keyCase{
		{authz.Finalizer, "reconciler.no8s.io/tenant", []string{"reconciler/tenant"}},
		{authz.Finalizer, "reconciler.no8s.io/noop", []string{"reconciler/noop"}},
		{authz.Finalizer, "example.com/cleanup", []string{"anonymous", "service/registry-sync", "service/gateway", "service/scheduler", "reconciler/tenant", "reconciler/noop", "client/ci", "client/tenant"}},
		{authz.Label, "tenants.no8s.io/tenant", []string{"reconciler/tenant", "service/registry-sync"}},
		{authz.Label, "tenants.no8s.io/registry", []string{"reconciler/tenant", "service/registry-sync"}},
		{authz.Annotation, "tenants.no8s.io/created-once", []string{"reconciler/tenant", "service/registry-sync"}},
		{authz.Label, "httpsource.no8s.io/source", []string{"service/registry-sync"}},
		{authz.Annotation, "httpsource.no8s.io/applied", []string{"service/registry-sync"}},
		{authz.Annotation, "no8s.io/operation", []string{"anonymous", "service/registry-sync", "service/gateway", "service/scheduler", "reconciler/tenant", "reconciler/noop", "client/ci", "client/tenant"}},
		// A reserved prefix on a finalizer only reserves where the table
		// says: tenants.no8s.io/ is a label and annotation prefix.
		{authz.Finalizer, "tenants.no8s.io/hold", []string{"anonymous", "service/registry-sync", "service/gateway", "service/scheduler", "reconciler/tenant", "reconciler/noop", "client/ci", "client/tenant"}},
		// The propagation finalizers are the garbage collector's (in the
		// scheduler), removal included; they reserve exactly their name.
		{authz.Finalizer, "foregroundDeletion", []string{"service/scheduler"}},
		{authz.Finalizer, "orphan", []string{"service/scheduler"}},
		{authz.Finalizer, "orphanage.example/hold", []string{"anonymous", "service/registry-sync", "service/gateway", "service/scheduler", "reconciler/tenant", "reconciler/noop", "client/ci", "client/tenant"}},
	}
	strict := map[string]bool{"foregroundDeletion": true, "orphan": true}
	with := func(k keyCase, v string) authz.Keys {
		switch k.kind {
		case authz.Finalizer:
			return authz.Keys{Finalizers: []string{"other.example/x", k.key}}
		case authz.Label:
			return authz.Keys{Labels: map[string]string{"team": "a", k.key: v}}
		}
		return authz.Keys{Annotations: map[string]string{"note": "a", k.key: v}}
	}
	without := func(k keyCase) authz.Keys {
		switch k.kind {
		case authz.Finalizer:
			return authz.Keys{Finalizers: []string{"other.example/x"}}
		case authz.Label:
			return authz.Keys{Labels: map[string]string{"team": "a"}}
		}
		return authz.Keys{Annotations: map[string]string{"note": "a"}}
	}
	for _, k := range keys {
		for name, caller := range callers {
			writer := false
			for _, w := range k.writers {
				writer = writer || w == name
			}
			ops := []struct {
				op        string
				cur, next authz.Keys
				allowed   bool
			}{
				{"add", without(k), with(k, "x"), writer},
				{"create", authz.Keys{}, with(k, "x"), writer},
				{"keep", with(k, "x"), with(k, "x"), true},
				// Removing a finalizer is break-glass: allowed to all,
				// unless its rule is strict.
				{"remove", with(k, "x"), without(k), writer || k.kind == authz.Finalizer && !strict[k.key]},
			}
			if k.kind != authz.Finalizer {
				ops = append(ops, struct {
					op        string
					cur, next authz.Keys
					allowed   bool
				}{"change", with(k, "x"), with(k, "y"), writer})
			}
			for _, o := range ops {
				why := authz.CheckKeys(caller, o.cur, o.next)
				if o.allowed != (why == "") {
					t.Errorf("%s %s %s %q: allowed=%v, got %q", name, o.op, k.kind, k.key, o.allowed, why)
					continue
				}
				if why == "" {
					continue
				}
				verb := o.op
				if verb == "create" {
					verb = "add"
				}
				for _, w := range []string{`"` + k.key + `"`, string(k.kind), "may not " + verb} {
					if !strings.Contains(why, w) {
						t.Errorf("%s %s %q: %q does not name %q", name, o.op, k.key, why, w)
					}
				}
				if !strings.Contains(why, "only "+k.writers[0]) {
					t.Errorf("%s %s %q: %q does not say who may write it", name, o.op, k.key, why)
				}
			}
		}
	}
}

func TestCheckKeysNamesEveryRefusedKey(t *testing.T) {
	why := authz.CheckKeys(ciClient, authz.Keys{Labels: map[string]string{"tenants.no8s.io/tenant": "a"}},
		authz.Keys{Finalizers: []string{"reconciler.no8s.io/noop"}, Annotations: map[string]string{"httpsource.no8s.io/applied": "d"}})
	for _, w := range []string{`client/ci may not add the finalizer "reconciler.no8s.io/noop": only reconciler/noop`,
		`client/ci may not remove the label "tenants.no8s.io/tenant": only reconciler/tenant, service/registry-sync`,
		`client/ci may not add the annotation "httpsource.no8s.io/applied": only service/registry-sync`} {
		if !strings.Contains(why, w) {
			t.Errorf("%q lacks %q", why, w)
		}
	}
}

func TestCheckFence(t *testing.T) {
	for name, caller := range callers {
		why := authz.CheckFence(caller)
		if (name == "service/registry-sync" || name == "service/scheduler") != (why == "") {
			t.Errorf("%s: %q", name, why)
		}
		if why != "" && (!strings.Contains(why, "fence headers are registry-sync's") || !strings.Contains(why, "X-No8s-Fence-Lease")) {
			t.Errorf("%s: %q", name, why)
		}
	}
	if why := authz.CheckFence(anonymous); !strings.HasPrefix(why, "an anonymous caller may not send") {
		t.Errorf("anonymous: %q", why)
	}
}

// TestRESTModes: enforce answers a Forbidden problem with code denied;
// audit-only allows and logs; a nil REST (identities off) allows.
func TestRESTModes(t *testing.T) {
	forged := authz.Keys{Finalizers: []string{"reconciler.no8s.io/tenant"}}
	ctx := authz.WithCaller(t.Context(), *ciClient)

	enforce := authz.NewREST(authz.Enforce, nil)
	for what, err := range map[string]error{"keys": enforce.Keys(ctx, authz.Keys{}, forged), "fence": enforce.Fence(ctx),
		"anonymous fence": enforce.Fence(t.Context())} {
		pe := problem.As(err)
		if pe == nil || pe.Kind != problem.Forbidden || pe.Code != problem.CodeDenied {
			t.Errorf("enforce %s: %v, want a Forbidden denied problem", what, err)
		}
	}
	if err := enforce.Fence(authz.WithCaller(t.Context(), *registrySync)); err != nil {
		t.Errorf("registry-sync's fence: %v", err)
	}
	if err := enforce.Keys(authz.WithCaller(t.Context(), *tenantRec), authz.Keys{}, forged); err != nil {
		t.Errorf("the tenant reconciler's own finalizer: %v", err)
	}

	var logs bytes.Buffer
	audit := authz.NewREST(authz.AuditOnly, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := audit.Keys(ctx, authz.Keys{}, forged); err != nil {
		t.Errorf("audit-only keys: %v", err)
	}
	if err := audit.Fence(context.Background()); err != nil {
		t.Errorf("audit-only fence: %v", err)
	}
	for _, w := range []string{"authz audit: would refuse", "identity=client/ci", `reconciler.no8s.io/tenant`, "identity=\"an anonymous caller\"", "fence headers"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("audit log lacks %q:\n%s", w, logs.String())
		}
	}

	var off *authz.REST
	if err := off.Keys(ctx, authz.Keys{}, forged); err != nil {
		t.Errorf("identities off, keys: %v", err)
	}
	if err := off.Fence(ctx); err != nil {
		t.Errorf("identities off, fence: %v", err)
	}
}

// TestHTTPCaller reads the identity of a verified client certificate and
// refuses a request without TLS or without a verified one.
func TestHTTPCaller(t *testing.T) {
	ca, err := identityca.New(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "rs")
	if err := ca.IssueTo(dir, identity.ID{Kind: identity.Service, Name: identity.RegistrySync}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, identity.CertFile), filepath.Join(dir, identity.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequestWithContext(t.Context(), "GET", "/", nil)
	if _, err := authz.HTTPCaller(r); err == nil {
		t.Error("a request without TLS got a caller")
	}
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
	if _, err := authz.HTTPCaller(r); err == nil {
		t.Error("an unverified certificate gave a caller")
	}
	r.TLS.VerifiedChains = [][]*x509.Certificate{{leaf}}
	r2, err := authz.HTTPCaller(r)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := authz.Caller(r2.Context()); !ok || !id.Is(identity.Service, identity.RegistrySync) {
		t.Errorf("caller %v %v", id, ok)
	}
	// Deny (the gRPC handlers' check) does not act on a REST caller.
	if err := authz.Deny(r2.Context(), "m", "x"); err != nil {
		t.Errorf("Deny on a REST caller: %v", err)
	}
}
