package identityca

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/authz"
)

// NATSKeysFile holds the CA's NATS keys: the seeds of the NATS operator, of
// the account every no8s user belongs to and of NATS's system account.
// Every identity issued gets a NATS user signed by the account, with the
// permissions authz.NATS gives it; a NATS server trusts the operator
// (NATSServer).
const NATSKeysFile = "nats.json"

// NATSMaxControlLine is the longest protocol line a NATS server that
// trusts the CA's users must take: a CONNECT carries the user JWT, whose
// permissions (the gateway's the longest) go past NATS's default of 4 KiB.
const NATSMaxControlLine = 32 << 10

// natsKeys are the CA's NATS keys.
type natsKeys struct {
	operator, account, system nkeys.KeyPair
}

// natsSeeds is NATSKeysFile's content.
type natsSeeds struct {
	Operator string `json:"operator"`
	Account  string `json:"account"`
	System   string `json:"system"`
}

// newNATSKeys creates a NATS operator and its two accounts.
func newNATSKeys() (*natsKeys, error) {
	op, err := nkeys.CreateOperator()
	if err != nil {
		return nil, fmt.Errorf("NATS operator key: %w", err)
	}
	acc, err := nkeys.CreateAccount()
	if err != nil {
		return nil, fmt.Errorf("NATS account key: %w", err)
	}
	sys, err := nkeys.CreateAccount()
	if err != nil {
		return nil, fmt.Errorf("NATS system account key: %w", err)
	}
	return &natsKeys{operator: op, account: acc, system: sys}, nil
}

// loadNATSKeys reads dir's NATSKeysFile; nil without error when dir has
// none (NATS does not check identities: EnableNATS).
func loadNATSKeys(dir string) (*natsKeys, error) {
	path := filepath.Join(dir, NATSKeysFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	var s natsSeeds
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("CA: %s: %w", path, err)
	}
	k := &natsKeys{}
	for _, f := range []struct {
		seed   string
		prefix nkeys.PrefixByte
		to     *nkeys.KeyPair
	}{{s.Operator, nkeys.PrefixByteOperator, &k.operator}, {s.Account, nkeys.PrefixByteAccount, &k.account}, {s.System, nkeys.PrefixByteAccount, &k.system}} {
		kp, err := nkeys.FromSeed([]byte(f.seed))
		if err != nil {
			return nil, fmt.Errorf("CA: %s: %w", path, err)
		}
		if pub, _ := kp.PublicKey(); !nkeys.IsValidPublicKey(pub) || nkeys.Prefix(pub) != f.prefix {
			return nil, fmt.Errorf("CA: %s: a seed of the wrong kind", path)
		}
		*f.to = kp
	}
	return k, nil
}

// save writes k to dir's NATSKeysFile, readable by its owner only.
func (k *natsKeys) save(dir string) error {
	var s natsSeeds
	for _, f := range []struct {
		kp nkeys.KeyPair
		to *string
	}{{k.operator, &s.Operator}, {k.account, &s.Account}, {k.system, &s.System}} {
		seed, err := f.kp.Seed()
		if err != nil {
			return fmt.Errorf("CA: NATS key: %w", err)
		}
		*f.to = string(seed)
	}
	b, _ := json.MarshalIndent(s, "", "  ") // strings only: cannot fail
	return writeFile(filepath.Join(dir, NATSKeysFile), append(b, '\n'), 0o600)
}

// HasNATS reports whether the CA issues NATS users.
func (ca *CA) HasNATS() bool { return ca.nats != nil }

// EnableNATS gives the CA NATS keys, unless it has them, and saves them in
// dir: from then on every identity issued also gets a NATS user, and a NATS
// server configured from NATSServer takes only those users. It reports
// whether it created them. A CA without NATS keys issues certificates
// alone: its processes connect to NATS without a user, as to a server that
// checks none (a user JWT is longer than such a server's default protocol
// line, NATSMaxControlLine).
func (ca *CA) EnableNATS(dir string) (bool, error) {
	if ca.nats != nil {
		return false, nil
	}
	nk, err := newNATSKeys()
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("CA: %w", err)
	}
	if err := nk.save(dir); err != nil {
		return false, err
	}
	ca.nats = nk
	return true, nil
}

