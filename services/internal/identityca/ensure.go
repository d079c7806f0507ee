package identityca

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/no8s/no8s/libs/platform/identity"
)

// DefaultRenewBefore is how close to its expiry Ensure issues a credential
// again: a deployment that runs Ensure now and then (at every start, or
// weekly) never runs on an expired one.
const DefaultRenewBefore = 7 * 24 * time.Hour

// CredentialsDir is the credentials directory of id under root, as Ensure
// lays them out: "<kind>-<name>" (service-store, reconciler-tenant,
// publisher-queue-input).
func CredentialsDir(root string, id identity.ID) string {
	return filepath.Join(root, string(id.Kind)+"-"+id.Name)
}

// Deployment is what Ensure keeps issued: a CA directory, the identities
// of a deployment and where their credentials and the NATS server's part
// of the configuration go.
type Deployment struct {
	// CADir is the CA directory, created (with NATS keys) when it has no CA.
	CADir string
	// CredentialsRoot holds one credentials directory per identity
	// (CredentialsDir).
	CredentialsRoot string
	// IDs are the identities: services and reconcilers get a certificate
	// (and a NATS user), publishers, readers and NATS admins a NATS user
	// alone.
	IDs []identity.ID
	// Hosts are added to every certificate for tools that check host names.
	Hosts []string
	// NATSConfig, when set, is the file written with the NATS server's part
	// of the configuration (NATSServer.Config), the include of
	// deploy/nats/nats-server.conf.
	NATSConfig string
	// Validity of what is issued (DefaultLeafValidity when 0); RenewBefore
	// (DefaultRenewBefore when 0): a credential expiring within it is
	// issued again.
	Validity, RenewBefore time.Duration
}

// EnsureResult says what Ensure did.
type EnsureResult struct {
	// CACreated: the CA directory had no CA. NATSKeysAdded: the CA had no
	// NATS keys.
	CACreated, NATSKeysAdded bool
	// Issued are the identities issued, each with why; Kept are those
	// whose credentials were fine.
	Issued map[string]string
	Kept   []string
	// NATSConfigWritten: NATSConfig was missing or belonged to other keys.
	NATSConfigWritten bool
}

