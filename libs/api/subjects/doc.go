// Package subjects names what no8s keeps in NATS: the event stream
// NO8S_EVENTS and its subjects, the work queue NO8S_RECONCILE with its
// subjects and settings, the outbox wake subject, and the reconciler
// registry's KV bucket NO8S_RECONCILERS with its key layout and TTL.
//
// It holds names, key functions and plain settings only; the JetStream calls
// that create streams and buckets stay with their callers
// (services/internal/eventstream, services/scheduler/dispatch,
// libs/sdk/worker, libs/sdk/registry, services/internal/reconcilers).
package subjects
