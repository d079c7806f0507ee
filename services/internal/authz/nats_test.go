package authz_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/natsembed"
)

// natsUsers starts an embedded NATS server that trusts a fresh CA's NATS
// users and returns a function connecting as an identity, with the
// credentials `no8s identity issue` writes.
func natsUsers(t *testing.T) (url string, connect func(t *testing.T, id identity.ID) *nats.Conn) {
	t.Helper()
	now := time.Now()
	ca, err := identityca.New(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.EnableNATS(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	srv, err := ca.NATSServer(now)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := natsembed.Start(t.TempDir(), -1, srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	root := t.TempDir()
	return ns.ClientURL(), func(t *testing.T, id identity.ID) *nats.Conn {
		t.Helper()
		dir := filepath.Join(root, strings.ReplaceAll(id.String(), "/", "_"))
		if _, err := os.Stat(dir); err != nil {
			if id.Kind.NATSOnly() {
				err = ca.IssueNATSTo(dir, id, now, time.Hour)
			} else {
				err = ca.IssueTo(dir, id, now, time.Hour)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		opts := []nats.Option{nats.UserCredentials(filepath.Join(dir, identity.NATSCredsFile)), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}
		if !id.Kind.NATSOnly() {
			creds, err := identity.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			more, err := creds.NATSOptions()
			if err != nil || len(more) == 0 {
				t.Fatalf("NATSOptions: %d options, %v", len(more), err)
			}
			opts = append(opts, more...)
		}
		nc, err := nats.Connect(ns.ClientURL(), opts...)
		if err != nil {
			t.Fatalf("connect as %s: %v", id, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
}

// refused reports whether the server answered what f sent on a fresh
// connection as id with a permissions violation.
func refused(t *testing.T, connect func(*testing.T, identity.ID) *nats.Conn, id identity.ID, f func(nc *nats.Conn) error) bool {
	t.Helper()
	nc := connect(t, id)
	if err := f(nc); err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("%s: flush: %v", id, err)
	}
	return errors.Is(nc.LastError(), nats.ErrPermissionViolation)
}

// TestNATSPolicyMatrix makes every cell of the NATS policy a real publish,
// subscription or JetStream API request from each identity against a NATS
// server that trusts the CA's users, and checks that the server allows
// exactly what authz.NATS says: every subject family of
// libs/api/subjects, and creating, changing, purging, deleting and
// reading every stream.
func TestNATSPolicyMatrix(t *testing.T) {
	_, connect := natsUsers(t)
	ids := append(authz.NATSSamples(), identity.ID{Kind: identity.Reconciler, Name: "other", Types: []string{"Other/v1"}}, identity.ID{Kind: identity.NATSAdmin, Name: "ops"})
	for _, id := range ids {
		p := authz.NATS(id)
		for _, f := range subjects.Families() {
			if got := refused(t, connect, id, func(nc *nats.Conn) error { return nc.Publish(f.Example, nil) }); got == p.MayPublish(f.Example) {
				t.Errorf("%s publishing on %s (%s): refused %v, policy allows %v", id, f.Name, f.Example, got, p.MayPublish(f.Example))
			}
			if got := refused(t, connect, id, func(nc *nats.Conn) error { _, err := nc.SubscribeSync(f.Example); return err }); got == p.MaySubscribe(f.Example) {
				t.Errorf("%s subscribing to %s (%s): refused %v, policy allows %v", id, f.Name, f.Example, got, p.MaySubscribe(f.Example))
			}
		}
		for _, s := range subjects.Streams() {
			for _, verb := range []string{"STREAM.INFO", "STREAM.CREATE", "STREAM.UPDATE", "STREAM.PURGE", "STREAM.DELETE", "STREAM.MSG.GET", "CONSUMER.LIST"} {
				subj := "$JS.API." + verb + "." + s
				// An empty request: an allowed one gets JetStream's answer
				// (unread), a refused one never reaches JetStream.
				if got := refused(t, connect, id, func(nc *nats.Conn) error { return nc.PublishRequest(subj, nc.NewRespInbox(), []byte("{}")) }); got == p.MayPublish(subj) {
					t.Errorf("%s requesting %s: refused %v, policy allows %v", id, subj, got, p.MayPublish(subj))
				}
			}
		}
	}
}

// TestNATSPolicySaysWhatTheSecurityGuidePromises checks the policy itself
// against the rules it exists for, written out here rather than derived
// from it: who alone may publish events and work items, write which
// registry keys, take input, and change or destroy streams.
func TestNATSPolicySaysWhatTheSecurityGuidePromises(t *testing.T) {
	store, gateway, scheduler := identity.ServiceID(identity.Store), identity.ServiceID(identity.Gateway), identity.ServiceID(identity.Scheduler)
	example := identity.ID{Kind: identity.Reconciler, Name: "example", Types: []string{"Example/v1"}}
	publisher, reader := identity.ID{Kind: identity.Publisher, Name: "publisher"}, identity.ID{Kind: identity.Reader, Name: "reader"}
	ids := append(authz.NATSSamples(), identity.ID{Kind: identity.Reconciler, Name: "other", Types: []string{"Other/v1"}})
	only := func(what string, ok func(authz.NATSPermissions) bool, want ...identity.ID) {
		t.Helper()
		for _, id := range ids {
			allowed := slices.ContainsFunc(want, func(w identity.ID) bool { return w.String() == id.String() })
			if got := ok(authz.NATS(id)); got != allowed {
				t.Errorf("%s: %s may %v, want %v", what, id, got, allowed)
			}
		}
	}
	pub := func(s string) func(authz.NATSPermissions) bool {
		return func(p authz.NATSPermissions) bool { return p.MayPublish(s) }
	}
	sub := func(s string) func(authz.NATSPermissions) bool {
		return func(p authz.NATSPermissions) bool { return p.MaySubscribe(s) }
	}
	only("publish events", pub(subjects.Event("Example", "v1")), store)
	only("publish work items", pub(subjects.Reconcile("Example", "v1")), scheduler)
	only("write the registry key of Example/v1", pub(subjects.KVKey(subjects.RegistryBucket, subjects.TypeKey("Example", "v1"))), example)
	only("write the replica keys of example", pub(subjects.KVKey(subjects.RegistryBucket, subjects.ReplicaKey("example", "r1"))), example)
	only("take input requests", sub(subjects.InputRequestApply), gateway)
	only("publish outcomes", pub(subjects.InputOutcome("k")), gateway)
	only("publish input", pub(subjects.InputQueueApply), publisher)
	only("read outcomes", sub(subjects.InputOutcome("k")), publisher)
	only("publish audit records", pub(subjects.Audit("denied")), gateway)
	only("subscribe to audit records", sub(subjects.Audit("denied")))
	only("consume the audit stream", pub("$JS.API.CONSUMER.CREATE."+subjects.AuditStream))
	only("subscribe to events", sub(subjects.Event("Example", "v1")), reader)
	only("consume example's work", pub("$JS.API.CONSUMER.MSG.NEXT."+subjects.ReconcileStream+".example"), example)
	for _, s := range subjects.Streams() {
		var owner []identity.ID
		switch s {
		case subjects.EventsStream, subjects.KVStream(subjects.RegistryBucket):
			owner = []identity.ID{store}
		case subjects.ReconcileStream:
			owner = []identity.ID{scheduler}
		default:
			owner = []identity.ID{gateway}
		}
		only("create "+s, pub("$JS.API.STREAM.CREATE."+s), owner...)
		only("update "+s, pub("$JS.API.STREAM.UPDATE."+s), owner...)
		var destroyer []identity.ID
		if s == subjects.EventsStream {
			destroyer = []identity.ID{store} // the rebuild after a mismatch
		}
		only("purge "+s, pub("$JS.API.STREAM.PURGE."+s), destroyer...)
		only("delete "+s, pub("$JS.API.STREAM.DELETE."+s), destroyer...)
	}
	for _, id := range ids {
		p := authz.NATS(id)
		if len(p.Publish) == 0 || len(p.Subscribe) == 0 {
			t.Errorf("%s: an empty permission list would allow everything in a user JWT", id)
		}
		if id.Kind != identity.Publisher && id.Kind != identity.Reader && p.MaySubscribe("_INBOX.x") {
			t.Errorf("%s may read NATS's default inboxes: other clients' replies", id)
		}
	}
}

// TestNATSMatch pins the subject matching the policy's table and checks
// use.
func TestNATSMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		want             bool
	}{
		{"no8s.events.>", "no8s.events.Db.v1", true},
		{"no8s.events.>", "no8s.events", false},
		{"no8s.events.>", "no8s.events.>", true},
		{"no8s.*.Db", "no8s.events.Db", true},
		{"no8s.*.Db", "no8s.events.Db.v1", false},
		{"no8s.*", "no8s.>", false},
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.b.c", "a.b", false},
	} {
		if got := authz.NATSMatch(c.pattern, c.subject); got != c.want {
			t.Errorf("NATSMatch(%q, %q) = %v, want %v", c.pattern, c.subject, got, c.want)
		}
	}
}
