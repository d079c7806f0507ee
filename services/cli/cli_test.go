package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/internal/resource"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestDescribeGolden(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	msg := "dial tcp 10.0.0.7:5432: connection refused"
	last := now.Add(-20 * time.Second)
	r := &client.Resource{
		Namespace: "default", ID: 7, UID: "5f0c5a2e-0000-4000-8000-000000000007", Name: "production-pg", ResourceTypeName: "DatabaseCluster", ResourceTypeVersion: "v1",
		Labels: map[string]string{"tier": "db", "app": "orders"}, Annotations: map[string]string{},
		OwnerReferences: []resource.OwnerReference{{UID: "u-1", ResourceTypeName: "Tenant", ResourceTypeVersion: "v1", Name: "acme", Controller: true}},
		Spec:            json.RawMessage(`{"engine":"postgres","storage_gb":500,"replicas":0}`),
		Status:          "failed", StatusMessage: msg, Phase: "Progressing", Generation: 2, ObservedGeneration: 2, ResourceVersion: 131,
		Conditions: []resource.Condition{{Type: "Ready", Status: "False", Reason: "ConnectFailed", Message: msg, ObservedGeneration: 2, LastTransitionTime: now.Add(-90 * time.Second)}},
		Outputs:    json.RawMessage(`{"host":"pg.internal","port":5432}`),
		Finalizers: []string{"reconciler.no8s.io/postgres-database"},
		CreatedAt:  now.Add(-2 * time.Hour), LastReconcileTime: &last,
	}
	hist := []client.HistoryEntry{
		{ID: 9, Generation: 2, Success: false, Phase: "failed", ErrorMessage: &msg, DurationMS: 1520, StartedAt: ptr(last), Holder: "postgres-database/a", Reason: "retry"},
		{ID: 4, Generation: 1, Success: true, Phase: "completed", DurationMS: 12, StartedAt: ptr(now.Add(-2 * time.Hour)), Holder: "postgres-database/a", Reason: "pending"},
	}
	events := []client.EventRecord{ // newest first, as the API answers
		{ID: 31, ResourceID: 7, Type: "Warning", Reason: "ConnectFailed", Message: "dial tcp 10.0.0.7:5432:\nconnection refused", Source: "reconciler/postgres-database",
			Count: 14, FirstTime: now.Add(-100 * time.Minute), LastTime: now.Add(-20 * time.Second)},
		{ID: 12, ResourceID: 7, Type: "Normal", Reason: "DatabaseCreated", Message: "database orders created", Source: "reconciler/postgres-database",
			Count: 1, FirstTime: now.Add(-2 * time.Hour), LastTime: now.Add(-2 * time.Hour)},
	}
	var b bytes.Buffer
	if err := describe(&b, r, hist, eventsOrError{items: events}, now); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "describe.golden", b.Bytes())
	// No Events, and Events that could not be read: the page is shown.
	for _, tc := range []struct {
		ev   eventsOrError
		want string
	}{{eventsOrError{}, "Events:\n  <none>\n"}, {eventsOrError{err: errors.New("GET /x: connection\nreset")}, "Events:\n  <could not be read: GET /x: connection reset>\n"}} {
		b.Reset()
		if err := describe(&b, r, hist, tc.ev, now); err != nil || !strings.HasSuffix(b.String(), tc.want) || !strings.Contains(b.String(), "Recent history:") {
			t.Fatalf("events %+v: %v\n%s", tc.ev, err, b.String())
		}
	}
}

