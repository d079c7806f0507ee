package devstack

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/no8s/no8s/libs/sdk/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

// The identity layout of a data directory: IdentityDirName holds the CA
// (CADirName) and one credentials directory per component of the stack,
// named "<kind>-<name>" (service-store, reconciler-tenant).
const (
	IdentityDirName = "identity"
	CADirName       = "ca"
)

// EnvIdentities is the environment variable behind no8s dev's
// --identities: on (the default) or off.
const EnvIdentities = "NO8S_DEV_IDENTITIES"

// ParseIdentities reads --identities: "on" or "off" ("" is on).
func ParseIdentities(s string) (bool, error) {
	switch s {
	case "", "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("--identities %q: want on or off", s)
}

// renewBefore is how close to its expiry a credential of the stack is
// issued again at start: a stack restarted now and then never runs on an
// expired one.
const renewBefore = 7 * 24 * time.Hour

// IdentityDir is where the stack keeps its CA and credentials.
func (c Config) IdentityDir() string { return filepath.Join(c.DataDir, IdentityDirName) }

// CADir is the stack's CA directory: `no8s identity issue --ca-dir` and
// `no8s-reconciler --identity-ca` take it.
func (c Config) CADir() string { return filepath.Join(c.IdentityDir(), CADirName) }

// identities are the credentials of the stack's components, by identity
// ("service/store", "reconciler/tenant"); empty with identities off.
type identities map[string]*identity.Credentials

// of returns the credentials of id (nil with identities off).
func (ids identities) of(id identity.ID) *identity.Credentials { return ids[id.String()] }

// service returns the credentials of the control plane service name.
func (ids identities) service(name string) *identity.Credentials {
	return ids.of(identity.ServiceID(name))
}

// trusts reports whether the credentials directory dir trusts exactly
// ca's bundle (not when the CA was replaced or rotated since).
func trusts(dir string, ca *identityca.CA) bool {
	b, err := os.ReadFile(filepath.Join(dir, identity.CAFile))
	return err == nil && bytes.Equal(b, ca.Bundle())
}

// loadIdentities loads the stack's CA from the data directory, creating it
// at first start, and the credentials of every identity in ids, issuing
// each again when it is missing, does not load, trusts another CA bundle
// (the CA was replaced or rotated) or expires within renewBefore. A reconciler's types are claimed
// in the CA directory first (identityca.ClaimTypes), as every issuer must.
func loadIdentities(cfg Config, ids []identity.ID, now time.Time, log *slog.Logger) (identities, error) {
	caDir := cfg.CADir()
	ca, created, err := identityca.LoadOrCreate(caDir, now)
	if err != nil {
		return nil, fmt.Errorf("identities: %w", err)
	}
	if created {
		log.Info("created the development CA: every service of no8s dev proves who it is with a certificate it issues", "ca", caDir)
	}
	// The embedded NATS server takes only the CA's NATS users (natsAuth).
	if _, err := ca.EnableNATS(caDir); err != nil {
		return nil, fmt.Errorf("identities: %w", err)
	}
	out := identities{}
	for _, id := range ids {
		dir := filepath.Join(cfg.IdentityDir(), string(id.Kind)+"-"+id.Name)
		creds, err := identity.Load(dir)
		if err != nil || creds.NotAfter().Before(now.Add(renewBefore)) || !sameTypes(creds.ID(), id) || !trusts(dir, ca) || !hasNATSUser(dir) {
			if err := identityca.ClaimTypes(caDir, id, now.Add(identityca.DefaultLeafValidity), now); err != nil {
				return nil, fmt.Errorf("identity %s: %w", id, err)
			}
			if err := ca.IssueTo(dir, id, now, identityca.DefaultLeafValidity, "127.0.0.1", "localhost"); err != nil {
				return nil, fmt.Errorf("identity %s: %w", id, err)
			}
			if creds, err = identity.Load(dir); err != nil {
				return nil, fmt.Errorf("identity %s: %w", id, err)
			}
			log.Debug("issued", "identity", id.String(), "dir", dir, "valid_until", creds.NotAfter().UTC().Format(time.RFC3339))
		}
		out[id.String()] = creds
	}
	return out, nil
}

// sameTypes reports whether a and b claim the same types, in any order.
func sameTypes(a, b identity.ID) bool {
	return slices.Equal(slices.Sorted(slices.Values(a.Types)), slices.Sorted(slices.Values(b.Types)))
}

// NATSCreds is the NATS user file no8s dev issues for a developer's tools
// of kind (identity.Publisher or identity.Reader), named dev.
func (c Config) NATSCreds(kind identity.Kind) string {
	return filepath.Join(c.IdentityDir(), string(kind)+"-dev", identity.NATSCredsFile)
}

// natsAuth returns the server side of the stack CA's NATS users, for the
// embedded NATS server, and issues the developer's NATS users (NATSCreds)
// afresh.
func natsAuth(cfg Config, now time.Time) (*identityca.NATSServer, error) {
	ca, err := identityca.Load(cfg.CADir())
	if err != nil {
		return nil, fmt.Errorf("identities: %w", err)
	}
	for _, kind := range []identity.Kind{identity.Publisher, identity.Reader} {
		if err := ca.IssueNATSTo(filepath.Dir(cfg.NATSCreds(kind)), identity.ID{Kind: kind, Name: "dev"}, now, identityca.DefaultLeafValidity); err != nil {
			return nil, fmt.Errorf("identity %s/dev: %w", kind, err)
		}
	}
	return ca.NATSServer(now)
}

// hasNATSUser reports whether the credentials directory dir holds a NATS
// user (not when it was issued before its CA had NATS keys).
func hasNATSUser(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, identity.NATSCredsFile))
	return err == nil
}
