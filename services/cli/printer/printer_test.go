package printer

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/internal/resource"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// now is the fixed clock of every golden file.
var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// golden compares got with testdata/name (rewritten with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

func sampleResources() []client.Resource {
	mk := func(ns, name, status, phase string, ready string, age time.Duration, gen, obs, rv int64, msg string) client.Resource {
		r := client.Resource{
			Namespace: ns, ID: rv, Name: name, ResourceTypeName: "DatabaseCluster", ResourceTypeVersion: "v1", Status: status, Phase: phase,
			Generation: gen, ObservedGeneration: obs, ResourceVersion: rv, CreatedAt: now.Add(-age), StatusMessage: msg,
			Spec: json.RawMessage(`{"engine":"postgres","storage_gb":500}`),
		}
		if ready != "" {
			r.Conditions = []resource.Condition{{Type: "Ready", Status: ready, Reason: "Reconciled"}}
		}
		return r
	}
	return []client.Resource{
		mk("default", "production-pg", "ready", "Ready", "True", 42*time.Second, 2, 2, 118, "reconciled"),
		mk("default", "staging-pg", "reconciling", "Progressing", "Unknown", 5*time.Minute+10*time.Second, 1, 0, 120, ""),
		mk("team-a", "a-very-long-resource-name-for-alignment", "failed", "Progressing", "False", 26*time.Hour, 3, 3, 99, "connection refused\nretrying"),
		mk("team-a", "fresh", "pending", "Progressing", "", 3*24*time.Hour+4*time.Hour, 1, 0, 7, ""),
	}
}

func TestResourceTables(t *testing.T) {
	for _, tc := range []struct{ name, format string }{
		{"resources.golden", FormatTable},
		{"resources-wide.golden", FormatWide},
		{"resources-name.golden", FormatName},
	} {
		var b bytes.Buffer
		if err := Resources(&b, sampleResources(), tc.format, now); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.name, b.Bytes())
	}
}

func TestTypeAndWebhookTables(t *testing.T) {
	types := []client.ResourceType{
		{Name: "DatabaseCluster", Version: "v1", Description: "A managed database cluster", ResourceVersion: 3, CreatedAt: now.Add(-400 * 24 * time.Hour),
			ReconcilePolicy: resource.ReconcilePolicy{ResyncSeconds: 300, TimeoutSeconds: 300}},
		{Name: "Bucket", Version: "v2beta1", ResourceVersion: 12, CreatedAt: now.Add(-90 * time.Minute),
			ReconcilePolicy: resource.ReconcilePolicy{ResyncSeconds: 60, TimeoutSeconds: 30}},
	}
	for _, tc := range []struct{ name, format string }{{"types.golden", FormatTable}, {"types-wide.golden", FormatWide}} {
		var b bytes.Buffer
		if err := Types(&b, types, tc.format, now); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.name, b.Bytes())
	}
	typ, ver := "Bucket", "v2beta1"
	hooks := []client.Webhook{
		{Name: "bucket-policy", WebhookType: "validating", Operations: []string{"CREATE", "UPDATE"}, ResourceTypeName: &typ, ResourceTypeVersion: &ver, FailurePolicy: "Ignore", CreatedAt: now.Add(-2 * time.Hour)},
		{Name: "defaults", WebhookType: "mutating", Operations: []string{"CREATE"}, FailurePolicy: "Fail", CreatedAt: now.Add(-9 * time.Second)},
	}
	var b bytes.Buffer
	if err := Webhooks(&b, hooks, FormatTable, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "webhooks.golden", b.Bytes())
}

func TestNamespaceTables(t *testing.T) {
	deleted := now.Add(-3 * time.Second)
	nss := []client.Namespace{
		{Name: "default", UID: "0f1e2d3c-0000-4000-8000-000000000001", Status: resource.NamespaceActive, ResourceVersion: 1, CreatedAt: now.Add(-40 * 24 * time.Hour), UpdatedAt: now.Add(-40 * 24 * time.Hour)},
		{Name: "team-a", UID: "0f1e2d3c-0000-4000-8000-000000000002", Status: resource.NamespaceActive, ResourceVersion: 118, CreatedAt: now.Add(-5*time.Minute - 10*time.Second), UpdatedAt: now.Add(-5*time.Minute - 10*time.Second)},
		{Name: "a-long-namespace-name-for-alignment", UID: "0f1e2d3c-0000-4000-8000-000000000003", Status: resource.NamespaceTerminating, ResourceVersion: 131,
			CreatedAt: now.Add(-26 * time.Hour), UpdatedAt: deleted, DeletedAt: &deleted},
	}
	for _, tc := range []struct{ name, format string }{
		{"namespaces.golden", FormatTable},
		{"namespaces-wide.golden", FormatWide},
		{"namespaces-name.golden", FormatName},
		{"namespaces-yaml.golden", FormatYAML},
	} {
		var b bytes.Buffer
		if err := Namespaces(&b, nss, tc.format, now); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.name, b.Bytes())
	}
	var b bytes.Buffer
	if err := Namespaces(&b, nil, FormatJSON, now); err != nil || b.String() != "[]\n" {
		t.Fatalf("no namespaces as JSON: %q %v", b.String(), err)
	}
}

func TestHistoryTable(t *testing.T) {
	msg := "dial tcp 10.0.0.7:5432: connection refused"
	h := []client.HistoryEntry{
		{ID: 9, Generation: 2, Success: false, Phase: "failed", ErrorMessage: &msg, DurationMS: 1520, StartedAt: ptr(now.Add(-30 * time.Second)), Holder: "noop/a", Reason: "retry"},
		{ID: 4, Generation: 1, Success: true, Phase: "completed", DurationMS: 12, StartedAt: ptr(now.Add(-3 * time.Hour)), Holder: "noop/b", Reason: "pending"},
	}
	var b bytes.Buffer
	if err := History(&b, h, FormatTable, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "history.golden", b.Bytes())
}

func TestYAMLKeepsOrderAndNumbers(t *testing.T) {
	out, err := JSONToYAML([]byte(`{"z": 1, "a": {"n": 1.50, "s": "yes", "e": 1e3, "nil": null, "l": [true, "x"]}, "empty": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := "z: 1\na:\n  n: 1.50\n  s: \"yes\"\n  e: 1e3\n  nil: null\n  l:\n    - true\n    - x\nempty: {}\n"
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 59 * time.Second: "59s", 5*time.Minute + 10*time.Second: "5m10s", 7 * time.Minute: "7m",
		90 * time.Minute: "90m", 5*time.Hour + 3*time.Minute: "5h3m", 26 * time.Hour: "26h", 76 * time.Hour: "3d4h",
		30 * 24 * time.Hour: "30d", 800 * 24 * time.Hour: "2y", -time.Minute: "0s",
	} {
		if got := Age(now, now.Add(-d)); got != want {
			t.Errorf("Age(%v) = %s, want %s", d, got, want)
		}
	}
	if Age(now, time.Time{}) != "<unknown>" {
		t.Error("zero time")
	}
}

func ptr[T any](v T) *T { return &v }
