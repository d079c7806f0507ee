package subjects

// KVKey is the subject a KV bucket's key is written on: NATS's own layout,
// $KV.<bucket>.<key>. NATS permissions name a bucket's keys by it.
func KVKey(bucket, key string) string { return "$KV." + bucket + "." + key }

// KVStream is the stream NATS keeps a KV bucket in: KV_<bucket>.
func KVStream(bucket string) string { return "KV_" + bucket }

// Family is one family of subjects no8s sends messages on: a pattern that a
// NATS permission names, with one subject of it for tests and tables.
type Family struct {
	// Name is how the security guide's table names the family.
	Name string
	// Pattern matches every subject of the family (NATS wildcards).
	Pattern string
	// Example is one subject of the family. Where a family is per type or
	// per reconciler, it is of the type Example/v1 and the reconciler
	// example.
	Example string
}

// The type and reconciler the per-type and per-reconciler families' Example
// subjects name.
const (
	ExampleType       = "Example"
	ExampleVersion    = "v1"
	ExampleReconciler = "example"
)

// Families are every family of subjects no8s uses, in the security guide's
// order. A family missing here is missing from the NATS permission policy's
// table and its tests (services/internal/authz).
func Families() []Family {
	return []Family{
		{"events", EventsAll, Event(ExampleType, ExampleVersion)},
		{"outbox wake", WakeSubject, WakeSubject},
		{"work items", ReconcileAll, Reconcile(ExampleType, ExampleVersion)},
		{"registry type keys", KVKey(RegistryBucket, typeKeyPrefix+">"), KVKey(RegistryBucket, TypeKey(ExampleType, ExampleVersion))},
		{"registry replica keys", KVKey(RegistryBucket, replicaKeyPrefix+">"), KVKey(RegistryBucket, ReplicaKey(ExampleReconciler, "r1"))},
		{"input requests", InputRequestPrefix + ".>", InputRequestApply},
		{"input queue", InputQueueAll, InputQueueApply},
		{"input outcomes", InputOutcomesAll, InputOutcome("k1")},
		{"input dead letters", InputDead, InputDead},
		{"input keys", KVKey(InputKeysBucket, ">"), KVKey(InputKeysBucket, "k1")},
		{"audit records", AuditAll, Audit("denied")},
	}
}

// Streams are every stream no8s keeps, KV buckets' included, in the
// security guide's order.
func Streams() []string {
	return []string{EventsStream, ReconcileStream, KVStream(RegistryBucket), InputStream, InputOutcomesStream, InputDeadStream, KVStream(InputKeysBucket), AuditStream}
}
