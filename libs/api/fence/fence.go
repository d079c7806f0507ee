// Package fence names how a fenced client write travels: a singleton client
// (the registry-sync leader) carries the name of its leader lease and the
// epoch it holds with each write, as HTTP headers to the gateway and as gRPC
// metadata from the gateway to the store, which commits the write only
// while that epoch is the lease's current one and unexpired, checked in the
// write's own transaction (docs/design/tenants.md, "Fenced client writes").
package fence

// HTTP request headers of a fenced write (POST, PUT, PATCH and DELETE of
// resources, finalizers and events).
const (
	HeaderLease = "X-No8s-Fence-Lease"
	HeaderEpoch = "X-No8s-Fence-Epoch"
)

// gRPC metadata keys of a fenced write to the store.
const (
	MetadataLease = "no8s-fence-lease"
	MetadataEpoch = "no8s-fence-epoch"
)

// GarbageCollectorLease is the leader lease of the garbage collector (in
// the scheduler): its epoch fences the collector's writes.
const GarbageCollectorLease = "garbage-collector"
