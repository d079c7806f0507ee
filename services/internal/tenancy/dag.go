package tenancy

import (
	"fmt"
	"slices"
	"strings"
)

// CycleError is a dependency cycle among a Tenant's resources; Cycle lists
// its ids, the first repeated at the end (a -> b -> a).
type CycleError struct{ Cycle []string }

func (e *CycleError) Error() string { return "dependency cycle: " + strings.Join(e.Cycle, " -> ") }

// Order returns the indexes of rs in an apply order: every resource after
// the resources its dependIds name, and otherwise in template order (Kahn's
// algorithm, always taking the first resource whose dependencies are
// placed). A cycle is a *CycleError; a dependId naming no resource is an
// error. Admission refuses both in templates; a Tenant carries a copy, so
// the reconciler checks again.
func Order(rs []TResource) ([]int, error) {
	index := make(map[string]int, len(rs))
	for i, r := range rs {
		if _, dup := index[r.ID]; dup {
			return nil, fmt.Errorf("resource id %q is used twice", r.ID)
		}
		index[r.ID] = i
	}
	pending := make([]int, len(rs)) // unplaced dependencies of each
	dependents := make([][]int, len(rs))
	for i, r := range rs {
		for _, d := range r.DependIDs {
			j, ok := index[d]
			if !ok {
				return nil, fmt.Errorf("resource %q depends on %q: no resource has that id", r.ID, d)
			}
			pending[i]++
			dependents[j] = append(dependents[j], i)
		}
	}
	order := make([]int, 0, len(rs))
	placed := make([]bool, len(rs))
	for len(order) < len(rs) {
		next := -1
		for i := range rs {
			if !placed[i] && pending[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			cycle := findCycle(rs, index)
			if cycle == nil { // a self-dependency: findCycle skips those
				for i, r := range rs {
					if !placed[i] && slices.Contains(r.DependIDs, r.ID) {
						cycle = []string{r.ID, r.ID}
						break
					}
				}
			}
			return nil, &CycleError{Cycle: cycle}
		}
		placed[next] = true
		order = append(order, next)
		for _, d := range dependents[next] {
			pending[d]--
		}
	}
	return order, nil
}
