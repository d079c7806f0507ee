package e2e

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/sdk/identity"
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
		{"identity", "init-ca", "--ca-dir", ca},
		{"identity", "nats-config", "--ca-dir", ca, "--out", filepath.Join(dir, "no8s-auth.conf")},
		{"identity", "issue", "--ca-dir", ca, "--out", filepath.Join(dir, "reader"), "--nats-reader", "audit"},
		{"identity", "issue", "--ca-dir", ca, "--out", filepath.Join(dir, "publisher"), "--nats-publisher", "orders"},
		{"identity", "issue", "--ca-dir", ca, "--out", filepath.Join(dir, "store"), "--service", "store"},
	} {
		if r := no8sEnv(t, nil, "", args...); r.code != 0 {
			t.Fatalf("no8s %v: %d %s", args, r.code, r.stderr)
		}
	}
	conf, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", "nats-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// The configuration as written but for where JetStream stores
	// (nats-server refuses -sd beside a store_dir).
	conf = []byte(strings.Replace(string(conf), "store_dir: /data", "store_dir: "+strconv.Quote(filepath.Join(dir, "js")), 1))
	if err := os.WriteFile(filepath.Join(dir, "nats-server.conf"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	start(t, "nats-server", natsServerBinary(t), []string{"-c", filepath.Join(dir, "nats-server.conf"), "-a", host, "-p", port, "-m", "0"})
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
