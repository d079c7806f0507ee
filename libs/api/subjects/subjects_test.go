package subjects

import (
	"fmt"
	"testing"
)

func TestNames(t *testing.T) {
	for got, want := range map[string]string{
		Event("PostgresDatabase", "v1"):     "no8s.events.PostgresDatabase.v1",
		Reconcile("PostgresDatabase", "v1"): "no8s.reconcile.PostgresDatabase.v1",
		TypeKey("PostgresDatabase", "v1"):   "type.PostgresDatabase.v1",
		ReplicaKey("noop", "host-1"):        "replica.noop.host-1",
		EventsAll:                           "no8s.events.>",
		ReconcileAll:                        "no8s.reconcile.>",
		Audit("denied"):                     "no8s.audit.denied",
		AuditAll:                            "no8s.audit.>",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestParseTypeKey(t *testing.T) {
	n, v, ok := ParseTypeKey(TypeKey("Widget", "v1beta1"))
	if !ok || n != "Widget" || v != "v1beta1" {
		t.Fatalf("ParseTypeKey = %q %q %v", n, v, ok)
	}
	for _, k := range []string{"replica.a.b", "type.", "type.Widget", "type.Widget.", "type..v1", "type.A.v1.x"} {
		if _, _, ok := ParseTypeKey(k); ok {
			t.Errorf("ParseTypeKey(%q) accepted", k)
		}
	}
	if !IsReplicaKey(ReplicaKey("a", "b")) || IsReplicaKey(TypeKey("A", "v1")) {
		t.Error("IsReplicaKey")
	}
}

func TestTypeClaim(t *testing.T) {
	plain := TypeClaim{Reconciler: "noop"}
	if got := string(plain.Encode()); got != "noop" {
		t.Fatalf("a claim without finalizers encodes as %q, want the bare name", got)
	}
	gh := TypeClaim{Reconciler: "github-workflow", Finalizers: []string{"github_actions"}}
	for _, c := range []TypeClaim{plain, gh} {
		back, ok := ParseTypeClaim(c.Encode())
		if !ok || back.Reconciler != c.Reconciler || fmt.Sprint(back.Finalizers) != fmt.Sprint(c.Finalizers) {
			t.Errorf("round trip of %+v: %+v %v", c, back, ok)
		}
	}
	for _, bad := range []string{"", "{", `{"finalizers": ["x"]}`, `{"reconciler": 1}`, `{"reconciler": "{x"}`, "Upper"} {
		if c, ok := ParseTypeClaim([]byte(bad)); ok {
			t.Errorf("ParseTypeClaim(%q) = %+v", bad, c)
		}
	}
	if c, ok := ParseTypeClaim([]byte(`{"reconciler": "gh", "finalizers": ["ok", "reconciler.no8s.io/other", "a b"]}`)); !ok || fmt.Sprint(c.Finalizers) != "[ok]" {
		t.Errorf("invalid declared finalizers kept: %+v", c)
	}
	if got := fmt.Sprint(gh.CreationFinalizers()); got != "[reconciler.no8s.io/github-workflow github_actions]" {
		t.Errorf("creation finalizers %s", got)
	}
	for _, tc := range []struct {
		reconciler, finalizer string
		want                  bool
	}{
		{"github-workflow", "reconciler.no8s.io/github-workflow", true},
		{"github-workflow", "github_actions", true},
		{"other", "github_actions", false},                 // declared by another reconciler
		{"other", "reconciler.no8s.io/other", true},        // its own, whoever holds the type
		{"github-workflow", "reconciler.no8s.io/x", false}, // another reconciler's
		{"github-workflow", "example.com/external", false}, // not declared
	} {
		if got := gh.Owns(tc.reconciler, tc.finalizer); got != tc.want {
			t.Errorf("Owns(%q, %q) = %v, want %v", tc.reconciler, tc.finalizer, got, tc.want)
		}
	}
}

// FuzzParseTypeClaim: whatever a registry value holds, parsing neither
// panics nor yields a claim without a reconciler, and what it yields
// survives its own encoding.
func FuzzParseTypeClaim(f *testing.F) {
	for _, s := range []string{"noop", `{"reconciler":"gh","finalizers":["github_actions"]}`, "{}", `{"reconciler":""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ok := ParseTypeClaim(b)
		if !ok {
			return
		}
		if c.Reconciler == "" {
			t.Fatalf("claim without a reconciler from %q", b)
		}
		back, ok := ParseTypeClaim(c.Encode())
		if !ok || back.Reconciler != c.Reconciler || len(back.Finalizers) != len(c.Finalizers) {
			t.Fatalf("%q: %+v does not survive its encoding: %+v %v", b, c, back, ok)
		}
	})
}
