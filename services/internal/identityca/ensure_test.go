package identityca_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

// deployment is a Compose-like deployment in a fresh directory: every
// service, two reconcilers, a NATS publisher and reader.
func deployment(t *testing.T) identityca.Deployment {
	root := t.TempDir()
	d := identityca.Deployment{
		CADir:           filepath.Join(root, "ca"),
		CredentialsRoot: filepath.Join(root, "identity"),
		NATSConfig:      filepath.Join(root, "nats", "no8s-auth.conf"),
	}
	for _, s := range identity.Services() {
		d.IDs = append(d.IDs, identity.ServiceID(s))
	}
	d.IDs = append(d.IDs,
		identity.ID{Kind: identity.Reconciler, Name: "tenant", Types: []string{"Tenant/v1"}},
		identity.ID{Kind: identity.Reconciler, Name: "noop", Types: []string{"DatabaseCluster/v1", "WebApp/v1"}},
		identity.ID{Kind: identity.Publisher, Name: "queue-input"},
		identity.ID{Kind: identity.Reader, Name: "events"})
	return d
}

func ensure(t *testing.T, d identityca.Deployment, now time.Time) *identityca.EnsureResult {
	t.Helper()
	_, res, err := identityca.Ensure(d, now)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func issuedNames(res *identityca.EnsureResult) []string {
	var out []string
	for id := range res.Issued {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestEnsureIssuesOnceThenKeeps: the first run creates the CA with NATS
// keys, issues every identity (a NATS user alone for publishers and
// readers) and writes the NATS include; a second run changes nothing.
func TestEnsureIssuesOnceThenKeeps(t *testing.T) {
	d := deployment(t)
	now := time.Now()
	res := ensure(t, d, now)
	if !res.CACreated || !res.NATSKeysAdded || !res.NATSConfigWritten || len(res.Issued) != len(d.IDs) || len(res.Kept) != 0 {
		t.Fatalf("first run: %+v", res)
	}
	for _, id := range d.IDs {
		dir := identityca.CredentialsDir(d.CredentialsRoot, id)
		if _, err := os.Stat(filepath.Join(dir, identity.NATSCredsFile)); err != nil {
			t.Errorf("%s: no NATS user: %v", id, err)
		}
		if id.Kind.NATSOnly() {
			if _, err := os.Stat(filepath.Join(dir, identity.CertFile)); err == nil {
				t.Errorf("%s: a NATS user alone got a certificate", id)
			}
			continue
		}
		creds, err := identity.Load(dir)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if got := creds.ID(); got.String() != id.String() || !slices.Equal(slices.Sorted(slices.Values(got.Types)), slices.Sorted(slices.Values(id.Types))) {
			t.Errorf("%s: credentials hold %s %v", id, got, got.Types)
		}
	}
	conf, err := os.ReadFile(d.NATSConfig)
	if err != nil || !strings.Contains(string(conf), "resolver_preload") {
		t.Fatalf("NATS include: %v\n%s", err, conf)
	}
	cert := mustRead(t, identityca.CredentialsDir(d.CredentialsRoot, identity.ServiceID(identity.Store)), identity.CertFile)

	res = ensure(t, d, now.Add(time.Hour))
	if res.CACreated || res.NATSKeysAdded || res.NATSConfigWritten || len(res.Issued) != 0 || len(res.Kept) != len(d.IDs) {
		t.Fatalf("second run changed something: %+v", res)
	}
	if !slices.Equal(cert, mustRead(t, identityca.CredentialsDir(d.CredentialsRoot, identity.ServiceID(identity.Store)), identity.CertFile)) {
		t.Fatal("second run replaced the store's certificate")
	}
	if again, _ := os.ReadFile(d.NATSConfig); string(again) != string(conf) {
		t.Fatal("second run rewrote the NATS include")
	}
}

// TestEnsureRenewsWhatIsStale: near expiry everything is issued again;
// a reconciler whose types changed, a credential removed, a CA rotation
// and a garbled NATS include each cause exactly their own reissue.
func TestEnsureRenewsWhatIsStale(t *testing.T) {
	d := deployment(t)
	now := time.Now()
	// Issued so long ago that now is within RenewBefore of the expiry
	// (the certificates must not start in the future: they are loaded
	// at the real time): every identity again.
	ensure(t, d, now.Add(-(identityca.DefaultLeafValidity - identityca.DefaultRenewBefore + time.Hour)))
	res := ensure(t, d, now)
	if len(res.Issued) != len(d.IDs) {
		t.Fatalf("near expiry issued %v, want all %d", issuedNames(res), len(d.IDs))
	}
	for id, why := range res.Issued {
		if !strings.Contains(why, "expires") {
			t.Errorf("%s issued because %q, want expiry", id, why)
		}
	}

	// Wrong types: the noop reconciler now serves one more type.
	for i, id := range d.IDs {
		if id.Name == "noop" {
			d.IDs[i].Types = append(slices.Clone(id.Types), "Cache/v1")
		}
	}
	os.RemoveAll(identityca.CredentialsDir(d.CredentialsRoot, identity.ID{Kind: identity.Reader, Name: "events"}))
	res = ensure(t, d, now)
	if got := issuedNames(res); !slices.Equal(got, []string{"reader/events", "reconciler/noop"}) {
		t.Fatalf("after a type change and a removal issued %v", got)
	}
	claims, err := identityca.ReadClaims(d.CADir)
	if err != nil || claims["Cache/v1"].Reconciler != "noop" {
		t.Fatalf("Cache/v1 not claimed by noop: %v %v", claims, err)
	}

	// A rotated CA: every certificate again; NATS users keep (same keys).
	ca, err := identityca.Load(d.CADir)
	if err != nil {
		t.Fatal(err)
	}
	next, err := ca.Rotate(now, identityca.DefaultCAValidity)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Save(d.CADir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.NATSConfig, []byte("# garbled\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = ensure(t, d, now)
	if len(res.Issued) != len(d.IDs)-2 || !res.NATSConfigWritten {
		t.Fatalf("after a rotation issued %v (NATS include written %v), want every certificate", issuedNames(res), res.NATSConfigWritten)
	}
	for _, k := range []string{"publisher/queue-input", "reader/events"} {
		if _, ok := res.Issued[k]; ok {
			t.Errorf("%s issued again after a rotation that kept the NATS keys", k)
		}
	}
}

// TestEnsureAddsNATSToAnOlderCA: a CA and credentials from before NATS
// users get NATS keys, and each credential its NATS user.
func TestEnsureAddsNATSToAnOlderCA(t *testing.T) {
	d := deployment(t)
	now := time.Now()
	ca, _, err := identityca.LoadOrCreate(d.CADir, now)
	if err != nil {
		t.Fatal(err)
	}
	store := identity.ServiceID(identity.Store)
	if err := ca.IssueTo(identityca.CredentialsDir(d.CredentialsRoot, store), store, now, identityca.DefaultLeafValidity); err != nil {
		t.Fatal(err)
	}
	d.IDs = []identity.ID{store}
	res := ensure(t, d, now)
	if res.CACreated || !res.NATSKeysAdded || res.Issued["service/store"] != "no NATS user" {
		t.Fatalf("older CA: %+v", res)
	}
}

// TestEnsureRefusesAClaimedType: a type another reconciler holds fails
// Ensure, naming the holder; invalid identities and a renewal window
// longer than the validity fail before anything is written.
func TestEnsureRefusesAClaimedType(t *testing.T) {
	d := deployment(t)
	now := time.Now()
	ensure(t, d, now)
	d.IDs = []identity.ID{{Kind: identity.Reconciler, Name: "other", Types: []string{"Tenant/v1"}}}
	_, _, err := identityca.Ensure(d, now)
	if !errors.Is(err, identityca.ErrClaimed) || !strings.Contains(err.Error(), "reconciler/tenant") {
		t.Fatalf("a claimed type: %v", err)
	}

	fresh := deployment(t)
	fresh.IDs = []identity.ID{identity.ServiceID("nope")}
	if _, _, err := identityca.Ensure(fresh, now); err == nil {
		t.Fatal("an unknown service was issued")
	}
	fresh = deployment(t)
	fresh.RenewBefore = 2 * fresh.Validity
	fresh.Validity = time.Hour
	if _, _, err := identityca.Ensure(fresh, now); err == nil {
		t.Fatal("a renewal window longer than the validity passed")
	}
	if _, err := os.Stat(fresh.CADir); err == nil {
		t.Fatal("a refused Ensure created the CA")
	}
}
