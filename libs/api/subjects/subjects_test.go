package subjects

import "testing"

func TestNames(t *testing.T) {
	for got, want := range map[string]string{
		Event("PostgresDatabase", "v1"):     "no8s.events.PostgresDatabase.v1",
		Reconcile("PostgresDatabase", "v1"): "no8s.reconcile.PostgresDatabase.v1",
		TypeKey("PostgresDatabase", "v1"):   "type.PostgresDatabase.v1",
		ReplicaKey("noop", "host-1"):        "replica.noop.host-1",
		EventsAll:                           "no8s.events.>",
		ReconcileAll:                        "no8s.reconcile.>",
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
