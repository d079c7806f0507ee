package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/platform/identity"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/authz/authztest"
	"github.com/no8s/no8s/services/internal/grpcserver"
)

// TestIdentitiesRefuseForgedCalls replays, against separate processes on
// PostgreSQL with identities on (credentials made with `no8s identity`),
// the calls anyone who reached the store's ports could make before: take
// the scheduler lease, store a spec past admission, and act on another
// reconciler's resources through the workers' door. Without a certificate,
// or with one from another CA, the TLS handshake fails; with a real
// identity whose job it is not, the store answers PermissionDenied. The
// store's revision does not move, and the real scheduler keeps leading:
// a resource created afterwards through the API becomes ready.
func TestIdentitiesRefuseForgedCalls(t *testing.T) {
	c := newCluster(t)
	c.withIdentities()
	base := c.startAll()
	typ := do(t, "POST", base+"/api/v1/resource-types", `{"name":"Guarded","version":"v1","schema":{"type":"object","properties":{"n":{"type":"integer"}}}}`)
	if typ.status != 201 {
		t.Fatalf("create type: %d %s", typ.status, typ.body)
	}
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	c.startReconciler(c.storeAddrs[0], "Guarded/v1")
	ready := func(r map[string]any) bool { return r["status"] == "ready" }
	create := func(name string) int64 {
		t.Helper()
		r := do(t, "POST", base+"/api/v1/resources", `{"name":"`+name+`","resource_type_name":"Guarded","resource_type_version":"v1","spec":{"n":1}}`)
		if r.status != 201 {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
		id := int64(r.json(t)["id"].(float64))
		waitResource(t, base, id, "ready", ready)
		return id
	}
	victim := create("victim")

	revision := func() string {
		t.Helper()
		var rev string
		// The highest revision a stored row carries, and the history rows:
		// any write moves one. (The revision sequence itself may move: a
		// lease refused on the row the store locks leaves unused the
		// revision taken beside the read, as a lease refused because
		// another replica holds it always did; a gap is not a write.)
		if err := c.pool.QueryRow(t.Context(), `SELECT greatest(
			(SELECT coalesce(max(revision), 0) FROM outbox),
			(SELECT coalesce(max(resource_version), 0) FROM resources),
			(SELECT coalesce(max(resource_version), 0) FROM resource_types))::text
			|| ', history rows ' || (SELECT count(*) FROM reconciliation_history)`).Scan(&rev); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	leader := func() string {
		t.Helper()
		var holder string
		if err := c.pool.QueryRow(t.Context(), `SELECT holder FROM scheduler_state`).Scan(&holder); err != nil {
			t.Fatal(err)
		}
		return holder
	}
	rev0 := revision()

	dial := func(addr string, opts ...grpc.DialOption) *grpc.ClientConn {
		t.Helper()
		conn, err := grpcserver.Dial(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	as := func(dir string) []grpc.DialOption {
		t.Helper()
		creds, err := identity.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return authz.DialOptions(creds, identity.Store)
	}
	expect := func(what string, want codes.Code, err error) {
		t.Helper()
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %s", what, err, want)
		} else {
			t.Logf("%s: refused (%s)", what, status.Code(err))
		}
	}
	evilScheduler := &reconcilev1.BecomeSchedulerRequest{Holder: "evil", LeaseSeconds: 3600}
	pastAdmission := &storev1.CreateResourceRequest{Resource: &storev1.Resource{Name: "forged", ResourceTypeName: "Guarded", ResourceTypeVersion: "v1",
		Spec: []byte(`{"n":"not an integer"}`)}}
	ctx := t.Context()

	// No certificate: the plaintext client every port took before.
	plain := dial(c.storeAddrs[0])
	_, err := reconcilev1.NewReconcileServiceClient(plain).BecomeScheduler(ctx, evilScheduler)
	expect("BecomeScheduler without a certificate", codes.Unavailable, err)
	_, err = storev1.NewStoreServiceClient(plain).CreateResource(ctx, pastAdmission)
	expect("CreateResource without a certificate", codes.Unavailable, err)
	_, err = reconcilev1.NewWorkerServiceClient(dial(c.workerAddr(c.storeAddrs[0]))).AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: victim, Holder: "noop/evil"})
	expect("AcquireLease without a certificate", codes.Unavailable, err)

	// A gateway's certificate from another CA.
	otherCA := filepath.Join(t.TempDir(), "other-ca")
	if r := no8sEnv(t, nil, "", "identity", "init-ca", "--ca-dir", otherCA); r.code != 0 {
		t.Fatal(r.stderr)
	}
	forged := filepath.Join(t.TempDir(), "forged-gateway")
	if r := no8sEnv(t, nil, "", "identity", "issue", "--ca-dir", otherCA, "--out", forged, "--service", "gateway"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	_, err = storev1.NewStoreServiceClient(dial(c.storeAddrs[0], as(forged)...)).CreateResource(ctx, pastAdmission)
	expect("CreateResource as a gateway of another CA", codes.Unavailable, err)

	// Real identities, not their job.
	noop := dial(c.storeAddrs[0], as(c.credentials("--reconciler", "noop", "--types", "Guarded/v1"))...)
	_, err = reconcilev1.NewReconcileServiceClient(noop).BecomeScheduler(ctx, evilScheduler)
	expect("BecomeScheduler as reconciler/noop", codes.PermissionDenied, err)
	_, err = storev1.NewStoreServiceClient(noop).CreateResource(ctx, pastAdmission)
	expect("CreateResource as reconciler/noop (past admission)", codes.PermissionDenied, err)
	admissionID := dial(c.storeAddrs[0], as(c.credentials("--service", identity.Admission))...)
	_, err = storev1.NewStoreServiceClient(admissionID).CreateResource(ctx, pastAdmission)
	expect("CreateResource as service/admission", codes.PermissionDenied, err)

	// The workers' door: a reconciler acting as another, or on a type its
	// certificate does not claim.
	evil := reconcilev1.NewWorkerServiceClient(dial(c.workerAddr(c.storeAddrs[0]), as(c.credentials("--reconciler", "evil", "--types", "Other/v1"))...))
	_, err = evil.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: victim, Holder: "noop/evil", LeaseSeconds: 30})
	expect("AcquireLease as noop/evil by reconciler/evil", codes.PermissionDenied, err)
	_, err = evil.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: victim, Holder: "evil/1", LeaseSeconds: 30})
	expect("AcquireLease of a Guarded/v1 resource by reconciler/evil (Other/v1)", codes.PermissionDenied, err)
	_, err = evil.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: victim, LeaseEpoch: 1, Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS,
		StatusMessage: "PWNED", Outputs: []byte(`{"pwned":true}`), History: &reconcilev1.HistoryEntry{}})
	expect("CompleteReconcile of noop's resource by reconciler/evil", codes.PermissionDenied, err)
	_, err = evil.UpdateFinalizers(ctx, &reconcilev1.UpdateFinalizersRequest{ResourceId: victim, LeaseEpoch: 1, Remove: []string{"reconciler.no8s.io/noop"}})
	expect("UpdateFinalizers of noop's resource by reconciler/evil", codes.PermissionDenied, err)
	_, err = evil.CampaignLeader(ctx, &reconcilev1.CampaignLeaderRequest{Name: "noop", Holder: "noop/evil", LeaseSeconds: 30})
	expect("CampaignLeader for noop by reconciler/evil", codes.PermissionDenied, err)

	if rev := revision(); rev != rev0 {
		t.Errorf("the store's revision moved from %s to %s: a refused call wrote", rev0, rev)
	}
	if h := leader(); h != "sched" {
		t.Errorf("the scheduler lease is held by %q, want the real scheduler", h)
	}
	r := do(t, "GET", base+"/api/v1/resources/"+strconv.FormatInt(victim, 10), nil)
	if m := r.json(t); m["status_message"] != "reconciled" || len(m["outputs"].(map[string]any)) != 0 {
		t.Errorf("the victim was written: %s", r.body)
	}
	start := time.Now()
	create("after")
	t.Logf("a resource created after the attempts became ready in %s: the real scheduler leads", time.Since(start).Round(time.Millisecond))

	// A reconciler started with another reconciler's credentials says so
	// and does not start.
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "no8s-reconciler"), "noop", "--types", "Guarded/v1", "--nats-url", c.natsURL,
		"--store-addr", c.workerAddr(c.storeAddrs[0]), "--health-listen", "127.0.0.1:0")
	cmd.Env = append(withoutNo8sEnv(), identity.EnvDir+"="+c.credentials("--reconciler", "evil", "--types", "Other/v1"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "holds the identity reconciler/evil, not reconciler/noop") {
		t.Errorf("noop with reconciler/evil's credentials: %v\n%s", err, out)
	}
}

