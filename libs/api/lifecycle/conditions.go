package lifecycle

import (
	"slices"
	"time"
)

// Status is a condition's status: True, False or Unknown.
type Status string

// The three condition statuses.
const (
	True    Status = "True"
	False   Status = "False"
	Unknown Status = "Unknown"
)

// Valid reports whether s is one of True, False and Unknown.
func (s Status) Valid() bool { return s == True || s == False || s == Unknown }

// StatusOf returns True for true and False for false.
func StatusOf(ok bool) Status {
	if ok {
		return True
	}
	return False
}

// ConditionReady is the type of the derived condition: True exactly when
// every other condition is True and the last reconcile succeeded.
const ConditionReady = "Ready"

// Condition is one observed aspect of a resource's state. S is the status's
// Go type: Status in the SDK, string in the services.
type Condition[S ~string] struct {
	// Type is the key, unique within a list (for example DatabaseExists).
	Type string `json:"type"`
	// Status is True, False or Unknown.
	Status S `json:"status"`
	// Reason is a CamelCase machine-readable word.
	Reason string `json:"reason,omitempty"`
	// Message is for humans.
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the resource generation the condition was
	// computed for.
	ObservedGeneration int64 `json:"observed_generation"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime time.Time `json:"last_transition_time"`
}

// IsTrue reports whether the condition's status is True.
func (c Condition[S]) IsTrue() bool { return Status(c.Status) == True }

// Merge is the condition rule: it returns list with each condition of in
// stored under its type, replacing any condition of the same type, and
// whether anything changed. list itself is not modified.
//
//   - LastTransitionTime is kept from the stored condition when the status
//     did not change (and the stored time is set), and is now when it did or
//     when the condition is new; the one given in in is ignored;
//   - a zero ObservedGeneration becomes generation (pass 0 to leave it);
//   - an empty or invalid status is stored as Unknown.
func Merge[S ~string](list, in []Condition[S], generation int64, now time.Time) ([]Condition[S], bool) {
	out := slices.Clone(list)
	changed := false
	for _, c := range in {
		if !Status(c.Status).Valid() {
			c.Status = S(Unknown)
		}
		if c.ObservedGeneration == 0 {
			c.ObservedGeneration = generation
		}
		i := slices.IndexFunc(out, func(o Condition[S]) bool { return o.Type == c.Type })
		if i < 0 {
			c.LastTransitionTime = now
			out = append(out, c)
			changed = true
			continue
		}
		c.LastTransitionTime = out[i].LastTransitionTime
		if out[i].Status != c.Status || c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		if out[i] != c {
			out[i] = c
			changed = true
		}
	}
	return out, changed
}

// Statuses lists the status of each condition, for PhaseFacts.
func Statuses[S ~string](list []Condition[S]) []Status {
	out := make([]Status, len(list))
	for i, c := range list {
		out[i] = Status(c.Status)
	}
	return out
}
