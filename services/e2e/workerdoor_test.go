package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	"github.com/no8s/no8s/services/internal/grpcserver"
)

// The rogue worker is this test binary run again as a separate process
// (TestMain hands it over to runRogueWorker when rogueEnv is set): a
// worker that connects to the store's worker address, as every worker
// does, and tries what a worker must not do.
const (
	rogueEnv         = "NO8S_E2E_ROGUE_WORKER"
	rogueResourceEnv = "NO8S_E2E_ROGUE_RESOURCE"
	rogueRevisionEnv = "NO8S_E2E_ROGUE_REVISION"
)

// rogueResult is one attempt of the rogue worker: its name and the gRPC
// code the store answered.
type rogueResult struct {
	Name string `json:"name"`
	Code string `json:"code"`
	Msg  string `json:"msg,omitempty"`
}

// TestWorkerDoorIsNarrow shows that the address workers use offers only
// the worker's door. A real no8s-reconciler process (noop) on the store's
// worker address reconciles resources to ready; a second worker process
// on the same address, holding a real lease, is refused every write
// outside a worker's share: StoreService (types, webhooks, specs,
// finalizers) and the scheduler's ReconcileService are not served there
// (Unimplemented), and WorkerService refuses finalizers that are not the
// holder's own and annotations other than no8s.io/operation
// (PermissionDenied). Nothing it tried changed a row. With identities on,
// the second worker holds real credentials for the type too
// (reconciler/rogue, issued Door/v1 once released from noop's claim), so
// that what stops it is the door, not its certificate.
func TestWorkerDoorIsNarrow(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	typ := do(t, "POST", base+"/api/v1/resource-types", `{"name":"Door","version":"v1","schema":{"type":"object","properties":{"n":{"type":"integer"}}}}`)
	if typ.status != 201 {
		t.Fatalf("create type: %d %s", typ.status, typ.body)
	}
	rev := int64(typ.json(t)["resource_version"].(float64))
	c.startScheduler(c.storeAddrs[0], "sched", 0)
	c.startReconciler(c.storeAddrs[0], "Door/v1") // the real noop reconciler, on the worker address

	// The normal path: a worker on the narrow door makes resources ready.
	create := func(body string) int64 {
		t.Helper()
		r := do(t, "POST", base+"/api/v1/resources", body)
		if r.status != 201 {
			t.Fatalf("create resource: %d %s", r.status, r.body)
		}
		return int64(r.json(t)["id"].(float64))
	}
	ready := func(r map[string]any) bool { return r["status"] == "ready" }
	served := create(`{"name":"served","resource_type_name":"Door","resource_type_version":"v1","spec":{"n":1}}`)
	waitResource(t, base, served, "ready", ready)
	target := create(`{"name":"target","resource_type_name":"Door","resource_type_version":"v1","spec":{"n":2},
		"finalizers":["example.com/hold"],"annotations":{"keep":"me"}}`)
	before := waitResource(t, base, target, "ready", ready)

	counts := func() string {
		return fmt.Sprintf("types=%d resources=%d webhooks=%d", c.count(`SELECT count(*) FROM resource_types`),
			c.count(`SELECT count(*) FROM resources`), c.count(`SELECT count(*) FROM admission_webhooks`))
	}
	countsBefore := counts()

	// The rogue worker process, with credentials of its own for Door/v1:
	// the type is released from noop's claim first, as an operator hands a
	// type to another reconciler.
	c.releaseType("Door/v1")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), rogueEnv+"="+c.workerAddr(c.storeAddrs[0]),
		rogueResourceEnv+"="+strconv.FormatInt(target, 10), rogueRevisionEnv+"="+strconv.FormatInt(rev, 10)), c.reconcilerEnv("rogue", "Door/v1")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rogue worker: %v\n%s", err, stderr.String())
	}
	got := map[string]string{}
	for line := range strings.Lines(string(out)) {
		var r rogueResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("rogue worker output %q: %v", line, err)
		}
		got[r.Name] = r.Code
		t.Logf("rogue worker: %-40s %s %s", r.Name, r.Code, r.Msg)
	}
	want := map[string]codes.Code{
		"StoreService.CreateResourceType":             codes.Unimplemented,
		"StoreService.UpdateResourceType":             codes.Unimplemented,
		"StoreService.CreateAdmissionWebhook":         codes.Unimplemented,
		"StoreService.CreateResource":                 codes.Unimplemented,
		"StoreService.UpdateResource(spec)":           codes.Unimplemented,
		"StoreService.UpdateFinalizers":               codes.Unimplemented,
		"StoreService.DeleteResource":                 codes.Unimplemented,
		"StoreService.GetResource":                    codes.Unimplemented,
		"ReconcileService.BecomeScheduler":            codes.Unimplemented,
		"ReconcileService.RequestReconcile":           codes.Unimplemented,
		"WorkerService.AcquireLease":                  codes.OK,
		"WorkerService.UpdateFinalizers(other)":       codes.PermissionDenied,
		"WorkerService.UpdateFinalizers(hold)":        codes.PermissionDenied,
		"WorkerService.UpdateFinalizers(nolease)":     codes.PermissionDenied,
		"WorkerService.CompleteReconcile(finalizer)":  codes.PermissionDenied,
		"WorkerService.CompleteReconcile(annotation)": codes.PermissionDenied,
		"WorkerService.UpdateFinalizers(own)":         codes.OK,
		"WorkerService.CompleteReconcile":             codes.OK,
	}
	for name, code := range want {
		if got[name] != code.String() {
			t.Errorf("%s: %q, want %s", name, got[name], code)
		}
	}

	// Nothing the rogue worker was refused changed a row.
	if after := counts(); after != countsBefore {
		t.Errorf("rows changed: %s, before %s", after, countsBefore)
	}
	after := getResource(t, base, target)
	if !jsonEqual(after["spec"], before["spec"]) {
		t.Errorf("spec changed: %v, was %v", after["spec"], before["spec"])
	}
	fins := after["finalizers"].([]any)
	for _, f := range []string{"example.com/hold", "reconciler.no8s.io/noop"} {
		if !slices.Contains(fins, any(f)) {
			t.Errorf("finalizer %s went: %v", f, fins)
		}
	}
	if a, _ := after["annotations"].(map[string]any); a["keep"] != "me" {
		t.Errorf("annotation keep went: %v", after["annotations"])
	}
	// The worker's own share went through: the finalizer it added is its
	// own, and its completion is saved.
	if !slices.Contains(fins, any("reconciler.no8s.io/rogue")) {
		t.Errorf("the rogue worker's own finalizer is missing: %v", fins)
	}
	if after["status_message"] != "rogue completion" {
		t.Errorf("status_message %v, want the rogue worker's completion", after["status_message"])
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// runRogueWorker is the rogue worker process: it prints one rogueResult
// per attempt on stdout. It presents the credentials in
// $NO8S_IDENTITY_DIR when set.
func runRogueWorker(addr string) int {
	id, _ := strconv.ParseInt(os.Getenv(rogueResourceEnv), 10, 64)
	rev, _ := strconv.ParseInt(os.Getenv(rogueRevisionEnv), 10, 64)
	var opts []grpc.DialOption
	if dir := os.Getenv(identity.EnvDir); dir != "" {
		creds, err := identity.Load(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts = authz.DialOptions(creds, identity.Store)
	}
	conn, err := grpcserver.Dial(addr, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	enc := json.NewEncoder(os.Stdout)
	report := func(name string, err error) {
		st := status.Convert(err)
		_ = enc.Encode(rogueResult{Name: name, Code: st.Code().String(), Msg: st.Message()})
	}
	st := storev1.NewStoreServiceClient(conn)
	rc := reconcilev1.NewReconcileServiceClient(conn)
	wc := reconcilev1.NewWorkerServiceClient(conn)

	_, err = st.CreateResourceType(ctx, &storev1.CreateResourceTypeRequest{ResourceType: &storev1.ResourceType{Name: "Rogue", Version: "v1", Schema: []byte(`{"type":"object"}`)}})
	report("StoreService.CreateResourceType", err)
	_, err = st.UpdateResourceType(ctx, &storev1.UpdateResourceTypeRequest{Id: 1, Schema: []byte(`{}`)})
	report("StoreService.UpdateResourceType", err)
	_, err = st.CreateAdmissionWebhook(ctx, &storev1.CreateAdmissionWebhookRequest{})
	report("StoreService.CreateAdmissionWebhook", err)
	_, err = st.CreateResource(ctx, &storev1.CreateResourceRequest{SchemaRevision: rev, Resource: &storev1.Resource{
		Name: "rogue", ResourceTypeName: "Door", ResourceTypeVersion: "v1", Spec: []byte(`{"n":9}`)}})
	report("StoreService.CreateResource", err)
	_, err = st.UpdateResource(ctx, &storev1.UpdateResourceRequest{Id: id, Spec: []byte(`{"n":9}`), SchemaRevision: rev})
	report("StoreService.UpdateResource(spec)", err)
	_, err = st.UpdateFinalizers(ctx, &storev1.UpdateFinalizersRequest{Id: id, Remove: []string{"example.com/hold"}})
	report("StoreService.UpdateFinalizers", err)
	_, err = st.DeleteResource(ctx, &storev1.DeleteResourceRequest{Id: id})
	report("StoreService.DeleteResource", err)
	_, err = st.GetResource(ctx, &storev1.GetResourceRequest{Key: &storev1.GetResourceRequest_Id{Id: id}})
	report("StoreService.GetResource", err)
	_, err = rc.BecomeScheduler(ctx, &reconcilev1.BecomeSchedulerRequest{Holder: "rogue", LeaseSeconds: 5})
	report("ReconcileService.BecomeScheduler", err)
	_, err = rc.RequestReconcile(ctx, &reconcilev1.RequestReconcileRequest{ResourceId: id})
	report("ReconcileService.RequestReconcile", err)

	// A lease, as a worker takes one (the noop reconciler may hold it for
	// a moment: wait).
	var lease *reconcilev1.AcquireLeaseResponse
	for ctx.Err() == nil {
		lease, err = wc.AcquireLease(ctx, &reconcilev1.AcquireLeaseRequest{ResourceId: id, Holder: "rogue/1", LeaseSeconds: 30})
		if status.Code(err) != codes.Aborted {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	report("WorkerService.AcquireLease", err)
	if err != nil {
		return 0
	}
	epoch := lease.GetLeaseEpoch()
	_, err = wc.UpdateFinalizers(ctx, &reconcilev1.UpdateFinalizersRequest{ResourceId: id, LeaseEpoch: epoch, Remove: []string{"reconciler.no8s.io/noop"}})
	report("WorkerService.UpdateFinalizers(other)", err)
	_, err = wc.UpdateFinalizers(ctx, &reconcilev1.UpdateFinalizersRequest{ResourceId: id, LeaseEpoch: epoch, Remove: []string{"example.com/hold"}})
	report("WorkerService.UpdateFinalizers(hold)", err)
	_, err = wc.UpdateFinalizers(ctx, &reconcilev1.UpdateFinalizersRequest{ResourceId: id, Add: []string{"reconciler.no8s.io/rogue"}})
	report("WorkerService.UpdateFinalizers(nolease)", err)
	_, err = wc.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: id, LeaseEpoch: epoch,
		Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS, Generation: lease.GetResource().GetGeneration(), RemoveFinalizers: []string{"example.com/hold"}})
	report("WorkerService.CompleteReconcile(finalizer)", err)
	_, err = wc.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: id, LeaseEpoch: epoch,
		Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS, Generation: lease.GetResource().GetGeneration(), RemoveAnnotations: []string{"keep"}})
	report("WorkerService.CompleteReconcile(annotation)", err)
	// What a worker may do goes through.
	_, err = wc.UpdateFinalizers(ctx, &reconcilev1.UpdateFinalizersRequest{ResourceId: id, LeaseEpoch: epoch, Add: []string{"reconciler.no8s.io/rogue"}})
	report("WorkerService.UpdateFinalizers(own)", err)
	_, err = wc.CompleteReconcile(ctx, &reconcilev1.CompleteReconcileRequest{ResourceId: id, LeaseEpoch: epoch,
		Outcome: reconcilev1.Outcome_OUTCOME_SUCCESS, Generation: lease.GetResource().GetGeneration(), StatusMessage: "rogue completion",
		History: &reconcilev1.HistoryEntry{}})
	report("WorkerService.CompleteReconcile", err)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return 1
	}
	return 0
}
