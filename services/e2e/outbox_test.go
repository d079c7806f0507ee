package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/store/outbox/outboxtest"
	"github.com/no8s/no8s/services/store/storage"
)

// stress reports whether the long soak versions run (make stress).
func stress() bool { return os.Getenv("NO8S_STRESS") != "" }

func rounds(short, long int) int {
	if n, err := strconv.Atoi(os.Getenv("NO8S_ROUNDS")); err == nil && n > 0 {
		return n
	}
	if stress() {
		return long
	}
	return short
}

// TestOutboxKill9 is HARD-PARTS 1: 16 concurrent writers (8 in this process
// with random sleeps and rollbacks inside their transactions, 8 through the
// store process's gRPC API) while the store process is killed with SIGKILL at
// random moments and restarted. Afterwards the stream must hold exactly the
// changes committed in PostgreSQL, each once, in revision order.
func TestOutboxKill9(t *testing.T) {
	for i := range rounds(3, 20) {
		t.Run(fmt.Sprintf("round-%d", i), func(t *testing.T) { outboxKillRound(t, newCluster(t)) })
	}
}

// TestOutboxKill9SQLite is TestOutboxKill9 on the embedded backend: the
// store process serves an SQLite file (--database-url sqlite:<file>) and
// the in-process writers open the same file, so writers in two processes
// share its write lock while one of them is killed.
func TestOutboxKill9SQLite(t *testing.T) {
	for i := range rounds(3, 20) {
		t.Run(fmt.Sprintf("round-%d", i), func(t *testing.T) { outboxKillRound(t, newSQLiteCluster(t)) })
	}
}

var errRollback = errors.New("injected rollback")

func outboxKillRound(t *testing.T, c *cluster) {
	ctx := t.Context()
	addr := freeAddr(t)
	st := c.startStore(addr)
	_, nc := c.jetstream()
	db := c.backend()
	typ, err := db.Store.CreateType(ctx, storage.CreateTypeRequest{Name: "Widget", Version: "v1", Schema: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// In-process writers share the store's code and wake the store
	// process's relay through the same NATS hint it uses itself.
	local := c.openBackend(storage.Options{
		AfterCommit: func() { _ = nc.Publish(eventstream.WakeSubject, nil) },
		BeforeCommit: func(ctx context.Context) error {
			select {
			case <-time.After(time.Duration(rand.IntN(5000)) * time.Microsecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			if rand.IntN(5) == 0 {
				return errRollback
			}
			return nil
		}})
	// The store process's writers are the gateway's calls.
	remote := storev1.NewStoreServiceClient(c.dialStore(t, addr, "--service", identity.Gateway))

	duration := 4 * time.Second
	if stress() {
		duration = 8 * time.Second
	}
	wctx, stop := context.WithTimeout(ctx, duration)
	defer stop()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				name := fmt.Sprintf("w%d-%d", w, rand.IntN(6))
				if w < 8 {
					outboxtest.WriteOnce(wctx, local.Store, name, rand.IntN)
				} else {
					remoteWrite(wctx, remote, name, typ.ResourceVersion)
				}
			}
		}()
	}
	kills := 0
	for wctx.Err() == nil {
		select {
		case <-wctx.Done():
		case <-time.After(time.Duration(200+rand.IntN(600)) * time.Millisecond):
			st.kill9()
			kills++
			st = c.startStore(addr)
		}
	}
	wg.Wait()

	state, err := db.Log.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := state.Revision
	waitFor(t, 60*time.Second, "relay to publish everything", func() error {
		state, err := db.Log.State(ctx)
		if err != nil {
			return err
		}
		if state.Cursor < last {
			_ = nc.Publish(eventstream.WakeSubject, nil)
			return fmt.Errorf("published up to %d of %d", state.Cursor, last)
		}
		return nil
	})
	js, _ := c.jetstream()
	stream, err := js.Stream(ctx, eventstream.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kill -9s of the store", kills)
	outboxtest.CheckStreamMatchesOutbox(t, ctx, db, stream)
}

// remoteWrite does one random write through the store's gRPC API, naming
// the type's revision rev on spec writes as admission does. Errors are
// expected: the process is killed under it.
func remoteWrite(ctx context.Context, s storev1.StoreServiceClient, name string, rev int64) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	got, err := s.GetResource(ctx, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Name{Name: &storev1.ResourceName{
		ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Name: name}}})
	if err != nil {
		spec, _ := json.Marshal(map[string]int{"n": rand.IntN(1000)})
		r := &storev1.Resource{Name: name, ResourceTypeName: "Widget", ResourceTypeVersion: "v1", Spec: spec}
		if rand.IntN(2) == 0 {
			r.Finalizers = []string{"example.com/hold"}
		}
		_, _ = s.CreateResource(ctx, &storev1.CreateResourceRequest{Resource: r, SchemaRevision: rev})
		return
	}
	id := got.GetResource().GetId()
	switch rand.IntN(4) {
	case 0, 1:
		spec, _ := json.Marshal(map[string]int{"n": rand.IntN(1000)})
		_, _ = s.UpdateResource(ctx, &storev1.UpdateResourceRequest{Id: id, Spec: spec, SchemaRevision: rev})
	case 2:
		_, _ = s.DeleteResource(ctx, &storev1.DeleteResourceRequest{Id: id})
	case 3:
		_, _ = s.UpdateFinalizers(ctx, &storev1.UpdateFinalizersRequest{Id: id, Remove: []string{"example.com/hold"}})
	}
}
