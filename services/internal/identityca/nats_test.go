package identityca_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/natsembed"
)

// TestNATSUsersAcrossUpgradeRotationAndExpiry: a CA issues NATS users only
// once EnableNATS gave it NATS keys, which it keeps after; every identity
// issued then gets a NATS user the server takes; a CA rotation keeps the
// keys, so users issued before it still connect; an expired user, a user
// of another CA and a connection without a user are refused.
func TestNATSUsersAcrossUpgradeRotationAndExpiry(t *testing.T) {
	now := time.Now()
	dir := filepath.Join(t.TempDir(), "ca")
	ca, _, err := identityca.LoadOrCreate(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if ca.HasNATS() {
		t.Fatal("a new CA has NATS keys before EnableNATS")
	}
	creds := t.TempDir()
	if err := ca.IssueTo(creds, identity.ServiceID(identity.Store), now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(creds, identity.NATSCredsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a CA without NATS keys wrote a NATS user: %v", err)
	}
	if _, err := ca.NATSServer(now); err == nil || !strings.Contains(err.Error(), "init-ca --nats") {
		t.Fatalf("NATSServer without keys: %v", err)
	}
	if created, err := ca.EnableNATS(dir); err != nil || !created || !ca.HasNATS() {
		t.Fatalf("EnableNATS: %v %v", created, err)
	}
	if created, err := ca.EnableNATS(dir); err != nil || created {
		t.Fatalf("EnableNATS again: created %v, %v", created, err)
	}
	again, err := identityca.Load(dir)
	if err != nil || !again.HasNATS() {
		t.Fatalf("the NATS keys were not saved: %v", err)
	}

	srv, err := ca.NATSServer(now)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := natsembed.Start(t.TempDir(), -1, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	connect := func(dir string) error {
		nc, err := nats.Connect(ns.ClientURL(), nats.UserCredentials(filepath.Join(dir, identity.NATSCredsFile)), nats.NoReconnect())
		if err == nil {
			nc.Close()
		}
		return err
	}

	before := t.TempDir()
	if err := again.IssueTo(before, identity.ServiceID(identity.Gateway), now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := connect(before); err != nil {
		t.Fatalf("the gateway's NATS user: %v", err)
	}
	rotated, err := again.Rotate(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := rotated.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := connect(before); err != nil {
		t.Fatalf("a NATS user issued before the CA rotation: %v", err)
	}
	after := t.TempDir()
	if err := rotated.Retire().IssueNATSTo(after, identity.ID{Kind: identity.Reader, Name: "audit"}, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := connect(after); err != nil {
		t.Fatalf("a reader issued after the rotation: %v", err)
	}
	if _, err := os.Stat(filepath.Join(after, identity.CertFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a NATS reader got a certificate: %v", err)
	}
	if _, _, err := rotated.Issue(identity.ID{Kind: identity.Publisher, Name: "orders"}, now, time.Hour); !errors.Is(err, identity.ErrInvalid) {
		t.Fatalf("a certificate for a NATS publisher: %v", err)
	}

	expired := t.TempDir()
	if err := rotated.IssueNATSTo(expired, identity.ServiceID(identity.Store), now.Add(-2*time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := connect(expired); !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthExpired) {
		t.Fatalf("an expired NATS user: %v", err)
	}
	other, err := identityca.New(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.EnableNATS(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	foreign := t.TempDir()
	if err := other.IssueNATSTo(foreign, identity.ServiceID(identity.Store), now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := connect(foreign); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a NATS user of another CA: %v", err)
	}
	if nc, err := nats.Connect(ns.ClientURL(), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a connection without a NATS user was taken")
	}

	// The user carries the identity's name and expiry.
	b, err := os.ReadFile(filepath.Join(before, identity.NATSCredsFile))
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	if uc.Name != "service/gateway" || uc.Expires != now.Add(time.Hour).Unix() || uc.Resp == nil {
		t.Fatalf("user claims: name %q expires %d resp %v", uc.Name, uc.Expires, uc.Resp)
	}
	if conf := string(srv.Config()); !strings.Contains(conf, "resolver: MEMORY") || !strings.Contains(conf, srv.SystemAccount) || !strings.Contains(conf, srv.Account) {
		t.Fatalf("server configuration:\n%s", conf)
	}
}
