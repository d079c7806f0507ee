package subjects

import (
	"strings"
	"time"
)

// The event stream: one event per committed change, in revision order.
const (
	// EventsStream is the event stream's name.
	EventsStream = "NO8S_EVENTS"
	// EventsPrefix prefixes the event subjects:
	// no8s.events.<Type>.<version>.
	EventsPrefix = "no8s.events"
	// EventsAll matches every event subject (the stream's subject filter).
	EventsAll = EventsPrefix + ".>"
)

// Event is the subject of events about resources of one type and version.
func Event(typeName, version string) string {
	return EventsPrefix + "." + typeName + "." + version
}

// Settings of the event stream, created by the store's relay.
const (
	// EventsMaxAge is how long events are kept: the watch resume horizon.
	EventsMaxAge = 24 * time.Hour
	// EventsDuplicates is the deduplication window for republished
	// revisions (the Nats-Msg-Id is the revision).
	EventsDuplicates = 10 * time.Minute
)

// StreamSettings are the settings of a stream that its creator chooses: the
// event stream's (the store's relay) and the work queue's (the scheduler).
type StreamSettings struct {
	// MaxAge drops messages older than this.
	MaxAge time.Duration
	// Duplicates is the window in which a republished message id is
	// dropped.
	Duplicates time.Duration
	// Replicas is the stream replication factor (1 on a single server).
	Replicas int
	// Memory keeps the stream in memory (tests only).
	Memory bool
}

// EventsSettings are the event stream's default settings.
func EventsSettings() StreamSettings {
	return StreamSettings{MaxAge: EventsMaxAge, Duplicates: EventsDuplicates, Replicas: 1}
}

// ReconcileSettings are the work queue stream's default settings.
func ReconcileSettings() StreamSettings {
	return StreamSettings{MaxAge: ReconcileMaxAge, Duplicates: ReconcileDuplicates, Replicas: 1}
}

// WakeSubject carries core-NATS hints that the outbox has new rows.
const WakeSubject = "no8s.internal.outbox.wake"

// The work queue: one work item per dispatch, consumed once by the
// reconciler serving the type.
const (
	// ReconcileStream is the work queue stream's name.
	ReconcileStream = "NO8S_RECONCILE"
	// ReconcilePrefix prefixes the work item subjects:
	// no8s.reconcile.<Type>.<version>.
	ReconcilePrefix = "no8s.reconcile"
	// ReconcileAll matches every work item subject (the stream's subject
	// filter).
	ReconcileAll = ReconcilePrefix + ".>"
)

// Reconcile is the subject of work items for one type and version.
func Reconcile(typeName, version string) string {
	return ReconcilePrefix + "." + typeName + "." + version
}

// Settings of the work queue stream, whoever creates it first (the
// scheduler or a worker). Its retention is work-queue: a message is gone
// once a consumer acknowledges it.
const (
	// ReconcileMaxAge drops items nobody consumed for this long (the
	// scheduler dispatches again whatever still needs it).
	ReconcileMaxAge = 24 * time.Hour
	// ReconcileDuplicates is the window in which a republished dispatch id
	// (the Nats-Msg-Id) is dropped.
	ReconcileDuplicates = 2 * time.Minute
)

// The reconciler registry: a KV bucket in which every worker replica
// announces its reconciler and claims the types it serves.
//
// Layout: key type.<Type>.<version> = the reconciler's name (one reconciler
// per type); key replica.<name>.<id> = JSON {name, replica, types:
// [{name, version}], started_at}. Keys are refreshed every few seconds
// (RegistryHeartbeat) and vanish with the bucket's max age (RegistryTTL)
// once their replica stops.
const (
	// RegistryBucket is the KV bucket's name.
	RegistryBucket = "NO8S_RECONCILERS"
	// RegistryTTL is the bucket's max age: a replica that stops refreshing
	// is gone from the registry this long after its last heartbeat.
	RegistryTTL = 15 * time.Second
	// RegistryHeartbeat is how often a replica refreshes its keys.
	RegistryHeartbeat = 5 * time.Second

	typeKeyPrefix    = "type."
	replicaKeyPrefix = "replica."
)

// TypeKey is the registry key that claims a type.
func TypeKey(typeName, version string) string {
	return typeKeyPrefix + typeName + "." + version
}

// ReplicaKey is the registry key of one replica of a reconciler.
func ReplicaKey(reconciler, replica string) string {
	return replicaKeyPrefix + reconciler + "." + replica
}

// ParseTypeKey returns the type and version a TypeKey names; ok is false
// for any other key.
func ParseTypeKey(key string) (typeName, version string, ok bool) {
	rest, found := strings.CutPrefix(key, typeKeyPrefix)
	if !found {
		return "", "", false
	}
	typeName, version, ok = strings.Cut(rest, ".")
	if !ok || typeName == "" || version == "" || strings.Contains(version, ".") {
		return "", "", false
	}
	return typeName, version, true
}

// IsReplicaKey reports whether key is a ReplicaKey.
func IsReplicaKey(key string) bool { return strings.HasPrefix(key, replicaKeyPrefix) }
