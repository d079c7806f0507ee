package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/platform/identity"
)

// grpcurlBinary finds grpcurl: $NO8S_GRPCURL, the repo's bin/ (make
// grpcurl, which make test runs first), or PATH.
func grpcurlBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NO8S_GRPCURL"); p != "" {
		return p
	}
	if p, err := filepath.Abs("../../bin/grpcurl"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("grpcurl")
	if err != nil {
		t.Fatal("no grpcurl binary: run `make grpcurl` (make test does) or set NO8S_GRPCURL")
	}
	return p
}

// grpcurlArgs are grpcurl's flags for a caller holding the credentials in
// dir: its certificate, key and CA bundle; -plaintext when dir is ""
// (identities off).
func grpcurlArgs(dir string) []string {
	if dir == "" {
		return []string{"-plaintext"}
	}
	return []string{"-cacert", filepath.Join(dir, identity.CAFile), "-cert", filepath.Join(dir, identity.CertFile), "-key", filepath.Join(dir, identity.KeyFile)}
}

// grpcurlRun runs grpcurl with the credentials in dir (grpcurlArgs) and
// args, and returns its standard output, standard error and error.
func grpcurlRun(t *testing.T, dir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), grpcurlBinary(t), append(grpcurlArgs(dir), args...)...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	return string(out), errb.String(), err
}

// grpcurl runs grpcurl with the credentials in dir and args and returns
// its standard output.
func grpcurl(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, stderr, err := grpcurlRun(t, dir, args...)
	if err != nil {
		t.Fatalf("grpcurl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// grpcurl lists, describes and calls the store's services through gRPC
// reflection, on both of its listeners, and admission's; every service
// answers the standard health check by name. With identities on, grpcurl
// presents a client certificate (-cacert, -cert, -key): reflection and
// health answer it, while the store's StoreService answers the gateway's
// identity only and refuses the client's (PermissionDenied).
func TestGRPCReflection(t *testing.T) {
	c := newCluster(t)
	base := c.startAll()
	store, worker, admission := c.storeAddrs[0], c.workerAddr(c.storeAddrs[0]), c.admissions[0]
	// An operator's credentials, and the gateway's (the one identity the
	// StoreService answers); both "" with identities off.
	client, gateway := c.credentials("--client", "operator"), c.credentials("--service", identity.Gateway)

	if r := do(t, "POST", base+"/api/v1/resource-types", map[string]any{"name": "GrpcProbe", "version": "v1", "schema": map[string]any{"type": "object"}}); r.status != 201 {
		t.Fatalf("create type: %d %s", r.status, r.body)
	}

	lists := map[string][]string{
		store:     {"no8s.store.v1.StoreService", "no8s.reconcile.v1.ReconcileService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"},
		worker:    {"no8s.reconcile.v1.WorkerService", "grpc.health.v1.Health"},
		admission: {"no8s.admission.v1.AdmissionService", "grpc.health.v1.Health"},
	}
	for addr, want := range lists {
		got := strings.Fields(grpcurl(t, client, addr, "list"))
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Fatalf("grpcurl list %s: %v, want %s among them", addr, got, w)
			}
		}
	}
	if got := strings.Fields(grpcurl(t, client, worker, "list")); slices.Contains(got, "no8s.store.v1.StoreService") {
		t.Fatalf("the workers' door lists the full StoreService: %v", got)
	}

	desc := grpcurl(t, client, store, "describe", "no8s.store.v1.StoreService")
	if !strings.Contains(desc, "rpc ListResourceTypes ( .no8s.store.v1.ListResourceTypesRequest ) returns ( .no8s.store.v1.ListResourceTypesResponse )") {
		t.Fatalf("describe StoreService:\n%s", desc)
	}
	if msg := grpcurl(t, client, store, "describe", "no8s.store.v1.ResourceType"); !strings.Contains(msg, "message ResourceType") {
		t.Fatalf("describe ResourceType:\n%s", msg)
	}

	var types struct {
		ResourceTypes []struct{ Name, Version string } `json:"resourceTypes"`
	}
	out := grpcurl(t, gateway, "-d", `{"name": "GrpcProbe"}`, store, "no8s.store.v1.StoreService/ListResourceTypes")
	if err := json.Unmarshal([]byte(out), &types); err != nil || len(types.ResourceTypes) != 1 || types.ResourceTypes[0].Name != "GrpcProbe" || types.ResourceTypes[0].Version != "v1" {
		t.Fatalf("ListResourceTypes: %v\n%s", err, out)
	}
	if client != "" {
		out, stderr, err := grpcurlRun(t, client, "-d", `{"name": "GrpcProbe"}`, store, "no8s.store.v1.StoreService/ListResourceTypes")
		if err == nil || !strings.Contains(stderr, "PermissionDenied") {
			t.Fatalf("ListResourceTypes as a client: %v, want PermissionDenied\n%s%s", err, out, stderr)
		}
		t.Logf("ListResourceTypes as client/operator: refused (%s)", strings.TrimSpace(stderr))
	}

	for addr, svc := range map[string]string{store: "no8s.store.v1.StoreService", worker: "no8s.reconcile.v1.WorkerService", admission: "no8s.admission.v1.AdmissionService"} {
		for _, name := range []string{"", svc} {
			var hc struct{ Status string }
			out := grpcurl(t, client, "-d", `{"service": "`+name+`"}`, addr, "grpc.health.v1.Health/Check")
			if err := json.Unmarshal([]byte(out), &hc); err != nil || hc.Status != "SERVING" {
				t.Fatalf("health of %q on %s: %v %s", name, addr, err, out)
			}
		}
	}
}
