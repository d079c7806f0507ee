package e2e

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/reconcilers"
)

// TestNATSServerConfigurationTakesOnlyTheCAUsers runs the pinned
// nats-server with deploy/nats/nats-server.conf and the part `no8s identity
// nats-config` writes, as an operator would: a connection without a NATS
// user is refused, a reader and a publisher issued by `no8s identity issue`
// connect, and each is refused what is not its job (a forged event, a
// forged outcome, creating or deleting a stream) while doing its own.
func TestNATSServerConfigurationTakesOnlyTheCAUsers(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	for _, args := range [][]string{
		{"identity", "init-ca", "--ca-dir", ca, "--nats"},
		{"identity", "issue", "--ca-dir", ca, "--out", filepath.Join(dir, "reader"), "--nats-reader", "audit"},
		{"identity", "issue", "--ca-dir", ca, "--out", filepath.Join(dir, "publisher"), "--nats-publisher", "orders"},
		{"identity", "issue", "--ca-dir", ca, "--out", filepath.Join(dir, "store"), "--service", "store"},
	} {
		if r := no8sEnv(t, nil, "", args...); r.code != 0 {
			t.Fatalf("no8s %v: %d %s", args, r.code, r.stderr)
		}
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	start(t, "nats-server", natsServerBinary(t), []string{"-c", natsConfig(t, ca, filepath.Join(dir, "js")), "-a", host, "-p", port, "-m", "0"})
	url := "nats://" + addr
	as := func(who string) (*nats.Conn, error) {
		return nats.Connect(url, nats.UserCredentials(filepath.Join(dir, who, identity.NATSCredsFile)), nats.NoReconnect(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	}
	var store *nats.Conn
	waitFor(t, 10*time.Second, "nats-server", func() error {
		var err error
		store, err = as("store")
		return err
	})
	defer store.Close()
	if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a connection without a NATS user was taken")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a connection without a NATS user: %v, want an authorization violation", err)
	}

	// The store's own job: the event stream, through its inbox prefix.
	creds, err := identity.Load(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := creds.NATSOptions()
	if err != nil {
		t.Fatal(err)
	}
	storeNC, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer storeNC.Close()
	if _, err := storeNC.Request("$JS.API.STREAM.CREATE."+subjects.EventsStream,
		[]byte(`{"name":"`+subjects.EventsStream+`","subjects":["`+subjects.EventsAll+`"],"storage":"memory"}`), 5*time.Second); err != nil {
		t.Fatalf("the store creating the event stream: %v", err)
	}

	refusedAs := func(who, what string, f func(nc *nats.Conn) error) {
		t.Helper()
		nc, err := as(who)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if err := f(nc); err != nil {
			t.Fatalf("%s %s: %v", who, what, err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := nc.LastError(); !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("%s %s: %v, want a permissions violation", who, what, err)
		}
	}
	refusedAs("reader", "publishing an event", func(nc *nats.Conn) error { return nc.Publish(subjects.Event("Db", "v1"), []byte("{}")) })
	refusedAs("publisher", "publishing an outcome", func(nc *nats.Conn) error { return nc.Publish(subjects.InputOutcome("k1"), []byte("{}")) })
	refusedAs("publisher", "subscribing to events", func(nc *nats.Conn) error { _, err := nc.SubscribeSync(subjects.EventsAll); return err })
	refusedAs("reader", "deleting the event stream", func(nc *nats.Conn) error {
		return nc.PublishRequest("$JS.API.STREAM.DELETE."+subjects.EventsStream, nc.NewRespInbox(), nil)
	})
	refusedAs("publisher", "creating a stream", func(nc *nats.Conn) error {
		return nc.PublishRequest("$JS.API.STREAM.CREATE.NO8S_INPUT", nc.NewRespInbox(), []byte(`{"name":"NO8S_INPUT"}`))
	})

	// Nothing changed: the event stream holds no message.
	info, err := storeNC.Request("$JS.API.STREAM.INFO."+subjects.EventsStream, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info.Data), `"messages":0`) {
		t.Fatalf("the event stream after the refused publishes: %s", info.Data)
	}

	// Each one's own job: the reader reads events, the publisher sends input.
	reader, err := as("reader")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	sub, err := reader.SubscribeSync(subjects.EventsAll)
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := storeNC.Publish(subjects.Event("Db", "v1"), []byte(`{"revision":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the reader reading the store's event: %v", err)
	}
	publisher, err := as("publisher")
	if err != nil {
		t.Fatal(err)
	}
	defer publisher.Close()
	if err := publisher.Publish(subjects.InputQueueApply, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := publisher.Flush(); err != nil || publisher.LastError() != nil {
		t.Fatalf("the publisher publishing input: %v %v", err, publisher.LastError())
	}
}

// newAuthCluster is newCluster on a nats-server started with
// deploy/nats/nats-server.conf and the part `no8s identity nats-config`
// writes: it takes only the CA's NATS users. Identities are on for every
// process; the harness's own connections (its checks) are a NATS admin's.
func newAuthCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterUsers(t, true)
}

// natsConfig writes deploy/nats/nats-server.conf, storing JetStream in
// storeDir, beside what `no8s identity nats-config` writes for the CA in
// caDir, and returns its path.
func natsConfig(t *testing.T, caDir, storeDir string) string {
	t.Helper()
	dir := t.TempDir()
	if r := no8sEnv(t, nil, "", "identity", "nats-config", "--ca-dir", caDir, "--out", filepath.Join(dir, "no8s-auth.conf")); r.code != 0 {
		t.Fatalf("no8s identity nats-config: %d %s", r.code, r.stderr)
	}
	conf, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", "nats-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// The configuration as written but for where JetStream stores
	// (nats-server refuses -sd beside a store_dir).
	conf = []byte(strings.Replace(string(conf), "store_dir: /data", "store_dir: "+strconv.Quote(storeDir), 1))
	path := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(path, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// natsUserFile is the NATS user file of a NATS-only identity (issue args
// "--nats-publisher", name or "--nats-reader", name), issued on first use.
func (c *cluster) natsUserFile(args ...string) string {
	return filepath.Join(c.credentials(args...), identity.NATSCredsFile)
}

// natsOptions are the harness's own NATS connection options: a NATS
// admin's user (issued on first use) on a server that checks users, none
// otherwise.
func (c *cluster) natsOptions() []nats.Option {
	if c.natsConf == "" {
		return nil
	}
	return []nats.Option{nats.UserCredentials(c.natsUserFile("--nats-admin", "e2e", "--valid", "2h"))}
}

// natsAdminOptions connect as a NATS admin issued from the CA in caDir
// (`no8s identity issue --nats-admin`): a test's own look at, or attack
// through, a NATS server that checks identities.
func natsAdminOptions(t *testing.T, caDir string) []nats.Option {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nats-admin")
	if r := no8sEnv(t, nil, "", "identity", "issue", "--ca-dir", caDir, "--out", dir, "--nats-admin", "e2e", "--valid", "2h"); r.code != 0 {
		t.Fatalf("no8s identity issue --nats-admin: %d %s", r.code, r.stderr)
	}
	return []nats.Option{nats.UserCredentials(filepath.Join(dir, identity.NATSCredsFile))}
}

// TestControlPlaneOnAuthenticatedNATS runs the separate services and a
// reconciler on a nats-server that takes only the CA's NATS users, each
// process connecting as its identity: a change goes to Ready through every
// NATS path (events, the work queue, the registry, the input queue), and
// the attacks NATS used to let through are refused with nothing changed: a
// forged registry entry, a forged outcome, a forged event, a stream purged
// or deleted by a reconciler.
func TestControlPlaneOnAuthenticatedNATS(t *testing.T) {
	c := newAuthCluster(t)
	base := c.startAll()
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "Guarded", "version": "v1",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}
	c.startReconciler(c.storeAddrs[0], "Guarded/v1")
	r := do(t, "POST", base+"/api/v1/resources", map[string]any{"name": "one", "resource_type_name": "Guarded", "resource_type_version": "v1", "spec": map[string]any{"size": 1}})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := int64(r.json(t)["id"].(float64))
	waitResource(t, base, id, "ready", func(m map[string]any) bool { return m["status"] == "ready" })

	// The input queue, as a NATS publisher: the gateway takes it and
	// answers on the outcome subject the publisher may read.
	pub, err := nats.Connect(c.natsURL, nats.UserCredentials(c.natsUserFile("--nats-publisher", "orders")))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	outcomes, err := pub.SubscribeSync(subjects.InputOutcome("auth-1"))
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(subjects.InputQueueApply)
	msg.Header.Set(subjects.InputKeyHeader, "auth-1")
	msg.Header.Set("Authorization", "Bearer "+adminToken)
	msg.Data = []byte("kind: Resource\ntype: Guarded/v1\nmetadata:\n  name: two\nspec:\n  size: 2\n")
	pjs, err := jetstream.New(pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pjs.PublishMsg(t.Context(), msg); err != nil {
		t.Fatalf("the publisher's input: %v", err)
	}
	out, err := outcomes.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("the outcome of the publisher's input: %v", err)
	}
	if st := out.Header.Get(subjects.InputStatusHeader); st != "201" {
		t.Fatalf("outcome %s: %s", st, out.Data)
	}
	var two struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(out.Data, &two); err != nil || two.ID == 0 {
		t.Fatalf("outcome body %s: %v", out.Data, err)
	}
	waitResource(t, base, two.ID, "ready", func(m map[string]any) bool { return m["status"] == "ready" })

	// The attacks, each refused by NATS, counted before and after.
	js, _ := c.jetstream()
	natsAttacksRefused(t, c.natsURL, js, map[string]string{
		"reconciler/noop": c.natsUserFile("--reconciler", "noop", "--types", "Guarded/v1"),
	})
	// Still serving: a change after the attacks goes to Ready.
	r = do(t, "POST", base+"/api/v1/resources", map[string]any{"name": "three", "resource_type_name": "Guarded", "resource_type_version": "v1", "spec": map[string]any{"size": 3}})
	if r.status != 201 {
		t.Fatalf("create after the attacks: %d %s", r.status, r.body)
	}
	waitResource(t, base, int64(r.json(t)["id"].(float64)), "ready", func(m map[string]any) bool { return m["status"] == "ready" })
}

// TestNATSAttacksRefusedDev replays the NATS attacks against `no8s dev`,
// whose embedded NATS server takes only its CA's users: as the noop
// reconciler beside it, and as the developer's publisher and reader that
// no8s dev issues (the paths its ready file names), each attack is refused
// with a permissions violation and changes nothing; a change made
// afterwards still goes to Ready.
func TestNATSAttacksRefusedDev(t *testing.T) {
	env := noPostgreSQL()
	addrs, _ := startDevServing(t, env, "Guarded", map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}})
	if addrs.NATSPublisherCreds == "" || addrs.NATSReaderCreds == "" {
		t.Fatalf("no8s dev's ready file names no developer NATS users: %+v", addrs)
	}
	ready := func(m map[string]any) bool { return m["status"] == "ready" }
	create := func(name string) {
		t.Helper()
		r := do(t, "POST", addrs.APIURL+"/api/v1/resources", map[string]any{"name": name, "resource_type_name": "Guarded", "resource_type_version": "v1", "spec": map[string]any{"size": 1}})
		if r.status != 201 {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
		waitResource(t, addrs.APIURL, int64(r.json(t)["id"].(float64)), "ready", ready)
	}
	create("before")

	noop := filepath.Join(t.TempDir(), "noop")
	if r := no8sEnv(t, nil, "", "identity", "issue", "--ca-dir", addrs.CADir, "--out", noop, "--reconciler", "noop", "--types", "Guarded/v1"); r.code != 0 {
		t.Fatalf("no8s identity issue --reconciler noop: %d %s", r.code, r.stderr)
	}
	admin, err := nats.Connect(addrs.NATSURL, natsAdminOptions(t, addrs.CADir)...)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	natsAttacksRefused(t, addrs.NATSURL, js, map[string]string{
		"reconciler/noop":           filepath.Join(noop, identity.NATSCredsFile),
		"the developer's publisher": addrs.NATSPublisherCreds,
		"the developer's reader":    addrs.NATSReaderCreds,
	})
	create("after")
}

// natsAttacksRefused makes, as each NATS user of users (who → credentials
// file), the writes NATS took from anyone before it checked identities: a
// registry entry claiming a type, an input outcome, a resource event, and
// purging or deleting the event, work, input and audit streams. Each must be
// refused with a permissions violation, no stream may take a forged
// message (seen through js, an admin's view) nor the forged registry entry
// stand.
func natsAttacksRefused(t *testing.T, url string, js jetstream.JetStream, users map[string]string) {
	t.Helper()
	counts := func() map[string]uint64 {
		out := map[string]uint64{}
		for _, s := range subjects.Streams() {
			if s == subjects.KVStream(subjects.RegistryBucket) {
				continue // heartbeats: the forged entry is looked for below
			}
			if s == subjects.AuditStream {
				// Only gateways with --audit-stream make it, and the records
				// of the writes just made land in it asynchronously: the
				// attacks on it are checked by their permission violations.
				continue
			}
			st, err := js.Stream(t.Context(), s)
			if err != nil {
				t.Fatalf("stream %s: %v", s, err)
			}
			info, err := st.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			out[s] = info.State.LastSeq
		}
		return out
	}
	before := counts()
	for who, creds := range users {
		attack := func(what string, f func(nc *nats.Conn) error) {
			t.Helper()
			nc, err := nats.Connect(url, nats.UserCredentials(creds), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
			if err != nil {
				t.Fatalf("%s: connect: %v", who, err)
			}
			defer nc.Close()
			if err := f(nc); err != nil {
				t.Fatalf("%s %s: %v", who, what, err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(nc.LastError(), nats.ErrPermissionViolation) {
				t.Errorf("%s %s: %v, want a permissions violation", who, what, nc.LastError())
			}
		}
		attack("claiming a type it was not issued", func(nc *nats.Conn) error {
			return nc.Publish(subjects.KVKey(subjects.RegistryBucket, subjects.TypeKey("Unserved", "v1")), []byte("noop"))
		})
		attack("forging an outcome", func(nc *nats.Conn) error { return nc.Publish(subjects.InputOutcome("auth-1"), []byte("{}")) })
		attack("forging an event", func(nc *nats.Conn) error { return nc.Publish(subjects.Event("Guarded", "v1"), []byte("{}")) })
		attack("forging an audit record", func(nc *nats.Conn) error { return nc.Publish(subjects.Audit("succeeded"), []byte("{}")) })
		for _, verb := range []string{"STREAM.PURGE", "STREAM.DELETE"} {
			for _, s := range []string{subjects.EventsStream, subjects.ReconcileStream, subjects.InputStream, subjects.AuditStream} {
				attack(verb+" "+s, func(nc *nats.Conn) error { return nc.PublishRequest("$JS.API."+verb+"."+s, nc.NewRespInbox(), nil) })
			}
		}
	}
	// The control plane goes on publishing while the attacks run (the
	// relay delivers the events of the last writes after they commit), so
	// a stream may grow: each message it gained must be none of the forged
	// ones. A message already gone was taken from a work queue, which no
	// attack writes to.
	forged := map[string]bool{
		subjects.InputOutcome("auth-1") + " {}": true,
		subjects.Event("Guarded", "v1") + " {}": true,
	}
	after := counts()
	for s, last := range after {
		if last < before[s] {
			t.Fatalf("stream %s went back from %d to %d", s, before[s], last)
		}
		st, err := js.Stream(t.Context(), s)
		if err != nil {
			t.Fatalf("stream %s: %v", s, err)
		}
		for seq := before[s] + 1; seq <= last; seq++ {
			m, err := st.GetMsg(t.Context(), seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				t.Fatalf("stream %s message %d: %v", s, seq, err)
			}
			if forged[m.Subject+" "+string(m.Data)] {
				t.Fatalf("stream %s took a refused message: %s %s (last sequences %v, then %v)", s, m.Subject, m.Data, before, after)
			}
		}
	}
	reg, err := reconcilers.Read(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	if owner := reg.Owners[reconcilers.TypeRef{Name: "Unserved", Version: "v1"}]; owner != "" {
		t.Fatalf("the forged registry entry stands: Unserved/v1 held by %q", owner)
	}
}
