package devstack

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/identityca"
)

// The identity layout of a data directory: IdentityDirName holds the CA
// (CADirName) and one credentials directory per component of the stack,
// named "<kind>-<name>" (service-store, reconciler-tenant).
const (
	IdentityDirName = "identity"
	CADirName       = "ca"
)

// EnvIdentities is the older environment name of no8s dev's --identities
// (on, the default, or off), read after NO8S_IDENTITIES and deprecated
// (package flagenv).
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

// loadIdentities makes sure of the stack's CA and credentials in the data
// directory with identityca.Ensure (the CA with NATS keys at first start,
// and each identity of ids issued again when it is missing, stale or
// expires within identityca.DefaultRenewBefore, as `no8s identity ensure`
// does), then loads the credentials of every identity in ids that has a
// certificate (the developer's NATS users, devNATSUsers, have none).
func loadIdentities(cfg Config, ids []identity.ID, now time.Time, log *slog.Logger) (identities, error) {
	caDir := cfg.CADir()
	_, res, err := identityca.Ensure(identityca.Deployment{CADir: caDir, CredentialsRoot: cfg.IdentityDir(), IDs: ids,
		Hosts: []string{"127.0.0.1", "localhost"}}, now)
	if err != nil {
		return nil, fmt.Errorf("identities: %w", err)
	}
	if res.CACreated {
		log.Info("created the development CA: every service of no8s dev proves who it is with a certificate it issues", "ca", caDir)
	}
	out := identities{}
	for _, id := range ids {
		if id.Kind.NATSOnly() {
			continue // a NATS user alone: nothing to load (NATSCreds)
		}
		creds, err := identity.Load(identityca.CredentialsDir(cfg.IdentityDir(), id))
		if err != nil {
			return nil, fmt.Errorf("identity %s: %w", id, err)
		}
		if why, ok := res.Issued[id.String()]; ok {
			log.Debug("issued", "identity", id.String(), "why", why, "dir", creds.Dir(), "valid_until", creds.NotAfter().UTC().Format(time.RFC3339))
		}
		out[id.String()] = creds
	}
	return out, nil
}

// NATSCreds is the NATS user file no8s dev issues for a developer's tools
// of kind (identity.Publisher or identity.Reader), named dev.
func (c Config) NATSCreds(kind identity.Kind) string {
	return filepath.Join(identityca.CredentialsDir(c.IdentityDir(), identity.ID{Kind: kind, Name: "dev"}), identity.NATSCredsFile)
}

// devNATSUsers are the developer's NATS users (NATSCreds), issued with the
// stack's identities.
func devNATSUsers() []identity.ID {
	return []identity.ID{{Kind: identity.Publisher, Name: "dev"}, {Kind: identity.Reader, Name: "dev"}}
}

// natsAuth returns the server side of the stack CA's NATS users, for the
// embedded NATS server.
func natsAuth(cfg Config, now time.Time) (*identityca.NATSServer, error) {
	ca, err := identityca.Load(cfg.CADir())
	if err != nil {
		return nil, fmt.Errorf("identities: %w", err)
	}
	return ca.NATSServer(now)
}