// IssueNATS returns the NATS user of id, valid from now for validity, as a
// NATS credentials file (identity.NATSCredsFile): a user JWT signed by the
// no8s account with id's permissions (authz.NATS), and the user's seed.
func (ca *CA) IssueNATS(id identity.ID, now time.Time, validity time.Duration) ([]byte, error) {
	if ca.nats == nil {
		return nil, fmt.Errorf("CA: no NATS keys (%s): run `no8s identity init-ca --nats` on the CA directory to add them", NATSKeysFile)
	}
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if validity <= 0 {
		return nil, fmt.Errorf("CA: validity %s: want more than 0", validity)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("NATS user key: %w", err)
	}
	pub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Name = id.String()
	uc.IssuedAt = now.Unix()
	uc.NotBefore = now.Add(-time.Minute).Unix()
	uc.Expires = now.Add(validity).Unix()
	perms := authz.NATS(id)
	uc.Pub.Allow.Add(perms.Publish...)
	uc.Sub.Allow.Add(perms.Subscribe...)
	if perms.Respond {
		uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	}
	token, err := uc.Encode(ca.nats.account)
	if err != nil {
		return nil, fmt.Errorf("NATS user %s: %w", id, err)
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, fmt.Errorf("NATS user key: %w", err)
	}
	return jwt.FormatUserConfig(token, seed)
}

// IssueNATSTo issues id's NATS user (IssueNATS) and writes it to dir's
// identity.NATSCredsFile, replaced whole.
func (ca *CA) IssueNATSTo(dir string, id identity.ID, now time.Time, validity time.Duration) error {
	creds, err := ca.IssueNATS(id, now, validity)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return writeFile(filepath.Join(dir, identity.NATSCredsFile), creds, 0o600)
}

// NATSServer is what a NATS server needs to trust the users a CA issues:
// the operator, the system account and the no8s account (with JetStream),
// as JWTs the operator signed.
type NATSServer struct {
	// Operator is the operator's claims (server.Options.TrustedOperators).
	Operator *jwt.OperatorClaims
	// OperatorJWT is the same, encoded.
	OperatorJWT string
	// SystemAccount is the system account's public key.
	SystemAccount string
	// Account is the no8s account's public key.
	Account string
	// Accounts are the account JWTs by public key (the system account's
	// and the no8s account's), for a memory resolver.
	Accounts map[string]string
}

// NATSServer returns the server side of the CA's NATS users, signed at now.
func (ca *CA) NATSServer(now time.Time) (*NATSServer, error) {
	if ca.nats == nil {
		return nil, fmt.Errorf("CA: no NATS keys (%s): run `no8s identity init-ca --nats` on the CA directory to add them", NATSKeysFile)
	}
	opPub, _ := ca.nats.operator.PublicKey()
	sysPub, _ := ca.nats.system.PublicKey()
	accPub, _ := ca.nats.account.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "no8s"
	oc.IssuedAt = now.Unix()
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(ca.nats.operator)
	if err != nil {
		return nil, fmt.Errorf("NATS operator: %w", err)
	}
	s := &NATSServer{OperatorJWT: opJWT, SystemAccount: sysPub, Account: accPub, Accounts: map[string]string{}}
	if s.Operator, err = jwt.DecodeOperatorClaims(opJWT); err != nil {
		return nil, fmt.Errorf("NATS operator: %w", err)
	}
	sys := jwt.NewAccountClaims(sysPub)
	sys.Name = "SYS"
	acc := jwt.NewAccountClaims(accPub)
	acc.Name = "no8s"
	acc.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit}
	for _, a := range []*jwt.AccountClaims{sys, acc} {
		a.IssuedAt = now.Unix()
		t, err := a.Encode(ca.nats.operator)
		if err != nil {
			return nil, fmt.Errorf("NATS account %s: %w", a.Name, err)
		}
		s.Accounts[a.Subject] = t
	}
	return s, nil
}

// Config is the part of a nats-server configuration file that trusts the
// CA's users: the operator, the system account and a memory resolver
// preloaded with the accounts. deploy/nats/nats-server.conf includes it.
func (s *NATSServer) Config() []byte {
	var b bytes.Buffer
	b.WriteString("# The no8s installation's NATS operator and accounts, written by\n# `no8s identity nats-config`: every no8s identity's NATS user is signed by\n# the account below.\n")
	fmt.Fprintf(&b, "max_control_line: %d\n", NATSMaxControlLine)
	fmt.Fprintf(&b, "operator: %q\n", s.OperatorJWT)
	fmt.Fprintf(&b, "system_account: %s\n", s.SystemAccount)
	b.WriteString("resolver: MEMORY\nresolver_preload: {\n")
	for _, pub := range slices.Sorted(maps.Keys(s.Accounts)) {
		fmt.Fprintf(&b, "  %s: %q\n", pub, s.Accounts[pub])
	}
	b.WriteString("}\n")
	return b.Bytes()
}
