package lifecycle

// Phases aggregate a resource's state into one word, the kind a kubectl get
// column shows; PhaseOf is the rule.
const (
	// PhaseTerminating: the resource is being deleted.
	PhaseTerminating = "Terminating"
	// PhaseReady: not deleting, the last attempt succeeded, and every
	// condition is True.
	PhaseReady = "Ready"
	// PhaseDegraded: the last attempt reported a partial failure while the
	// resource still serves (some replicas work, others not).
	PhaseDegraded = "Degraded"
	// PhaseProgressing: anything else; at least one condition is not True
	// and says why.
	PhaseProgressing = "Progressing"
)

// PhaseFacts are what the phase rule looks at.
type PhaseFacts struct {
	// Deleting: the resource is being deleted.
	Deleting bool
	// Degraded: the last attempt reported a partial failure while the
	// resource still serves (an sdk.Degraded error).
	Degraded bool
	// Succeeded: the last attempt succeeded (lifecycle status ready).
	Succeeded bool
	// Statuses are the statuses of every condition, Ready included.
	Statuses []Status
}

// PhaseOf is the phase rule, written only here: the store derives every
// stored phase with it and the SDK engine its Completion.Phase.
//
//   - Terminating while the resource is being deleted;
//   - Degraded when the last attempt reported a partial failure while the
//     resource still serves;
//   - Ready when the last attempt succeeded and every condition is True;
//   - Progressing otherwise (a condition that is not True says why).
func PhaseOf(f PhaseFacts) string {
	switch {
	case f.Deleting:
		return PhaseTerminating
	case f.Degraded:
		return PhaseDegraded
	case !f.Succeeded:
		return PhaseProgressing
	}
	for _, s := range f.Statuses {
		if s != True {
			return PhaseProgressing
		}
	}
	return PhaseReady
}
