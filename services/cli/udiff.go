package cli

import (
	udiff "github.com/aymanbagabas/go-udiff"
)

// unifiedDiff is the unified diff (3 lines of context) turning a into b,
// with the given file labels; "" when they are equal.
func unifiedDiff(a, b, labelA, labelB string) string {
	if a == b {
		return ""
	}
	return udiff.Unified(labelA, labelB, a, b)
}
