package subjects

import (
	"strings"
	"testing"
)

func TestValidInputKey(t *testing.T) {
	for key, want := range map[string]bool{
		"order-42_a":                             true,
		"0d9f6c1e-3b5a-4c1e-9f3e-1a2b3c4d5e6f":   true,
		strings.Repeat("k", InputMaxKeyLength):   true,
		"":                                       false,
		strings.Repeat("k", InputMaxKeyLength+1): false,
		"a.b":                                    false,
		"a b":                                    false,
		"a*":                                     false,
		"a>":                                     false,
		"ä":                                      false,
	} {
		if got := ValidInputKey(key); got != want {
			t.Errorf("ValidInputKey(%q) = %v, want %v", key, got, want)
		}
	}
	if InputOutcome("k1") != "no8s.input.outcome.k1" {
		t.Fatal(InputOutcome("k1"))
	}
}