// goldenFile compares got with testdata/name (rewritten with -update).
func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// describe namespace: identity, status, its resources by type and status,
// and, while terminating, the resources still holding it.
func TestDescribeNamespaceGolden(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	deleted := now.Add(-90 * time.Second)
	ns := &client.Namespace{Name: "team-a", UID: "0f1e2d3c-0000-4000-8000-000000000002", Status: resource.NamespaceTerminating, ResourceVersion: 140,
		CreatedAt: now.Add(-26 * time.Hour), UpdatedAt: deleted, DeletedAt: &deleted}
	mk := func(typ, name, status string, finalizers ...string) client.Resource {
		return client.Resource{Namespace: "team-a", Name: name, ResourceTypeName: typ, ResourceTypeVersion: "v1", Status: status, Finalizers: finalizers}
	}
	items := []client.Resource{
		mk("DatabaseCluster", "orders", "deleting", "reconciler.no8s.io/postgres-database"),
		mk("DatabaseCluster", "billing", "deleting", "reconciler.no8s.io/postgres-database", "example.com/backup"),
		mk("Bucket", "assets", "deleting", "reconciler.no8s.io/bucket"),
		mk("DatabaseCluster", "reports", "failed", "reconciler.no8s.io/postgres-database"),
	}
	var b bytes.Buffer
	if err := describeNamespace(&b, ns, items, now); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "describe-namespace.golden", b.Bytes())
	active := &client.Namespace{Name: "team-b", UID: "0f1e2d3c-0000-4000-8000-000000000003", Status: resource.NamespaceActive, ResourceVersion: 12, CreatedAt: now.Add(-5 * time.Minute)}
	b.Reset()
	if err := describeNamespace(&b, active, nil, now); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "describe-namespace-empty.golden", b.Bytes())
}

func TestUnifiedDiff(t *testing.T) {
	// Changes 7 equal lines apart make two hunks; 6 apart, one (as GNU diff).
	a := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	b := "a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk\nl\n"
	want := "--- old\n+++ new\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n@@ -9,3 +9,4 @@\n i\n j\n k\n+l\n"
	if got := unifiedDiff(a, b, "old", "new"); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if got := unifiedDiff("a\nb\nc\nd\ne\nf\ng\nh\n", "a\nB\nc\nd\ne\nf\ng\nH\n", "old", "new"); got != "--- old\n+++ new\n@@ -1,8 +1,8 @@\n a\n-b\n+B\n c\n d\n e\n f\n g\n-h\n+H\n" {
		t.Fatalf("one hunk: %q", got)
	}
	if got := unifiedDiff("", "x: 1\n", "old", "new"); got != "--- old\n+++ new\n@@ -0,0 +1 @@\n+x: 1\n" {
		t.Fatalf("create: %q", got)
	}
	if unifiedDiff(a, a, "x", "y") != "" {
		t.Fatal("equal texts differ")
	}
}