// Ensure makes d hold: the CA exists with NATS keys, every identity of
// d.IDs has fresh credentials in its CredentialsDir, and d.NATSConfig
// trusts the CA's NATS users. It changes only what is missing or stale, so
// that running it again changes nothing; the rules, in order, for one
// identity's credentials (the first that holds issues them again):
//
//  1. a NATS user alone (publisher, reader, NATS admin): nats.creds is
//     missing, unreadable, another identity's, signed by another account,
//     or expires within RenewBefore;
//  2. a certificate: the directory does not load, holds another identity
//     (kind, name or types), trusts another CA bundle (the CA was replaced
//     or rotated), expires within RenewBefore, or has no NATS user, or one
//     of another account.
//
// A reconciler's types are claimed in the CA directory before its
// certificate is issued (ClaimTypes), so a type held by another reconciler
// fails Ensure, naming it. no8s dev and `no8s identity ensure` both go
// through here.
func Ensure(d Deployment, now time.Time) (*CA, *EnsureResult, error) {
	if d.Validity == 0 {
		d.Validity = DefaultLeafValidity
	}
	if d.RenewBefore == 0 {
		d.RenewBefore = DefaultRenewBefore
	}
	if d.RenewBefore >= d.Validity {
		return nil, nil, fmt.Errorf("ensure: renew-before %s must be shorter than the validity %s (every run would issue everything again)", d.RenewBefore, d.Validity)
	}
	for _, id := range d.IDs {
		if err := id.Validate(); err != nil {
			return nil, nil, fmt.Errorf("ensure: %w", err)
		}
	}
	res := &EnsureResult{Issued: map[string]string{}}
	ca, created, err := LoadOrCreate(d.CADir, now)
	if err != nil {
		return nil, nil, err
	}
	res.CACreated = created
	if res.NATSKeysAdded, err = ca.EnableNATS(d.CADir); err != nil {
		return nil, nil, err
	}
	for _, id := range d.IDs {
		dir := CredentialsDir(d.CredentialsRoot, id)
		why := ca.stale(dir, id, now.Add(d.RenewBefore))
		if why == "" {
			res.Kept = append(res.Kept, id.String())
			continue
		}
		if id.Kind.NATSOnly() {
			err = ca.IssueNATSTo(dir, id, now, d.Validity)
		} else {
			if err = ClaimTypes(d.CADir, id, now.Add(d.Validity), now); err == nil {
				err = ca.IssueTo(dir, id, now, d.Validity, d.Hosts...)
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("identity %s: %w", id, err)
		}
		res.Issued[id.String()] = why
	}
	if d.NATSConfig != "" {
		if res.NATSConfigWritten, err = ca.ensureNATSConfig(d.NATSConfig, now); err != nil {
			return nil, nil, err
		}
	}
	return ca, res, nil
}

// stale returns why the credentials directory dir does not hold id's
// fresh credentials from ca until at least renewAt, "" when it does.
func (ca *CA) stale(dir string, id identity.ID, renewAt time.Time) string {
	if !id.Kind.NATSOnly() {
		creds, err := identity.Load(dir)
		switch {
		case err != nil:
			return "missing or unreadable"
		case !sameID(creds.ID(), id):
			return "holds " + creds.ID().String() + " " + strings.Join(creds.ID().Types, ",")
		case creds.NotAfter().Before(renewAt):
			return "expires " + creds.NotAfter().UTC().Format(time.RFC3339)
		}
		if b, err := os.ReadFile(filepath.Join(dir, identity.CAFile)); err != nil || !bytes.Equal(b, ca.bundle) {
			return "trusts another CA bundle"
		}
	}
	return ca.staleNATSUser(dir, id, renewAt)
}

// staleNATSUser returns why dir's NATS user is not id's fresh user of the
// CA's account ("" when it is, or when the CA has no NATS keys).
func (ca *CA) staleNATSUser(dir string, id identity.ID, renewAt time.Time) string {
	if ca.nats == nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(dir, identity.NATSCredsFile))
	if err != nil {
		return "no NATS user"
	}
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return "unreadable NATS user"
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "unreadable NATS user"
	}
	account, _ := ca.nats.account.PublicKey()
	switch {
	case uc.Issuer != account:
		return "NATS user of another account"
	case uc.Name != id.String():
		return "NATS user of " + uc.Name
	case uc.Expires != 0 && time.Unix(uc.Expires, 0).Before(renewAt):
		return "NATS user expires " + time.Unix(uc.Expires, 0).UTC().Format(time.RFC3339)
	}
	return ""
}

// sameID reports whether a and b are one identity claiming the same types,
// in any order.
func sameID(a, b identity.ID) bool {
	return a.Kind == b.Kind && a.Name == b.Name &&
		slices.Equal(slices.Sorted(slices.Values(a.Types)), slices.Sorted(slices.Values(b.Types)))
}

// ensureNATSConfig writes the NATS server's part of the configuration to
// path unless path already trusts the CA's operator and accounts (a file
// written from the same keys). It reports whether it wrote.
func (ca *CA) ensureNATSConfig(path string, now time.Time) (bool, error) {
	srv, err := ca.NATSServer(now)
	if err != nil {
		return false, err
	}
	if old, err := os.ReadFile(path); err == nil && sameNATSTrust(old, srv) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("NATS configuration: %w", err)
	}
	return true, writeFile(path, srv.Config(), 0o644)
}

// sameNATSTrust reports whether the configuration conf, written by
// Config, trusts what srv does: the same operator, system account and
// preloaded accounts, and the protocol line a user JWT needs. The JWTs'
// issue times may differ.
func sameNATSTrust(conf []byte, srv *NATSServer) bool {
	s := string(conf)
	if !strings.Contains(s, fmt.Sprintf("max_control_line: %d\n", NATSMaxControlLine)) ||
		!strings.Contains(s, "system_account: "+srv.SystemAccount+"\n") {
		return false
	}
	for pub := range srv.Accounts {
		if !strings.Contains(s, "\n  "+pub+": ") {
			return false
		}
	}
	_, rest, ok := strings.Cut(s, "\noperator: \"")
	if !ok {
		return false
	}
	token, _, _ := strings.Cut(rest, "\"")
	oc, err := jwt.DecodeOperatorClaims(token)
	return err == nil && oc.Subject == srv.Operator.Subject
}
