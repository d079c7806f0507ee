package lifecycle

import (
	"fmt"
	"strings"
)

// Propagation is what the deletion of a resource does to its dependents
// (the resources whose owner references name it), as Kubernetes'
// propagationPolicy: Background, Foreground or Orphan. The zero value is
// Background.
type Propagation string

// The propagation policies of a deletion.
const (
	// PropagationBackground deletes the owner at once; the garbage
	// collector deletes its dependents after it is purged.
	PropagationBackground Propagation = "Background"
	// PropagationForeground keeps the owner deleting, with the finalizer
	// FinalizerForeground, until every dependent that blocks its owner's
	// deletion is gone.
	PropagationForeground Propagation = "Foreground"
	// PropagationOrphan keeps the owner deleting, with the finalizer
	// FinalizerOrphan, until the owner references to it are removed from
	// every dependent; the dependents are kept.
	PropagationOrphan Propagation = "Orphan"
)

// The finalizers a deletion's propagation adds, removed only by the
// garbage collector.
const (
	FinalizerForeground = "foregroundDeletion"
	FinalizerOrphan     = "orphan"
)

// Propagations are the policies, in the order the API lists them.
func Propagations() []Propagation {
	return []Propagation{PropagationBackground, PropagationForeground, PropagationOrphan}
}

// ParsePropagation returns the policy s names, case-insensitively
// ("background" and "Background" alike; "" is Background). An error names
// the allowed values.
func ParsePropagation(s string) (Propagation, error) {
	if s == "" {
		return PropagationBackground, nil
	}
	for _, p := range Propagations() {
		if strings.EqualFold(s, string(p)) {
			return p, nil
		}
	}
	return "", fmt.Errorf("propagation policy %q: must be one of Background, Foreground or Orphan", s)
}

// Finalizer is the finalizer the deletion with policy p adds ("" for
// Background, which adds none).
func (p Propagation) Finalizer() string {
	switch p {
	case PropagationForeground:
		return FinalizerForeground
	case PropagationOrphan:
		return FinalizerOrphan
	}
	return ""
}