func TestParseWaitFor(t *testing.T) {
	for in, want := range map[string]waitFor{
		"condition=Ready":       {condition: "Ready", status: "True"},
		"condition=Ready=false": {condition: "Ready", status: "False"},
		"delete":                {deleted: true},
	} {
		if got, err := parseWaitFor(in); err != nil || got != want {
			t.Errorf("%s: %+v %v", in, got, err)
		}
	}
	for _, in := range []string{"Ready", "condition=", "condition=Ready=maybe"} {
		if _, err := parseWaitFor(in); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
	r := &client.Resource{}
	r.Generation = 3
	r.Conditions = []resource.Condition{{Type: "Ready", Status: "True", ObservedGeneration: 2}}
	if ok, state := (waitFor{condition: "Ready", status: "True"}).met(r); ok || !strings.Contains(state, "for generation 2") {
		t.Fatalf("a condition of an older generation counts: %v %s", ok, state)
	}
}

// run runs the CLI in this process.
func run(t *testing.T, env map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, Streams{In: strings.NewReader(stdin), Out: &out, Err: &errb}, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	env := map[string]string{"NO8S_CONFIG": filepath.Join(t.TempDir(), "config.yaml"), "NO8S_SERVER": "http://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"get"}, ExitUsage, "expected what to get"},
		{[]string{"frobnicate"}, ExitUsage, "unknown command"},
		{[]string{"config", "bogus"}, ExitUsage, "unknown config command"},
		{[]string{"get", "types", "--bogus"}, ExitUsage, "unknown flag"},
		{[]string{"get", "types", "-o", "xml"}, ExitUsage, "output format"},
		{[]string{"apply"}, ExitUsage, "-f"},
		{[]string{"wait", "DatabaseCluster/v1", "x", "--for", "ready"}, ExitUsage, "--for"},
		{[]string{"get", "types"}, ExitError, "connection refused"},
		{[]string{"diff", "-f", "-"}, ExitUsage, "no documents"},
		{[]string{"apply", "-f", "-"}, ExitError, "/metadata/name: name is required"},
		{[]string{"get", "namespaces", "-w"}, ExitUsage, "namespaces have no events"},
		{[]string{"get", "ns", "-l", "a=b"}, ExitUsage, "-w and -l apply to resources only"},
		{[]string{"delete", "namespace", "Team_A"}, ExitUsage, `"Team_A" is not a valid namespace`},
		{[]string{"delete", "namespace"}, ExitUsage, "give at least one NAME"},
		{[]string{"delete", "Gadget/v1", "x", "--cascade=sideways"}, ExitUsage, "--cascade=sideways: must be background, foreground or orphan"},
		{[]string{"describe", "ns", "x_y"}, ExitUsage, "not a valid namespace"},
		{[]string{"get", "resources", "-n", "Bad_NS"}, ExitUsage, "namespace: \"Bad_NS\" is not a valid namespace"},
		{[]string{"get", "DatabaseCluster/v1", "x", "-A"}, ExitUsage, "across every namespace"},
	} {
		stdin := ""
		if tc.args[0] == "apply" && len(tc.args) > 1 {
			stdin = "kind: Resource\ntype: A/v1\nspec: {}\n"
		}
		code, _, stderr := run(t, env, stdin, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
}

// Contexts: set, use, and flag over environment over context over default.
func TestConfigContexts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	env := map[string]string{"NO8S_CONFIG": path}
	if code, _, stderr := run(t, env, "", "config", "set-context", "prod", "--server", "http://prod:8000", "--namespace", "payments", "--token", "s3cret"); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := run(t, env, "", "config", "set-context", "local", "--server", "http://127.0.0.1:8000"); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := run(t, env, "", "config", "use-context", "prod"); code != 0 {
		t.Fatal(stderr)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("config file mode: %v %v", info, err)
	}
	_, out, _ := run(t, env, "", "config", "view")
	if !strings.Contains(out, "REDACTED") || strings.Contains(out, "s3cret") || !strings.Contains(out, `context "prod", server http://prod:8000, namespace payments, token set`) {
		t.Fatalf("view:\n%s", out)
	}
	env["NO8S_NAMESPACE"] = "from-env"
	_, out, _ = run(t, env, "", "config", "view", "--context", "local")
	if !strings.Contains(out, `context "local", server http://127.0.0.1:8000, namespace from-env, token none`) {
		t.Fatalf("env over context:\n%s", out)
	}
	_, out, _ = run(t, env, "", "config", "view", "-n", "from-flag", "-s", "http://flag:1")
	if !strings.Contains(out, "server http://flag:1, namespace from-flag") {
		t.Fatalf("flag over env:\n%s", out)
	}
	_, out, _ = run(t, env, "", "config", "get-contexts")
	if !strings.Contains(out, "*         prod") {
		t.Fatalf("get-contexts:\n%s", out)
	}
	if code, _, stderr := run(t, env, "", "config", "use-context", "nope"); code != ExitError || !strings.Contains(stderr, `context "nope" is not in`) {
		t.Fatalf("use-context nope: %d %s", code, stderr)
	}
	if code, _, stderr := run(t, env, "", "get", "types", "--context", "nope"); code != ExitError || !strings.Contains(stderr, `context "nope" is not in the configuration`) {
		t.Fatalf("--context nope: %d %s", code, stderr)
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, stderr := run(t, nil, "", "completion", sh)
		if code != 0 || !strings.Contains(out, "no8s") {
			t.Fatalf("%s: %d %s", sh, code, stderr)
		}
	}
}

func ptr[T any](v T) *T { return &v }
