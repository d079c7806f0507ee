// Package conditions keeps a resource's status conditions the way the openMCP
// controller guidelines ask (Kubernetes' own condition conventions):
//
//   - a condition's Type is its key: a list holds at most one per type;
//   - each condition carries the generation it was computed for
//     (ObservedGeneration), so an old condition is never mistaken for a
//     current one;
//   - LastTransitionTime moves only when Status changes, never when only the
//     reason or message does;
//   - old conditions are kept, not deleted, when a run does not touch them;
//   - Ready is derived from the others, and the phase from Ready and
//     deletion: Terminating while deleting, Ready when every condition is
//     True, else Progressing.
//
// The condition record, the merge rule (Set) and the phase rule (PhaseOf)
// are libs/api/lifecycle's, which the store applies too; this package names
// them for reconcilers and adds the helpers a reconciler needs.
//
// The functions are pure: they take the current time as an argument and
// return new slices, so they are easy to test and safe to call from steps.
package conditions
