package cli

import (
	"fmt"
	"strings"
)

// unifiedDiff is the unified diff (3 lines of context) turning a into b,
// with the given file labels; "" when they are equal.
func unifiedDiff(a, b, labelA, labelB string) string {
	if a == b {
		return ""
	}
	x, y := lines(a), lines(b)
	ops := diffLines(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", labelA, labelB)
	const ctx = 3
	// Group the edit script into hunks with ctx lines around changes.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-ctx, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// A run of equal lines: the hunk ends unless another change
			// follows within 2*ctx lines.
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		aStart, bStart := ops[start].a, ops[start].b
		var aLen, bLen int
		var body strings.Builder
		for _, op := range ops[start:end] {
			body.WriteByte(op.kind)
			body.WriteString(op.text)
			body.WriteByte('\n')
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		out.WriteString(body.String())
		i = end
	}
	return out.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// edit is one line of an edit script: ' ' kept, '-' removed, '+' added;
// a and b are the line's (or the position's) index in each text.
type edit struct {
	kind byte
	text string
	a, b int
}

// diffLines is a longest-common-subsequence edit script (documents are
// small: quadratic is fine).
func diffLines(x, y []string) []edit {
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []edit
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, edit{' ', x[i], i, j})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, edit{'-', x[i], i, j})
			i++
		default:
			ops = append(ops, edit{'+', y[j], i, j})
			j++
		}
	}
	return ops
}
