// Package lifecycle holds the rules of a resource's status that the store
// and the SDK must apply alike:
//
//   - conditions: the three statuses, the condition record, and Merge, the
//     one rule for storing a condition (its type is its key;
//     LastTransitionTime moves only when the status changes);
//   - phases: the four phases and PhaseOf, the one phase rule;
//   - the Outcome of an attempt and the Reason of a dispatch, with their
//     protobuf names (mapped by name, never by number).
//
// Condition is generic in its status type so that the SDK
// (libs/sdk/conditions, Status) and the services (services/internal/resource,
// string) share the record and its rule.
package lifecycle