// TestIdentitiesMatrixAgainstTheServices makes every cell of the policy a
// real call: every method each listener serves (the store's main and
// workers' listeners, admission's), from every kind of identity, against
// the real processes with identities on. A cell the policy refuses gets
// its PermissionDenied; a cell it allows reaches the service's handler,
// whatever that answers to an empty request. No scheduler runs, so the
// scheduler identity's BecomeScheduler cell takes no one's lease.
func TestIdentitiesMatrixAgainstTheServices(t *testing.T) {
	c := newCluster(t)
	c.withIdentities()
	c.startStore("")
	admission := c.startAdmission(c.storeAddrs[0])
	served := authztest.Served()
	policy := authz.Policy()
	listeners := []struct {
		name, addr, server string
		services           []string
	}{
		{"store", c.storeAddrs[0], identity.Store, []string{"no8s.store.v1.StoreService", "no8s.store.v1.TokenService", "no8s.reconcile.v1.ReconcileService"}},
		{"store workers", c.workerAddr(c.storeAddrs[0]), identity.Store, []string{"no8s.reconcile.v1.WorkerService"}},
		{"admission", admission, identity.Admission, []string{"no8s.admission.v1.AdmissionService"}},
	}
	common := []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}
	ids := []struct {
		id   identity.ID
		args []string
	}{
		{identity.ID{Kind: identity.Reconciler, Name: "noop", Types: []string{"Cell/v1"}}, []string{"--reconciler", "noop", "--types", "Cell/v1"}},
		{identity.ID{Kind: identity.Client, Name: "ci"}, []string{"--client", "ci"}},
	}
	for _, s := range identity.Services() {
		ids = append(ids, struct {
			id   identity.ID
			args []string
		}{identity.ServiceID(s), []string{"--service", s}})
	}
	ctx := t.Context()
	cells, refused := 0, 0
	for _, l := range listeners {
		for _, who := range ids {
			creds, err := identity.Load(c.credentials(who.args...))
			if err != nil {
				t.Fatal(err)
			}
			conn, err := grpcserver.Dial(l.addr, authz.DialOptions(creds, l.server)...)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range authztest.Sorted(served) {
				svc, _, _ := strings.Cut(strings.TrimPrefix(m, "/"), "/")
				if !slices.Contains(l.services, svc) && !slices.Contains(common, svc) {
					continue
				}
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				got := authztest.Call(cctx, conn, m, served[m])
				cancel()
				cells++
				allowed := policy[m].Allows(who.id)
				switch {
				case allowed && authztest.RefusedByPolicy(got):
					t.Errorf("%s: %s → %s: %v, want the call to reach the handler", l.name, who.id, m, got.Err())
				case !allowed && !authztest.RefusedByPolicy(got):
					t.Errorf("%s: %s → %s: %v, want the policy's PermissionDenied", l.name, who.id, m, got.Err())
				case !allowed:
					refused++
				}
			}
			_ = conn.Close()
		}
	}
	t.Logf("%d cells called, %d refused by the policy", cells, refused)
	if cells < 7*40 {
		t.Fatalf("only %d cells: the listeners serve fewer methods than the policy names", cells)
	}
}
