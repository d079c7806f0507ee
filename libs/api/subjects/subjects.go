package subjects

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/names"
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
	// revisions (the Nats-Msg-Id is the revision). It is a second guard:
	// the relay chains every publish to the stream's last sequence and
	// message id, and after a restart continues after the stream's newest
	// event. The server keeps one id per event in the window, so a longer
	// one costs memory (about 100 bytes per event) and guards nothing more.
	EventsDuplicates = 2 * time.Minute
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
// Layout: key type.<Type>.<version> = the claim of the reconciler serving
// the type (TypeClaim: its name, or JSON {reconciler, finalizers} when it
// owns finalizers beyond its own; one reconciler per type); key
// replica.<name>.<id> = JSON {name, replica, types: [{name, version}],
// finalizers, started_at}. Keys are refreshed every few seconds
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

// TypeClaim is the value of a TypeKey: the reconciler that serves the type
// and the finalizers it owns beyond its own reconciler.no8s.io/<name> (its
// action plugins', such as github_actions). Admission adds them all to a new
// resource of the type (CreationFinalizers); the store's worker door lets
// that reconciler, and no other, add and remove them (Owns).
//
// Encoded (Encode) as the bare name when there is nothing more to say, as
// every claim was before reconcilers declared finalizers, and as JSON
// {"reconciler": name, "finalizers": [...]} otherwise; ParseTypeClaim reads
// both (a reconciler name, a DNS label, never starts with '{').
type TypeClaim struct {
	Reconciler string   `json:"reconciler"`
	Finalizers []string `json:"finalizers,omitempty"`
}

// Encode is the claim as a TypeKey value.
func (c TypeClaim) Encode() []byte {
	if len(c.Finalizers) == 0 {
		return []byte(c.Reconciler)
	}
	b, _ := json.Marshal(c) // strings only: cannot fail
	return b
}

// ParseTypeClaim reads a TypeKey value; ok is false when it names no valid
// reconciler. Declared finalizers that are not valid (names.DeclaredFinalizer)
// are dropped.
func ParseTypeClaim(value []byte) (c TypeClaim, ok bool) {
	if len(value) > 0 && value[0] == '{' {
		if json.Unmarshal(value, &c) != nil {
			return TypeClaim{}, false
		}
	} else {
		c.Reconciler = string(value)
	}
	if names.Name("", c.Reconciler) != nil {
		return TypeClaim{}, false
	}
	c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return names.DeclaredFinalizer("", f) != nil })
	if len(c.Finalizers) == 0 {
		c.Finalizers = nil
	}
	return c, true
}

// CreationFinalizers are the finalizers a new resource of the type carries
// from creation: the reconciler's own, then the ones it declared.
func (c TypeClaim) CreationFinalizers() []string {
	out := []string{names.ReconcilerFinalizer(c.Reconciler)}
	for _, f := range c.Finalizers {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// Owns reports whether reconciler may add and remove finalizer f on
// resources of the claimed type: its own reconciler.no8s.io/<name> always,
// a declared one only when it is the claim's reconciler.
func (c TypeClaim) Owns(reconciler, f string) bool {
	if f == names.ReconcilerFinalizer(reconciler) {
		return true
	}
	return reconciler == c.Reconciler && !strings.HasPrefix(f, names.ReconcilerFinalizerPrefix) && slices.Contains(c.Finalizers, f)
}

// IsReplicaKey reports whether key is a ReplicaKey.
func IsReplicaKey(key string) bool { return strings.HasPrefix(key, replicaKeyPrefix) }
