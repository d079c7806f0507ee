// Package api is the lifecycle's vocabulary, shared by every service and the
// SDK: the names on the wire and their rules. It imports only the standard
// library, so that anything may import it.
//
//   - subjects: JetStream stream, subject and KV names and their settings;
//   - lifecycle: condition statuses and merging, phases and the phase rule,
//     the outcome and reason enums;
//   - names: resource name, metadata and finalizer validation and limits.
//
// Each rule is written once, here; the services and the SDK call it.
package api
