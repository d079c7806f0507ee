//go:build ignore

// Package cyclo is the check-cyclo script's own test: tooComplex is over
// the limit on purpose, so `.ci/check-cyclo .ci/testdata/cyclo` must fail
// naming it. Never compiled (the build tag, and testdata/ is outside
// every module).
package cyclo

// tooComplex has a cyclomatic complexity of 30: one for the function and
// one for each if, for, case and && below.
func tooComplex(n int, s string) int {
	total := 0
	if n > 0 {
		total++
	}
	if n > 1 {
		total++
	}
	if n > 2 && s != "" {
		total++
	}
	if n > 3 && s != "a" {
		total++
	}
	if n > 4 && s != "b" {
		total++
	}
	for i := 0; i < n; i++ {
		total += i
	}
	switch s {
	case "a":
		total += 1
	case "b":
		total += 2
	case "c":
		total += 3
	case "d":
		total += 4
	case "e":
		total += 5
	case "f":
		total += 6
	case "g":
		total += 7
	case "h":
		total += 8
	case "i":
		total += 9
	case "j":
		total += 10
	case "k":
		total += 11
	case "l":
		total += 12
	case "m":
		total += 13
	case "n":
		total += 14
	case "o":
		total += 15
	case "p":
		total += 16
	}
	switch {
	case n == 10:
		total *= 2
	case n == 20:
		total *= 3
	case n == 30:
		total *= 4
	case n == 40:
		total *= 5
	}
	return total
}

// simple stays under the limit and must not be reported.
func simple(n int) int {
	if n > 0 {
		return n
	}
	return -n
}
